"""What ``statifier run`` prints: one reporter for virtual and live runs, text or JSON.

Both drivers feed the reporter the same things (every effect as it happens, a step after
each input, the end of the run), so both print the same text and the same JSON records.
The JSON shape is one object per line, told apart by ``record``:

``effect``
    ``{"record": "effect", "t_ms", "session", "effect": <class name>, "counters":
    [macrostep, microstep, round], ...the effect's fields}``
``notice``
    ``{"record": "notice", "t_ms", "session", "kind": "unmatched-event", "event",
    "message"}``: an external event no transition matched.
``step``
    ``{"record": "step", "step": "initialize" | "event NAME" | "timers", "t_ms",
    "status", "configuration": [active state ids], "pending_timers": [{"session",
    "event", "send_id", "due_ms"}]}``
``end``
    ``{"record": "end", "t_ms", "status", "configuration", "pending_timers", "reason":
    "idle" | "halted" | "wait-expired" | "strict"}``

``t_ms`` is virtual time in a virtual run and milliseconds since the start in a live one.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from statifier.chart.durations import format_duration
from statifier.chart.matching import unmatched_notice
from statifier.chart.model import Machine
from statifier.cli.kit import visible
from statifier.core import effects as fx
from statifier.values import brief
from statifier.virtual.driver import describe_timer

_COUNTERS = ("macrostep", "microstep", "round")


@dataclass(frozen=True, slots=True)
class PendingTimer:
    """A delayed send that has not fired yet."""

    session: str
    event: str
    send_id: str
    due_ms: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Where a run stands after a step."""

    t_ms: int
    status: str
    configuration: tuple[str, ...]
    pending: tuple[PendingTimer, ...]


class Reporter:
    """Prints a run's effects, notices and steps, and remembers unmatched external events.

    ``machine_for`` maps a session id to its chart (None when unknown) so transitions can be
    described by their source, targets and line. ``place`` says where a line of the top
    chart is (the Python line that made its element, for a chart written in Python);
    without it, lines are named ``chart:line``.
    """

    def __init__(
        self,
        out: TextIO,
        top: str,
        machine_for: Callable[[str], Machine | None],
        *,
        as_json: bool,
        trace: bool,
        chart: str = "<chart>",
        place: Callable[[int], str] | None = None,
    ) -> None:
        self.out = out
        self.top = top
        self.chart = chart
        self.place = place
        self.machine_for = machine_for
        self.as_json = as_json
        self.trace = trace
        self.unmatched: list[str] = []
        self._dequeued: dict[str, str] = {}

    # -- effects -------------------------------------------------------------------------

    def effect(self, session: str, effect: fx.Effect, t_ms: int) -> None:
        """Report one effect (trace effects only with ``trace``) and watch for unmatched."""
        self._watch(session, effect, t_ms)
        if isinstance(effect, fx.TRACE_EFFECTS) and not self.trace:
            return
        if isinstance(effect, fx.DatamodelInit):
            return
        if self.as_json:
            self._emit({"record": "effect", "t_ms": t_ms, "session": session, **_fields(effect)})
            return
        prefix = "" if session == self.top else f"[{session}] "
        self._line(f"   {prefix}{self.describe(session, effect, t_ms)}")

    def _watch(self, session: str, effect: fx.Effect, t_ms: int) -> None:
        if isinstance(effect, fx.EventDequeued):
            if effect.source == "external":
                self._dequeued[session] = effect.event.name
            return
        if not isinstance(effect, fx.TransitionsSelected):
            return
        name = self._dequeued.pop(session, None)
        if name is None or effect.t_indexes:
            return
        machine = self.machine_for(session)
        if machine is not None:
            message = unmatched_notice(machine, name)
        else:
            message = f"no transition matched external event {name!r}"
        if session == self.top:
            self.unmatched.append(name)
        if self.as_json:
            self._emit(
                {
                    "record": "notice",
                    "t_ms": t_ms,
                    "session": session,
                    "kind": "unmatched-event",
                    "event": name,
                    "message": message,
                }
            )
        else:
            prefix = "" if session == self.top else f"[{session}] "
            self._line(f"   {prefix}notice: {message}")

    def describe(  # noqa: C901 - one line per kind of effect (a closed set)
        self, session: str, effect: fx.Effect, t_ms: int
    ) -> str:
        """One line of text for an effect."""
        if isinstance(effect, fx.SendDelayed):
            due = format_duration(t_ms + effect.delay_ms)
            return (
                f"schedule {effect.event!r} in {format_duration(effect.delay_ms)} "
                f"(send_id {effect.send_id}, due at t={due})"
            )
        if isinstance(effect, fx.Send):
            return f"send {effect.event!r} to {effect.target or 'self'}"
        if isinstance(effect, fx.Cancel):
            return f"cancel send_id {effect.send_id}"
        if isinstance(effect, fx.Log):
            return f"log {effect.label or ''}: {brief(effect.value)}"
        if isinstance(effect, fx.Done):
            final = ", ".join(effect.configuration)
            return f"done (final: {final}; donedata {brief(effect.donedata)})"
        if isinstance(effect, fx.DatamodelChange):
            if effect.new_value is fx.NOT_RECORDED:  # values ride on effects in trace mode only
                return f"set {effect.location}"
            return f"set {effect.location} = {brief(effect.new_value)}"
        if isinstance(effect, fx.Invoke):
            return f"invoke {effect.invoke_id} ({effect.type})"
        if isinstance(effect, fx.CancelInvoke):
            return f"cancel invocation {effect.invoke_id}"
        if isinstance(effect, fx.ErrorRaised):
            where = self.chart if session == self.top else f"{session} chart"
            at = f"{where}:{effect.line}" if effect.line is not None else where
            if effect.line is not None and session == self.top and self.place is not None:
                at = self.place(effect.line)
            sendid = f" (send_id {effect.sendid})" if effect.sendid else ""
            return f"{effect.name} at {at}{sendid}: {effect.message or '(no message)'}"
        if isinstance(effect, fx.BudgetExhausted):
            return f"{effect.reason} budget of {effect.budget} exhausted"
        if isinstance(effect, fx.EventDequeued):
            return f"trace: {effect.source} event {effect.event.name!r}"
        if isinstance(effect, fx.TransitionsSelected):
            return "trace: take " + self._transitions(session, effect.t_indexes)
        if isinstance(effect, fx.StatesExited):
            return f"trace: exit {', '.join(effect.states) or '-'}"
        if isinstance(effect, fx.StatesEntered):
            return f"trace: enter {', '.join(effect.states) or '-'}"
        if isinstance(effect, fx.MacrostepStable):
            return f"trace: stable in {', '.join(effect.configuration) or '-'}"
        return type(effect).__name__

    def _transitions(self, session: str, t_indexes: Sequence[int]) -> str:
        if not t_indexes:
            return "no transition"
        machine = self.machine_for(session)
        if machine is None:
            return ", ".join(f"transition #{t}" for t in t_indexes)
        parts = []
        for t in t_indexes:
            transition = machine.transitions[t]
            source = machine.states[transition.source].id
            targets = " ".join(machine.states[s].id for s in transition.targets) or "(targetless)"
            on = " ".join(transition.events) or "(eventless)"
            line = f"line {transition.line}"
            if session == self.top and self.place is not None:
                line = self.place(transition.line)
            parts.append(f"{on} {source} -> {targets} ({line})")
        return "; ".join(parts)

    # -- steps and the end ---------------------------------------------------------------

    def header(self, label: str, t_ms: int) -> None:
        """Text mode: the line that opens a step (printed before its effects)."""
        if not self.as_json:
            self._line(f"== {label} (t={format_duration(t_ms)})")

    def step(self, label: str, snapshot: Snapshot) -> None:
        """The state after a step: status, configuration, pending timers."""
        if self.as_json:
            self._emit({"record": "step", "step": label, **_snapshot(snapshot)})
            return
        active = ", ".join(snapshot.configuration) or "-"
        self._line(f"   status: {snapshot.status}; active: {active}")
        for timer in snapshot.pending:
            self._line(f"   pending: {_timer(timer, snapshot.t_ms, self.top)}")

    def end(self, reason: str, snapshot: Snapshot, message: str | None = None) -> None:
        """The run stopped; ``message`` says why, in text mode."""
        if self.as_json:
            self._emit({"record": "end", **_snapshot(snapshot), "reason": reason})
            return
        if message is not None:
            self._line(message)

    def _line(self, text: str) -> None:
        # Names, messages and labels come from the chart and its events: escaped, as every
        # text output of the command line is.
        print(visible(text), file=self.out)

    def _emit(self, record: dict[str, Any]) -> None:
        print(json.dumps(record, default=repr), file=self.out)


def describe_pending(pending: Sequence[PendingTimer], t_ms: int, top: str) -> str:
    """``1 timer: 'x' (send_id hold) due at t=7d (in 6d 23h 59m)`` for an end-of-run line."""
    count = f"{len(pending)} timer{'s' if len(pending) != 1 else ''}"
    return f"{count}: " + "; ".join(_timer(timer, t_ms, top) for timer in pending)


def _timer(timer: PendingTimer, t_ms: int, top: str) -> str:
    return describe_timer(timer.session, timer.event, timer.send_id, timer.due_ms, t_ms, top)


def _fields(effect: fx.Effect) -> dict[str, Any]:
    fields = dataclasses.asdict(effect)
    body = {k: v for k, v in fields.items() if k not in _COUNTERS}
    return {
        "effect": type(effect).__name__,
        "counters": [effect.macrostep, effect.microstep, effect.round],
        **body,
    }


def _snapshot(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "t_ms": snapshot.t_ms,
        "status": snapshot.status,
        "configuration": list(snapshot.configuration),
        "pending_timers": [dataclasses.asdict(timer) for timer in snapshot.pending],
    }
