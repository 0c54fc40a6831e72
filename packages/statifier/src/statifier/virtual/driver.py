"""A deterministic driver on a virtual clock: conformance tests, the CLI, and examples.

It owns each session's external queue, performs the core's effects, and fires delayed
sends in virtual time (no real sleeping). It also runs ``<invoke type="scxml">`` child
sessions, so an entire tree of executions is reproducible event for event. Invocations of
the host's own types (``invoke_types``) stay open until the caller answers them
(``answer_invocation``, ``fail_invocation``), as a host's handler would. A BasicHTTP send
(``<send type="basichttp">``) reaches no network: the chart hears ``error.communication``.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.chart.compiler import Resolver
from statifier.chart.durations import format_duration
from statifier.chart.model import Machine
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.algorithm import cancel, deliver_internal, handle_event, initialize
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.errors import ChartError
from statifier.runtime.invoke import SessionTree, TreeLimits, child_seed, compile_child

NO_HTTP = "the virtual driver makes no HTTP requests"
"""Why a BasicHTTP send fails on the virtual driver (the chart hears error.communication)."""


@dataclass
class _Session:
    session_id: str
    state: MachineState
    queue: deque[Event] = field(default_factory=deque)
    parent: tuple[str, str] | None = None  # (parent session id, invoke id in the parent)
    children: dict[str, str] = field(default_factory=dict)  # invoke id -> child session id
    invoke_context: dict[str, Any] = field(default_factory=dict)  # invoke id -> caller_context
    halted: bool = False
    exhausted: bool = False  # halted because a macrostep budget ran out


@dataclass(frozen=True)
class Timer:
    """A pending delayed send."""

    due_ms: int
    session_id: str
    effect: fx.SendDelayed

    def describe(self, now_ms: int, top: str) -> str:
        """The timer as :func:`describe_timer` writes it."""
        return describe_timer(
            self.session_id, self.effect.event, self.effect.send_id, self.due_ms, now_ms, top
        )


def describe_timer(
    session_id: str, event: str, send_id: str, due_ms: int, now_ms: int, top: str
) -> str:
    """``'x' (send_id hold) due at t=7d (in 6d 23h)``: a pending timer as the CLI's runs and
    the test reports show it (``[session] `` first when it is not ``top``'s)."""
    where = "" if session_id == top else f"[{session_id}] "
    left = format_duration(max(due_ms - now_ms, 0))
    return f"{where}{event!r} (send_id {send_id}) due at t={format_duration(due_ms)} (in {left})"


@dataclass(frozen=True)
class OpenInvocation:
    """An invocation of one of the host's invoke types, waiting for its answer."""

    session_id: str
    effect: fx.Invoke


@dataclass
class VirtualRun:
    """The outcome of ``run_chart``: how the top-level session ended."""

    done: bool
    configuration: tuple[str, ...]
    donedata: Any
    effects: list[fx.Effect]
    log: list[tuple[str | None, Any]]
    virtual_ms: int
    state: MachineState


class VirtualDriver:
    """Drives one top-level execution (and its invoked children) in virtual time.

    ``observer`` (if given) is called with ``(session_id, effect)`` for every effect, in
    order. ``resolver`` maps an ``<invoke src>`` to chart text. ``limits`` are the
    macrostep budgets of every session; ``tree_limits`` bound the tree of invocations.
    ``invoke_types`` are the host's ``<invoke type>`` values (besides SCXML) the sessions
    may start: each such invocation stays open until ``answer_invocation`` or
    ``fail_invocation`` (None: none, and the core refuses them with ``error.execution``).
    ``datamodel`` seeds the top-level session's variables (over their ``<data>`` values).
    """

    def __init__(
        self,
        machine: Machine,
        *,
        session_id: str = "sess_virtual",
        resolver: Resolver | None = None,
        observer: Callable[[str, fx.Effect], None] | None = None,
        max_macrostep_rounds: int | None = 10_000,
        trace: bool = False,
        caller_context: Any = None,
        limits: MacrostepLimits = DEFAULT_LIMITS,
        tree_limits: TreeLimits | None = None,
        invoke_types: Iterable[str] | None = None,
        datamodel: Mapping[str, Any] | None = None,
    ) -> None:
        self.machine = machine
        self.top = session_id
        self.resolver = resolver
        self.observer = observer
        self.max_rounds = max_macrostep_rounds
        self.limits = limits
        self.tree_limits = tree_limits or TreeLimits()
        self.trace = trace
        self.caller_context = caller_context
        self.invoke_types = frozenset(invoke_types) if invoke_types is not None else None
        self.seed = dict(datamodel or {})
        self.now_ms = 0
        self.sessions: dict[str, _Session] = {}
        # The sessions not halted, in the order they started (a run keeps every session
        # it made, but its steps look only at these: the halted children of a long run
        # must not make each step cost more), and the send targets they make.
        self._live: dict[str, _Session] = {}
        self._targets: tuple[frozenset[str], frozenset[str]] | None = None
        self._timers: list[tuple[int, int, Timer]] = []
        self._seq = itertools.count()
        self._child_ids = itertools.count(1)
        self._deferred: deque[tuple[str, Event]] = deque()
        self.effects: list[fx.Effect] = []
        self.log: list[tuple[str | None, Any]] = []
        self.errors: list[tuple[str, fx.ErrorRaised]] = []
        """Every ``error.*`` raised in any session, as ``(session_id, effect)``, in order."""
        self._open: dict[tuple[str, str], fx.Invoke] = {}

    # -- public surface ------------------------------------------------------------------

    @property
    def state(self) -> MachineState:
        """The top-level session's current position."""
        return self.sessions[self.top].state

    def start(self) -> list[fx.Effect]:
        """Initialize the top-level session; returns the effects it produced."""
        return self._start_session(
            self.machine, self.top, None, dict(self.seed), self.caller_context
        )

    def send(self, event: Event | str) -> None:
        """Queue an external event for the top-level session."""
        if isinstance(event, str):
            event = Event(name=event)
        self.sessions[self.top].queue.append(event)

    def pending_timers(self) -> list[Timer]:
        """Delayed sends not yet fired, earliest first."""
        return [entry[2] for entry in sorted(self._timers)]

    def open_invocations(self) -> list[OpenInvocation]:
        """Invocations of the host's invoke types not answered yet, oldest first."""
        return [OpenInvocation(sid, effect) for (sid, _), effect in self._open.items()]

    def answer_invocation(
        self, invoke_id: str, data: Any = None, *, session_id: str | None = None
    ) -> None:
        """Queue ``done.invoke.<invoke_id>`` with ``data`` for the session that started the
        open invocation (the top-level session unless ``session_id`` names another).

        Raises ``LookupError`` when no such invocation is open. Run the driver
        (``run_until_idle``, ``advance``) to process it.
        """
        session_id, effect = self._close(invoke_id, session_id)
        answer = planner.invocation_done(invoke_id, data, caller_context=effect.caller_context)
        self.sessions[session_id].queue.append(answer)

    def fail_invocation(
        self, invoke_id: str, reason: Any, *, session_id: str | None = None
    ) -> None:
        """Queue ``error.communication.invoke.<invoke_id>`` with ``reason`` (a string is
        wrapped as ``{"reason": ...}``); otherwise as ``answer_invocation``."""
        session_id, effect = self._close(invoke_id, session_id)
        failure = planner.invocation_failed(invoke_id, reason, caller_context=effect.caller_context)
        self.sessions[session_id].queue.append(failure)

    def _close(self, invoke_id: str, session_id: str | None) -> tuple[str, fx.Invoke]:
        sid = self.top if session_id is None else session_id
        effect = self._open.pop((sid, invoke_id), None)
        if effect is None:
            raise LookupError(f"no open invocation {invoke_id!r} in session {sid!r}")
        return sid, effect

    def fork(self) -> VirtualDriver:
        """An independent copy of this run as it stands: its sessions, queues, timers,
        clock and open invocations. The copy's ``effects``, ``log`` and ``errors`` start
        empty; what either run does next does not touch the other."""
        twin = VirtualDriver.__new__(VirtualDriver)
        twin.__dict__.update(self.__dict__)
        twin.sessions = {
            sid: dataclasses.replace(
                session,
                queue=deque(session.queue),
                children=dict(session.children),
                invoke_context=dict(session.invoke_context),
            )
            for sid, session in self.sessions.items()
        }
        twin._live = {sid: twin.sessions[sid] for sid in self._live}
        twin._timers = list(self._timers)
        # Both runs go on from the same next numbers (reading one takes it: put it back).
        seq, child_id = next(self._seq), next(self._child_ids)
        self._seq, twin._seq = itertools.count(seq), itertools.count(seq)
        self._child_ids, twin._child_ids = itertools.count(child_id), itertools.count(child_id)
        twin._deferred = deque(self._deferred)
        twin._open = dict(self._open)
        twin.effects = []
        twin.log = []
        twin.errors = []
        return twin

    def run_until_idle(self, max_steps: int = 100_000) -> None:
        """Process queued events of every session until no queue has work (timers wait)."""
        for _ in range(max_steps):
            if not self._step_one_queue():
                return
        raise RuntimeError(f"no quiescence after {max_steps} events")

    def advance(self, ms: int | None = None, max_steps: int = 100_000) -> None:
        """Fire the timers due within ``ms`` virtual milliseconds (all of them if None)."""
        horizon = None if ms is None else self.now_ms + ms
        self.run_until_idle(max_steps)
        for _ in range(max_steps):
            if self.sessions[self.top].halted or not self._timers:
                break
            due = self._timers[0][0]
            if horizon is not None and due > horizon:
                break
            _, _, timer = heapq.heappop(self._timers)
            self.now_ms = max(self.now_ms, due)
            self._fire(timer)
            self.run_until_idle(max_steps)
        if horizon is not None:
            self.now_ms = max(self.now_ms, horizon)

    # -- sessions ------------------------------------------------------------------------

    def _start_session(
        self,
        machine: Machine,
        session_id: str,
        parent: tuple[str, str] | None,
        seed: dict[str, Any],
        caller_context: Any = None,
    ) -> list[fx.Effect]:
        session = _Session(session_id, cast(MachineState, None), parent=parent)
        self.sessions[session_id] = session
        self._live[session_id] = session
        self._targets = None
        state, effects = initialize(
            machine,
            session_id=session_id,
            max_macrostep_rounds=self.max_rounds,
            datamodel=seed,
            trace=self.trace,
            routes=self._routes(session),
            caller_context=caller_context,
            limits=self.limits,
            invoke_types=self.invoke_types,
        )
        session.state = state
        self._perform(session_id, effects)
        return effects

    def _step_one_queue(self) -> bool:
        if self._deferred:
            session_id, event = self._deferred.popleft()
            self._internal(session_id, event)
            return True
        for session in list(self._live.values()):
            if session.queue and not session.halted and session.state.running:
                event = session.queue.popleft()
                state, effects = handle_event(session.state, event, routes=self._routes(session))
                session.state = state
                self._perform(session.session_id, effects)
                return True
        return False

    def _internal(self, session_id: str, event: Event) -> None:
        session = self.sessions.get(session_id)
        if session is None or session.halted or not session.state.running:
            return
        state, effects = deliver_internal(session.state, event, routes=self._routes(session))
        session.state = state
        self._perform(session_id, effects)

    def _routes(self, session: _Session) -> frozenset[str]:
        """What this driver can deliver to: live sessions, and the parent if invoked."""
        targets = self._targets
        if targets is None:
            live = frozenset(f"#_scxml_{sid}" for sid in self._live)
            targets = self._targets = (live, live | {"#_parent"})
        return targets[session.parent is not None]

    def _fire(self, timer: Timer) -> None:
        session = self.sessions.get(timer.session_id)
        if session is None or session.halted:
            return
        self._execute(timer.session_id, planner.fire(timer.session_id, timer.effect))

    # -- effects -------------------------------------------------------------------------

    def _perform(self, session_id: str, effects: Iterable[fx.Effect]) -> None:
        for effect in effects:
            if session_id == self.top:
                self.effects.append(effect)
            if self.observer is not None:
                self.observer(session_id, effect)
            instruction = planner.plan_effect(session_id, effect)
            if instruction is not None:
                self._execute(session_id, instruction)

    def _execute(self, session_id: str, instruction: planner.Instruction) -> None:  # noqa: C901 - one case per planner instruction
        match instruction:
            case planner.Deliver():
                self._deliver(session_id, instruction)
            case planner.Post(effect=effect):
                # Virtual time reaches no network: a BasicHTTP send fails as a refused one.
                refused = planner.post_failed(effect.send_id, NO_HTTP)
                self._deferred.append((session_id, refused))
            case planner.Schedule(effect=effect):
                timer = Timer(self.now_ms + effect.delay_ms, session_id, effect)
                heapq.heappush(self._timers, (timer.due_ms, next(self._seq), timer))
            case planner.CancelTimers(effect=effect):
                self._drop_timers(session_id, effect.send_id)
            case planner.Report(effect=fx.Log() as log):
                if session_id == self.top:
                    self.log.append((log.label, log.value))
            case planner.Report(effect=fx.ErrorRaised() as error):
                self.errors.append((session_id, error))
            case planner.StartInvocation(effect=effect):
                self._start_invocation(session_id, effect)
            case planner.StopInvocation(effect=effect):
                self._stop_invocation(session_id, effect.invoke_id)
            case planner.Forward(invoke_id=invoke_id, event=event):
                child = self._child(session_id, invoke_id)
                if child is not None:
                    child.queue.append(event)
            case planner.Halt(effect=effect):
                self._halt(session_id, effect)

    def _deliver(self, session_id: str, instruction: planner.Deliver) -> None:
        sender = self.sessions[session_id]
        target = instruction.target
        event = instruction.event
        destination: _Session | None = None
        match target:
            case planner.SelfTarget():
                destination = sender
            case planner.InternalTarget():
                self._internal(session_id, event)
                return
            case planner.ParentTarget():
                if sender.parent is not None:
                    parent_id, invoke_id = sender.parent
                    destination = self.sessions.get(parent_id)
                    event = planner.from_invocation(event, invoke_id)
            case planner.SessionTarget(session_id=other):
                destination = self.sessions.get(other)
            case planner.InvocationTarget(invoke_id=invoke_id):
                destination = self._child(session_id, invoke_id)
        if destination is None or destination.halted:
            message = f"send target {planner.address(target)!r} is unreachable"
            self._deferred.append((session_id, planner.undeliverable(instruction.send_id, message)))
            return
        destination.queue.append(event)

    def _drop_timers(self, session_id: str, send_id: str | None = None) -> None:
        self._timers = [
            entry
            for entry in self._timers
            if not (
                entry[2].session_id == session_id
                and (send_id is None or entry[2].effect.send_id == send_id)
            )
        ]
        heapq.heapify(self._timers)

    def _child(self, session_id: str, invoke_id: str) -> _Session | None:
        child_id = self.sessions[session_id].children.get(invoke_id)
        child = self.sessions.get(child_id) if child_id is not None else None
        return child if child is not None and not child.halted else None

    def _start_invocation(self, session_id: str, effect: fx.Invoke) -> None:
        parent = self.sessions[session_id]
        invoke_id = effect.invoke_id
        if any(event.invokeid == invoke_id for event in parent.queue):
            # What still waits under this id is an earlier invocation's (a child that
            # finished before its state was left): the new one supersedes it.
            parent.queue = deque(e for e in parent.queue if e.invokeid != invoke_id)
        if effect.type not in planner.SCXML_INVOKE_TYPES:
            if self.invoke_types is not None and effect.type in self.invoke_types:
                self._open[(session_id, effect.invoke_id)] = effect
            return
        source = effect.content
        try:
            self._check_tree(session_id)
            if source is None and effect.src is not None:
                if self.resolver is None:
                    raise LookupError(f"no resolver for {effect.src!r}")
                source = self.resolver(effect.src)
            if not isinstance(source, str):
                raise ChartError([])
            child_machine = compile_child(source, parent.state.machine, self.resolver)
        except Exception as exc:
            failed = planner.invocation_start_failed(effect.invoke_id, str(exc) or repr(exc))
            self._deferred.append((session_id, failed))
            return
        child_id = f"{session_id}.child{next(self._child_ids)}"
        parent.children[invoke_id] = child_id
        parent.invoke_context[invoke_id] = effect.caller_context
        seed = child_seed(child_machine, effect.params)
        self._start_session(child_machine, child_id, (session_id, effect.invoke_id), seed)

    def _check_tree(self, parent_id: str) -> None:
        """Refuse a child past the tree limits (``InvocationLimitExceeded``)."""
        depth = 1
        parent = self.sessions[parent_id].parent
        while parent is not None:
            depth += 1
            parent = self.sessions[parent[0]].parent
        tree = SessionTree(self.tree_limits)
        tree.live = len(self._live)
        tree.check(depth)

    def _stop_invocation(self, session_id: str, invoke_id: str) -> None:
        self._open.pop((session_id, invoke_id), None)
        child = self._child(session_id, invoke_id)
        self.sessions[session_id].children.pop(invoke_id, None)
        if child is None:
            return
        # Spec 6.4: nothing from a cancelled child reaches the parent any more, not even
        # what it already sent. (A child that finished first keeps its done.invoke.)
        child.parent = None
        parent = self.sessions[session_id]
        parent.queue = deque(e for e in parent.queue if e.invokeid != invoke_id)
        state, effects = cancel(child.state)
        child.state = state
        self._perform(child.session_id, effects)

    def _halt(self, session_id: str, effect: fx.Done | fx.BudgetExhausted) -> None:
        if isinstance(effect, fx.Done):
            self._finished(session_id, effect)
            return
        # Out of budget, as a live session: it processes nothing more and tells no parent;
        # its timers stay pending (a halted session's never fire).
        session = self.sessions[session_id]
        session.halted = session.exhausted = True
        self._stopped(session_id)

    def _stopped(self, session_id: str) -> None:
        """``session_id`` halted: no step looks at it any more, and it is no target."""
        self._live.pop(session_id, None)
        self._targets = None

    def _finished(self, session_id: str, done: fx.Done) -> None:
        session = self.sessions[session_id]
        session.halted = True
        self._stopped(session_id)
        self._drop_timers(session_id)
        if session.parent is None:
            return
        parent_id, invoke_id = session.parent
        parent = self.sessions.get(parent_id)
        if parent is not None and not parent.halted:
            parent.queue.append(
                planner.invocation_done(
                    invoke_id,
                    done.donedata,
                    child_session_id=session_id,
                    caller_context=parent.invoke_context.get(invoke_id),
                )
            )


def run_chart(
    machine: Machine,
    *,
    resolver: Resolver | None = None,
    events: Iterable[Event | str] = (),
    max_virtual_ms: int = 3_600_000,
    session_id: str = "sess_virtual",
) -> VirtualRun:
    """Run a chart to completion in virtual time, feeding ``events`` once it settles."""
    driver = VirtualDriver(machine, session_id=session_id, resolver=resolver)
    driver.start()
    driver.run_until_idle()
    for event in events:
        if driver.sessions[driver.top].halted:
            break
        driver.send(event)
        driver.run_until_idle()
    driver.advance(max_virtual_ms)
    top = driver.sessions[driver.top]
    done = next((e for e in reversed(driver.effects) if isinstance(e, fx.Done)), None)
    return VirtualRun(
        done=done is not None,
        configuration=done.configuration if done is not None else top.state.configuration_ids(),
        donedata=done.donedata if done is not None else None,
        effects=driver.effects,
        log=driver.log,
        virtual_ms=driver.now_ms,
        state=top.state,
    )
