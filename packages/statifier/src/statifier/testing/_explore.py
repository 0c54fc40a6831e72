"""``explore``: a bounded search of a chart's reachable positions, for what examples miss.

From the initial position, breadth first, every position is expanded by each thing the
world could do next: send one of the events the chart's transitions name (without data,
or with the samples given), let the next timer fire, answer or fail an open invocation of
a host invoke type. Each new position (configuration, variables, history, timers, open
invocations and invoked children, counters left out) is explored once, up to
``max_states`` positions. Guards and executable content run for real on the datamodel
of the path that led there: a guard that reads a counter is judged on the counter's
value, not guessed.

What it finds is real: every state reached, every error with the shortest path of
actions that raises it, replayable with ``statifier.testing.start``. What it does not find
is proven absent only when the search was ``complete`` (it ran out of new positions before
the bound) and nothing outside it decides: events carrying data the chart reads (try
``samples``), host functions, answers with data, ``<invoke>`` sources it cannot resolve.
Events only the platform raises (``done.state.*``, ``error.*``, invocation answers) are
not sent by hand: they happen when the chart makes them happen.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.chart.compiler import Resolver
from statifier.chart.model import Machine
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.algorithm import SYSTEM_VARIABLES
from statifier.core.events import Event
from statifier.values import brief
from statifier.virtual.driver import VirtualDriver

DEFAULT_MAX_STATES: Final = 1_000
"""Positions ``explore`` visits unless told otherwise."""

MAX_STATES_LIMIT: Final = 1_000_000
"""The most positions one exploration may be asked to visit."""

_PLATFORM_EVENTS: Final = ("done.state", "done.invoke", "error")
"""Descriptor prefixes of events the platform raises: never sent by hand."""

_SESSION: Final = "sess_explore"


@dataclass(frozen=True, slots=True)
class ErrorFound:
    """An action that raises an ``error.*`` event (or exhausts a macrostep budget).

    ``states`` are the active atomic states before the action, ``action`` what was done
    (``send capture.failed``, ``timer authorization.expired``, ``answer cap``, ``fail
    cap``), ``error`` the event (``error.execution``...) or ``budget exhausted
    (<reason>)``, ``line`` where in the chart, ``path`` the actions from the start that
    lead there (the last one is ``action``), shortest first found.
    """

    states: tuple[str, ...]
    action: str
    error: str
    line: int | None
    message: str
    path: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Exploration:
    """What ``explore`` found (see the module docstring for what it proves)."""

    chart: str | None
    positions: int
    """Distinct positions visited."""
    complete: bool
    """True when every position reachable with these actions was visited (the bound was
    not reached)."""
    events: tuple[str, ...]
    """The events sent by hand."""
    unreached: tuple[str, ...]
    """States (any kind but history) never entered, in document order."""
    finals_unreached: tuple[str, ...]
    """Final states never entered, in document order."""
    errors: tuple[ErrorFound, ...]
    """One per (states, action, error, line), in the order found."""

    @property
    def findings(self) -> int:
        """States never reached (final ones included) and errors found."""
        return len(self.unreached) + len(self.errors)

    def record(self) -> dict[str, Any]:
        """The findings as one JSON object (``statifier check --explore --json``)."""
        return {
            "positions": self.positions,
            "complete": self.complete,
            "events": list(self.events),
            "unreached": list(self.unreached),
            "finals_unreached": list(self.finals_unreached),
            "errors": [
                {
                    "states": list(found.states),
                    "action": found.action,
                    "error": found.error,
                    "line": found.line,
                    "message": found.message,
                    "path": list(found.path),
                }
                for found in self.errors
            ],
        }

    def lines(self, label: str | None = None) -> list[str]:
        """The findings as lines of text (what ``statifier check --explore`` prints), the
        first one naming the chart by ``label`` (default: its name)."""
        name = label or self.chart or "(unnamed chart)"
        scope = (
            "all reachable ones"
            if self.complete
            else "stopped at the bound: more positions are reachable"
        )
        out = [
            f"{name}: explored {self.positions} position{'s' if self.positions != 1 else ''}"
            f" ({scope}); events sent: {', '.join(self.events) or 'none'}"
        ]
        out.append(
            f"  never reached: {', '.join(self.unreached)}"
            if self.unreached
            else "  every state was reached"
        )
        out.append(
            f"  final states never reached: {', '.join(self.finals_unreached)}"
            if self.finals_unreached
            else "  every final state was reached"
        )
        if not self.errors:
            out.append("  no action raised an error")
        for found in self.errors:
            at = f" at line {found.line}" if found.line is not None else ""
            states = ", ".join(found.states) or "-"
            message = found.message if len(found.message) <= 160 else found.message[:157] + "..."
            out.append(f"  {found.error}{at}: {found.action} in ({states}): {message}")
            out.append(f"    path: {' -> '.join(found.path)}")
        return out


@dataclass
class _Node:
    driver: VirtualDriver
    path: tuple[str, ...]


@dataclass
class _Findings:
    entered: set[str] = field(default_factory=set)
    errors: dict[tuple[Any, ...], ErrorFound] = field(default_factory=dict)


def explore(
    machine: Machine,
    *,
    max_states: int = DEFAULT_MAX_STATES,
    samples: Mapping[str, Sequence[Any]] | None = None,
    datamodel: Mapping[str, Any] | None = None,
    resolver: Resolver | None = None,
    limits: MacrostepLimits = DEFAULT_LIMITS,
) -> Exploration:
    """Explore ``machine``'s positions breadth first, at most ``max_states`` of them.

    ``samples`` maps an event name to the data payloads to send it with (default: only
    ``None``); an event named there is sent even if no transition names it exactly (a
    descriptor ``order`` matches ``order.placed``). ``done.invoke.<id>`` there gives the
    answers an open invocation ``<id>`` is answered with. ``datamodel`` seeds variables
    (as a parent or a host would); ``resolver`` resolves ``<invoke src>`` of child charts;
    ``limits`` are the macrostep budgets.
    """
    if isinstance(max_states, bool) or not isinstance(max_states, int):
        raise TypeError("max_states must be an integer")
    if not 1 <= max_states <= MAX_STATES_LIMIT:
        raise ValueError(f"max_states must be in 1..{MAX_STATES_LIMIT}")
    samples = dict(samples or {})
    events = _alphabet(machine, {k: v for k, v in samples.items() if not _platform(k)})
    findings = _Findings()
    start = VirtualDriver(
        machine,
        session_id=_SESSION,
        resolver=resolver,
        observer=lambda sid, effect: _entered(sid, effect, findings),
        trace=True,
        limits=limits,
        invoke_types=_host_invoke_types(machine),
        datamodel=datamodel,
    )
    start.start()
    start.run_until_idle()
    _record_errors(start, (), "start", ("start",), findings)
    seen = {_key(start)}
    frontier: deque[_Node] = deque([_Node(start, ())])
    while frontier:
        node = frontier.popleft()
        for action, act in _actions(node.driver, events, samples):
            twin = node.driver.fork()
            before = node.driver.state.active_leaf_ids()
            act(twin)
            path = (*node.path, action)
            _record_errors(twin, before, action, path, findings)
            key = _key(twin)
            if key in seen:
                continue
            if len(seen) >= max_states:
                return _result(machine, len(seen), False, events, findings)
            seen.add(key)
            frontier.append(_Node(twin, path))
    return _result(machine, len(seen), True, events, findings)


def _alphabet(machine: Machine, samples: Mapping[str, Sequence[Any]]) -> tuple[str, ...]:
    names = set(samples)
    for transition in machine.transitions:
        for descriptor in transition.events:
            name = descriptor.removesuffix(".*").removesuffix(".")
            if not name or name == "*":
                continue
            if not _platform(name):
                names.add(name)
    return tuple(sorted(names))


def _platform(name: str) -> bool:
    """Whether only the platform raises events named ``name``."""
    return any(name == p or name.startswith(p + ".") for p in _PLATFORM_EVENTS)


def _host_invoke_types(machine: Machine) -> frozenset[str]:
    """The non-SCXML invoke types the chart names statically (answered by the search)."""
    return frozenset(
        invoke.type
        for state in machine.states
        for invoke in state.invokes
        if invoke.type is not None and invoke.type not in planner.SCXML_INVOKE_TYPES
    )


def _actions(
    driver: VirtualDriver, events: Iterable[str], samples: Mapping[str, Sequence[Any]]
) -> list[tuple[str, Any]]:
    top = driver.sessions[driver.top]
    if top.halted or not top.state.running:
        return []
    actions: list[tuple[str, Any]] = []
    for name in events:
        for data in samples.get(name, (None,)):
            label = f"send {name}" if data is None else f"send {name} {brief(data, 60)}"
            actions.append((label, _sender(name, data)))
    timers = driver.pending_timers()
    if timers:
        first = timers[0]
        actions.append((f"timer {first.effect.event}", _timer_firer(first.due_ms)))
    for invocation in driver.open_invocations():
        invoke_id = invocation.effect.invoke_id
        sid = invocation.session_id
        for data in samples.get(f"done.invoke.{invoke_id}", (None,)):
            label = f"answer {invoke_id}" + ("" if data is None else f" {brief(data, 60)}")
            actions.append((label, _answerer(invoke_id, sid, data, failed=False)))
        actions.append((f"fail {invoke_id}", _answerer(invoke_id, sid, "failed", failed=True)))
    return actions


def _sender(name: str, data: Any) -> Any:
    def send(driver: VirtualDriver) -> None:
        driver.send(Event(name=name, data=data))
        driver.run_until_idle()

    return send


def _timer_firer(due_ms: int) -> Any:
    def fire(driver: VirtualDriver) -> None:
        driver.advance(due_ms - driver.now_ms)

    return fire


def _answerer(invoke_id: str, session_id: str, value: Any, *, failed: bool) -> Any:
    def answer(driver: VirtualDriver) -> None:
        if failed:
            driver.fail_invocation(invoke_id, value, session_id=session_id)
        else:
            driver.answer_invocation(invoke_id, value, session_id=session_id)
        driver.run_until_idle()

    return answer


def _entered(session_id: str, effect: fx.Effect, findings: _Findings) -> None:
    """Note the top-level session's states as they are entered (children have charts of
    their own)."""
    if session_id == _SESSION and isinstance(effect, fx.StatesEntered):
        findings.entered.update(effect.states)


def _record_errors(
    driver: VirtualDriver,
    before: tuple[str, ...],
    action: str,
    path: tuple[str, ...],
    findings: _Findings,
) -> None:
    for _sid, error in driver.errors:
        key = (before, action, error.name, error.line)
        if key not in findings.errors:
            findings.errors[key] = ErrorFound(
                before, action, error.name, error.line, error.message, path
            )
    for effect in driver.effects:
        if isinstance(effect, fx.BudgetExhausted):
            name = f"budget exhausted ({effect.reason})"
            key = (before, action, name, None)
            if key not in findings.errors:
                message = f"the {effect.reason} budget of {effect.budget} ran out"
                findings.errors[key] = ErrorFound(before, action, name, None, message, path)


def _key(driver: VirtualDriver) -> tuple[Any, ...]:
    """What makes two positions the same for the search: every session's states,
    variables, history and queue, the pending timers (relative to now), the open
    invocations; not counters, ids or the clock."""
    sessions = []
    names = {driver.top: "top"}
    for sid, session in driver.sessions.items():
        for invoke_id, child in session.children.items():
            names[child] = f"{names.get(sid, sid)}/{invoke_id}"
    for sid, session in sorted(driver.sessions.items(), key=lambda item: names.get(item[0], "")):
        state = session.state
        variables = {k: v for k, v in state.datamodel.items() if k not in SYSTEM_VARIABLES}
        sessions.append(
            (
                names.get(sid, sid),
                session.halted,
                state.status,
                tuple(sorted(state.configuration)),
                _canonical(variables),
                tuple(sorted(state.history.items())),
                tuple(event.name for event in session.queue),
            )
        )
    timers = tuple(
        (names.get(t.session_id, t.session_id), t.due_ms - driver.now_ms, t.effect.event)
        for t in driver.pending_timers()
    )
    invocations = tuple(
        sorted(
            (names.get(i.session_id, i.session_id), i.effect.invoke_id)
            for i in driver.open_invocations()
        )
    )
    return (tuple(sessions), timers, invocations)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _result(
    machine: Machine, positions: int, complete: bool, events: tuple[str, ...], findings: _Findings
) -> Exploration:
    states = [s for s in machine.states[1:] if s.kind != "history"]
    return Exploration(
        chart=machine.name,
        positions=positions,
        complete=complete,
        events=events,
        unreached=tuple(s.id for s in states if s.id not in findings.entered),
        finals_unreached=tuple(
            s.id for s in states if s.kind == "final" and s.id not in findings.entered
        ),
        errors=tuple(findings.errors.values()),
    )
