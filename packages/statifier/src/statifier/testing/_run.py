"""``ChartRun``: a chart under test on the virtual clock, with checks that say where it stood."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.chart.compiler import Resolver, compile_chart
from statifier.chart.durations import format_duration, span_ms
from statifier.chart.model import Machine
from statifier.core import effects as fx
from statifier.core.algorithm import SYSTEM_VARIABLES
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.datamodel.host import HostFunction
from statifier.suggest import did_you_mean
from statifier.testing._checks import ids, subset_problem, unknown_state
from statifier.testing._errors import ChartAssertionError
from statifier.testing._report import describe
from statifier.testing._watch import ErrorWatch
from statifier.values import brief
from statifier.virtual.driver import OpenInvocation, Timer, VirtualDriver

DEFAULT_SESSION_ID: Final = "sess_test"
"""The session id of a run unless ``start`` is given another (``_sessionid`` in the chart)."""

MAX_EVENTS_KEPT: Final = 1_000
"""External events a run remembers (the newest); a report shows the last few of them."""


@dataclass(frozen=True, slots=True)
class HeardEvent:
    """An external event a session of the run processed, at virtual time ``t_ms``."""

    t_ms: int
    session_id: str
    event: Event


@dataclass(frozen=True, slots=True)
class Step:
    """One action of the test (``start``, ``send ...``, ``advance ...``, ``answer ...``) at
    virtual time ``t_ms`` (when it began), and the effects the top-level session produced
    during it (trace effects left out)."""

    t_ms: int
    action: str
    effects: tuple[fx.Effect, ...]


def start(
    chart: Machine | str | os.PathLike[str],
    *,
    session_id: str = DEFAULT_SESSION_ID,
    datamodel: Mapping[str, Any] | None = None,
    invoke_types: Iterable[str] = (),
    allow_errors: Iterable[str] = (),
    resolver: Resolver | None = None,
    functions: Mapping[str, HostFunction] | None = None,
    limits: MacrostepLimits = DEFAULT_LIMITS,
) -> ChartRun:
    """Start ``chart`` on a virtual clock at ``t=0`` and run it until it waits.

    ``chart`` is a compiled ``Machine``, a path to an SCXML file (its ``src`` files are
    read from beside it unless ``resolver`` says otherwise), or SCXML text (a string
    starting with ``<``). ``datamodel`` seeds variables over their ``<data>`` values;
    ``invoke_types`` are the host invoke types the chart may ``<invoke>``, answered by
    the test (``ChartRun.answer``, ``ChartRun.fail``); ``allow_errors`` are event
    descriptors of ``error.*`` events the test tolerates anywhere (``"error.execution"``
    allows ``error.execution.*`` too). ``functions`` are host functions the chart may
    call; ``limits`` the macrostep budgets.

    Raises ``UnexpectedChartError`` if starting raised an ``error.*`` not allowed.
    """
    if isinstance(chart, Machine):
        machine = chart
    elif _is_source(chart):
        machine = compile_chart(str(chart), resolver=resolver, functions=functions)
    else:
        path = Path(chart)
        if resolver is None:
            from statifier.cli._files import files_beside

            resolver = files_beside(path)
        machine = compile_chart(path.read_bytes(), resolver=resolver, functions=functions)
    run = ChartRun(
        machine,
        session_id=session_id,
        datamodel=datamodel,
        invoke_types=invoke_types,
        allow_errors=allow_errors,
        resolver=resolver,
        limits=limits,
    )
    run._act("start", run.driver.start)
    return run


def _is_source(chart: str | os.PathLike[str]) -> bool:
    return isinstance(chart, str) and chart.lstrip().startswith("<")


class ChartRun:
    """A chart under test, driven by a ``VirtualDriver`` on a virtual clock (see ``start``).

    Act with :meth:`send`, :meth:`advance`, :meth:`answer` and :meth:`fail`; read
    :attr:`state`, :attr:`active`, :attr:`datamodel`, :attr:`effects`...; check with the
    ``assert_*`` methods, which raise ``ChartAssertionError`` with a report of the run.
    Every action raises ``UnexpectedChartError`` when the chart raised an ``error.*``
    event the test did not allow (``allow_errors``) or expect (``expect_error``).
    ``driver`` is the ``VirtualDriver`` underneath, for what this class does not cover.
    """

    def __init__(
        self,
        machine: Machine,
        *,
        session_id: str = DEFAULT_SESSION_ID,
        datamodel: Mapping[str, Any] | None = None,
        invoke_types: Iterable[str] = (),
        allow_errors: Iterable[str] = (),
        resolver: Resolver | None = None,
        limits: MacrostepLimits = DEFAULT_LIMITS,
    ) -> None:
        self.machine = machine
        self.driver = VirtualDriver(
            machine,
            session_id=session_id,
            resolver=resolver,
            observer=self._observe,
            trace=True,  # for the external events each session takes (EventDequeued)
            limits=limits,
            invoke_types=tuple(invoke_types),
            datamodel=datamodel,
        )
        self.steps: list[Step] = []
        """Every action of the test so far, oldest first."""
        self.events: list[HeardEvent] = []
        """External events the run's sessions processed (the newest ``MAX_EVENTS_KEPT``)."""
        self._watch = ErrorWatch(allow_errors)
        self._errors_seen = 0
        self._current: list[fx.Effect] = []

    # -- reading -------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The top-level session's id (``_sessionid`` in the chart)."""
        return self.driver.top

    @property
    def state(self) -> MachineState:
        """The top-level session's position."""
        return self.driver.state

    @property
    def now_ms(self) -> int:
        """Virtual time since the start, in milliseconds."""
        return self.driver.now_ms

    @property
    def status(self) -> str:
        """``running``, ``done``, or ``budget_exhausted`` (a macrostep ran out of budget)."""
        if self.driver.sessions[self.driver.top].exhausted:
            return "budget_exhausted"
        return self.state.status

    @property
    def done(self) -> bool:
        """Whether the chart finished (a top-level final state, or cancelled)."""
        return self.state.status == "done"

    @property
    def active(self) -> tuple[str, ...]:
        """Ids of the active atomic states, in document order (``()`` once done)."""
        return self.state.active_leaf_ids()

    @property
    def configuration(self) -> tuple[str, ...]:
        """Ids of every active state, compound and parallel ones too (``()`` once done)."""
        return self.state.configuration_ids()

    @property
    def final_configuration(self) -> tuple[str, ...]:
        """The top-level final state the chart reached (``MachineState.final_configuration``)."""
        return self.state.final_configuration

    @property
    def donedata(self) -> Any:
        """The donedata of the top-level final state (None before the end, or without one)."""
        done = self._done()
        return done.donedata if done is not None else None

    @property
    def datamodel(self) -> dict[str, Any]:
        """The chart's variables (system variables such as ``_event`` left out)."""
        return {k: v for k, v in self.state.datamodel.items() if k not in SYSTEM_VARIABLES}

    @property
    def effects(self) -> list[fx.Effect]:
        """Every effect of the top-level session so far, in order (trace effects left out)."""
        return [effect for step in self.steps for effect in step.effects]

    @property
    def last_effects(self) -> tuple[fx.Effect, ...]:
        """The effects of the last action (what ``assert_raised`` searches)."""
        return self.steps[-1].effects if self.steps else ()

    @property
    def pending_timers(self) -> list[Timer]:
        """Delayed sends not fired yet, earliest first (every session's)."""
        return self.driver.pending_timers()

    @property
    def open_invocations(self) -> list[OpenInvocation]:
        """Invocations of ``invoke_types`` waiting for the test's answer."""
        return self.driver.open_invocations()

    @property
    def errors(self) -> list[tuple[str, fx.ErrorRaised]]:
        """Every ``error.*`` raised so far, as ``(session_id, effect)``, in order."""
        return list(self.driver.errors)

    @property
    def log(self) -> list[tuple[str | None, Any]]:
        """The ``<log>`` entries of the top-level session, as ``(label, value)``."""
        return list(self.driver.log)

    def report(self) -> str:
        """Where the run stands, as the failure messages show it."""
        return describe(self)

    # -- acting --------------------------------------------------------------------------

    def send(self, event: str | Event, data: Any = None, **fields: Any) -> ChartRun:
        """Send an external event (its name, ``data`` and any other ``Event`` field, e.g.
        ``sendid``) and run until the chart waits again. Returns the run."""
        if isinstance(event, str):
            event = Event(name=event, data=data, **fields)
        elif data is not None or fields:
            raise TypeError("send(Event) takes no data or fields: they are the Event's")
        named = event

        def act() -> None:
            if self.driver.sessions[self.driver.top].halted:
                raise ChartAssertionError(
                    f"cannot send {named.name!r}: the chart is {self.status}\n" + describe(self)
                )
            self.driver.send(named)

        return self._act(f"send {named.name}", act)

    def advance(self, span: str | int | timedelta) -> ChartRun:
        """Let ``span`` of virtual time pass (``"7d"``, ``"90s"``, milliseconds or a
        ``timedelta``): every timer due on the way fires, in due order, each followed by
        what it leads to. Returns the run."""
        millis = span_ms(span)
        return self._act(f"advance {format_duration(millis)}", lambda: self.driver.advance(millis))

    def answer(
        self, invoke_id: str, data: Any = None, *, session_id: str | None = None
    ) -> ChartRun:
        """Answer an open invocation (``done.invoke.<id>`` with ``data``). Returns the run."""
        return self._act(
            f"answer {invoke_id}",
            lambda: self._invocation(invoke_id, session_id, data, failed=False),
        )

    def fail(self, invoke_id: str, reason: Any, *, session_id: str | None = None) -> ChartRun:
        """Fail an open invocation (``error.communication.invoke.<id>`` with ``reason``)."""
        return self._act(
            f"fail {invoke_id}",
            lambda: self._invocation(invoke_id, session_id, reason, failed=True),
        )

    def _invocation(self, invoke_id: str, session_id: str | None, value: Any, failed: bool) -> None:
        try:
            if failed:
                self.driver.fail_invocation(invoke_id, value, session_id=session_id)
            else:
                self.driver.answer_invocation(invoke_id, value, session_id=session_id)
        except LookupError as exc:
            raise ChartAssertionError(f"{exc}\n" + describe(self)) from None

    def allow_errors(self, *descriptors: str) -> None:
        """Tolerate ``error.*`` events matching these descriptors from now on."""
        self._watch.allow(*descriptors)

    @contextmanager
    def expect_error(self, descriptor: str = "error") -> Iterator[list[fx.ErrorRaised]]:
        """The actions in the block must raise an ``error.*`` event matching
        ``descriptor`` (``"error.execution"``, ``"error.communication"``...); yields the
        list of the matching errors, filled as they happen. The block fails if none did."""
        with self._watch.expect(descriptor, self.report) as matched:
            yield matched

    def _act(self, action: str, perform: Any) -> ChartRun:
        self._current = []
        began = self.now_ms
        try:
            perform()
            self.driver.run_until_idle()
        finally:
            self.steps.append(Step(began, action, tuple(self._current)))
            self._current = []
        self._check_errors()
        return self

    def _observe(self, session_id: str, effect: fx.Effect) -> None:
        if isinstance(effect, fx.EventDequeued):
            if effect.source == "external":
                self.events.append(HeardEvent(self.now_ms, session_id, effect.event))
                if len(self.events) > MAX_EVENTS_KEPT:
                    del self.events[0]
            return
        if session_id == self.driver.top and not isinstance(effect, fx.TRACE_EFFECTS):
            self._current.append(effect)

    def _check_errors(self) -> None:
        new = self.driver.errors[self._errors_seen :]
        self._errors_seen = len(self.driver.errors)
        self._watch.check(
            new, during=self.steps[-1].action, top=self.session_id, describe=self.report
        )

    def _done(self) -> fx.Done | None:
        for step in reversed(self.steps):
            for effect in reversed(step.effects):
                if isinstance(effect, fx.Done):
                    return effect
        return None

    # -- checking ------------------------------------------------------------------------

    def fail_check(self, message: str) -> ChartAssertionError:
        """A ``ChartAssertionError`` saying ``message``, with the run's report (to raise)."""
        return ChartAssertionError(f"{message}\n" + describe(self))

    def assert_active(self, *state_ids: str) -> None:
        """Each of these states (atomic, compound or parallel) is active."""
        self._known(state_ids)
        missing = [s for s in state_ids if not self.state.is_active(s)]
        if missing:
            raise self.fail_check(f"expected {ids(missing)} to be active")

    def assert_not_active(self, *state_ids: str) -> None:
        """None of these states is active."""
        self._known(state_ids)
        present = [s for s in state_ids if self.state.is_active(s)]
        if present:
            raise self.fail_check(f"expected {ids(present)} not to be active")

    def assert_configuration(self, *leaf_ids: str) -> None:
        """The active atomic states are exactly these (in any order)."""
        self._known(leaf_ids)
        if sorted(self.active) != sorted(leaf_ids):
            raise self.fail_check(
                f"expected the active states to be {ids(leaf_ids)}, not {ids(self.active)}"
            )

    def assert_running(self) -> None:
        """The chart has not finished."""
        if self.status != "running":
            raise self.fail_check("expected the chart to be running")

    def assert_done(self, final: str | None = None, **donedata: Any) -> None:
        """The chart finished, in the top-level final state ``final`` if given, with a
        donedata holding ``donedata``'s keys and values if given."""
        if final is not None:
            self._known((final,))
        if not self.done:
            raise self.fail_check(
                "expected the chart to be done" + (f" in {final!r}" if final else "")
            )
        if final is not None and self.final_configuration != (final,):
            reached = ids(self.final_configuration) if self.final_configuration else "none"
            raise self.fail_check(
                f"expected the chart to end in {final!r}; the final state reached: {reached}"
            )
        problem = subset_problem("donedata", self.donedata, donedata) if donedata else None
        if problem is not None:
            raise self.fail_check(problem)

    def assert_datamodel(self, expected: Mapping[str, Any] | None = None, **values: Any) -> None:
        """These variables hold these values (others are not checked)."""
        problem = subset_problem("datamodel", self.datamodel, {**(expected or {}), **values})
        if problem is not None:
            raise self.fail_check(problem)

    def assert_raised(self, kind: type[fx.Effect], **fields: Any) -> fx.Effect:
        """The last action produced an effect of ``kind`` (e.g. ``effects.SendDelayed``)
        whose fields equal ``fields``; returns the first such effect."""
        found = _matching(self.last_effects, kind, fields)
        if not found:
            raise self.fail_check(
                f"expected the last action to raise {_effect_wanted(kind, fields)}; "
                f"it raised {_effects(self.last_effects)}"
            )
        return found[0]

    def assert_not_raised(self, kind: type[fx.Effect], **fields: Any) -> None:
        """The last action produced no effect of ``kind`` whose fields equal ``fields``."""
        found = _matching(self.last_effects, kind, fields)
        if found:
            raise self.fail_check(
                f"expected the last action not to raise {_effect_wanted(kind, fields)}; "
                f"it raised {_effect_text(found[0])}"
            )

    def assert_timer(
        self,
        send_id: str | None = None,
        *,
        event: str | None = None,
        due: str | int | timedelta | None = None,
    ) -> Timer:
        """A timer (delayed send) is pending, with this ``send_id`` and ``event`` if given,
        due ``due`` from now if given; returns it."""
        wanted_due = None if due is None else self.now_ms + span_ms(due)
        for timer in self.pending_timers:
            if (
                (send_id is None or timer.effect.send_id == send_id)
                and (event is None or timer.effect.event == event)
                and (wanted_due is None or timer.due_ms == wanted_due)
            ):
                return timer
        what = [f"send_id {send_id!r}" if send_id else "", f"event {event!r}" if event else ""]
        when = f" due in {format_duration(span_ms(due))}" if due is not None else ""
        label = " and ".join(w for w in what if w) or "any"
        raise self.fail_check(f"expected a pending timer ({label}){when}")

    def assert_no_timer(self, send_id: str | None = None, *, event: str | None = None) -> None:
        """No pending timer has this ``send_id`` / ``event`` (no timer at all if neither)."""
        for timer in self.pending_timers:
            if (send_id is None or timer.effect.send_id == send_id) and (
                event is None or timer.effect.event == event
            ):
                raise self.fail_check(
                    f"expected no pending timer{_timer_filter(send_id, event)}; "
                    f"{timer.effect.event!r} (send_id {timer.effect.send_id}) is"
                )

    def _known(self, state_ids: Iterable[str]) -> None:
        problem = unknown_state(self.machine, state_ids)
        if problem is not None:
            raise self.fail_check(problem)


def _timer_filter(send_id: str | None, event: str | None) -> str:
    parts = [f"send_id {send_id!r}" if send_id else "", f"event {event!r}" if event else ""]
    shown = " and ".join(p for p in parts if p)
    return f" with {shown}" if shown else ""


def _matching(
    effects: Iterable[fx.Effect], kind: type[fx.Effect], wanted: Mapping[str, Any]
) -> list[fx.Effect]:
    names = {f.name for f in fields(kind)}
    unknown = sorted(set(wanted) - names)
    if unknown:
        raise TypeError(
            f"{kind.__name__} has no field {unknown[0]!r}{did_you_mean(unknown[0], names)}"
        )
    return [
        effect
        for effect in effects
        if isinstance(effect, kind)
        and all(getattr(effect, name) == value for name, value in wanted.items())
    ]


def _effect_wanted(kind: type[fx.Effect], wanted: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={brief(v)}" for k, v in wanted.items())
    return f"{kind.__name__}({shown})"


_COUNTERS: Final = frozenset({"macrostep", "microstep", "round"})


def _effect_text(effect: fx.Effect) -> str:
    """``Kind(field=value, ...)``, each value cut short (an effect has a fixed few fields)."""
    shown = ", ".join(
        f"{f.name}={brief(getattr(effect, f.name), 60)}"
        for f in fields(effect)
        if f.name not in _COUNTERS
    )
    return f"{type(effect).__name__}({shown})"


def _effects(effects: Iterable[fx.Effect]) -> str:
    names = [type(effect).__name__ for effect in effects]
    return ", ".join(names) if names else "no effect"
