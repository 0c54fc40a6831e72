"""The pure interpreter core: a literal port of W3C SCXML Appendix D.

The functions keep the algorithm's names in Python spelling (``enter_states``,
``exit_states``, ``microstep``, ``select_transitions``, ``remove_conflicting_transitions``,
``compute_exit_set``, ``compute_entry_set``, ``get_transition_domain``, ``find_lcca``...).
The only mechanical deviations: the blocking wait for an external event is the boundary
between public calls (``handle_event`` resumes where ``mainEventLoop`` would block), every
side effect is returned as data (``statifier.core.effects``), and a round budget bounds
runaway eventless loops.

No I/O, no clock, no randomness: the same inputs give the same effects.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container, Iterable
from typing import Any

from statifier.chart.compiler import find_lcca
from statifier.chart.durations import InvalidDuration, parse_duration
from statifier.chart.model import (
    AssignNode,
    CancelNode,
    ContentNode,
    ContentSpec,
    DataNode,
    ForeachNode,
    IfNode,
    InvokeNode,
    LogNode,
    Machine,
    Owner,
    ParamNode,
    RaiseNode,
    ScriptNode,
    SendNode,
    StateNode,
    TransitionNode,
)
from statifier.core import effects as fx
from statifier.core.events import SCXML_EVENT_PROCESSOR, Event, EventType, name_matches
from statifier.core.state import MachineState
from statifier.datamodel import EvaluationError, Expression, Location
from statifier.errors import NotRunningError
from statifier.ids import new_session_id

DEFAULT_MAX_MACROSTEP_ROUNDS = 10_000

_SELECT_CACHE_LIMIT = 4096
"""Memoized candidate chains kept per machine before the memo is reset."""

SCXML_INVOKE_TYPES = frozenset(
    {"scxml", "http://www.w3.org/TR/scxml/", "http://www.w3.org/TR/scxml"}
)
"""``<invoke type>`` spellings of the built-in SCXML invoke type (absent type means it too)."""

SCXML_SEND_TYPES = frozenset({"scxml", SCXML_EVENT_PROCESSOR})
"""``<send type>`` values the SCXML Event I/O Processor accepts (absent type means it too)."""

SYSTEM_VARIABLES = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})

Effects = list[fx.Effect]


class _Keep:
    """Marker: keep the routes snapshot the state already carries."""


KEEP = _Keep()


def initialize(
    machine: Machine,
    *,
    session_id: str | None = None,
    max_macrostep_rounds: int | None = DEFAULT_MAX_MACROSTEP_ROUNDS,
    datamodel: dict[str, Any] | None = None,
    trace: bool = False,
    invoke_types: Iterable[str] | None = None,
    routes: Container[str] | None = None,
) -> tuple[MachineState, Effects]:
    """Start an execution: datamodel, global scripts, initial entry, first macrostep.

    ``session_id`` becomes ``_sessionid``; pass one for a fully deterministic run (a fresh
    ``sess_...`` id is minted otherwise). ``datamodel`` seeds extra variables. ``invoke_types``
    lists the registered non-SCXML invoke types (None: built-ins only).
    ``max_macrostep_rounds`` of None means no budget (literal spec behaviour).

    ``routes`` is the driver's reachability snapshot: the send targets it can deliver to
    besides the session itself and its live invocations (``#_parent``, ``#_scxml_<id>``
    of sessions it knows). With a snapshot, a send to any other target raises
    ``error.communication`` at once and aborts its block (spec 6.2); with None the core
    does not judge, and the driver reports unreachable targets when it delivers.
    Routes are per-driver data: positions never store them.
    """
    if max_macrostep_rounds is not None and max_macrostep_rounds < 1:
        raise ValueError("max_macrostep_rounds must be a positive integer or None")
    sid = session_id if session_id is not None else new_session_id()
    run = _Run.fresh(machine, sid, max_macrostep_rounds, trace, invoke_types, routes)
    run.initialize(dict(datamodel or {}))
    return run.freeze(), run.effects


def handle_event(
    state: MachineState,
    event: Event | str,
    *,
    routes: Container[str] | _Keep | None = KEEP,
) -> tuple[MachineState, Effects]:
    """Process one external event: a full macrostep. Raises ``NotRunningError`` if halted.

    ``routes`` (see ``initialize``) replaces the reachability snapshot for this drive.
    Whether an event from a cancelled invocation is still wanted is the driver's call
    (one already queued when its child finished is; one from a cancelled child is not).
    """
    if not state.running:
        raise NotRunningError(f"execution {state.session_id} is not running")
    if isinstance(event, str):
        event = Event(name=event)
    run = _Run.resume(state, routes)
    run.process_external(event)
    return run.freeze(), run.effects


def deliver_internal(
    state: MachineState,
    name: str,
    *,
    kind: EventType = "platform",
    data: Any = None,
    sendid: str | None = None,
    origin: str | None = None,
    origintype: str | None = None,
    invokeid: str | None = None,
    routes: Container[str] | _Keep | None = KEEP,
) -> tuple[MachineState, Effects]:
    """Place an event on the internal queue and run to quiescence, in no new macrostep.

    The door for errors a driver detects after the fact (an unreachable target is
    ``error.communication``) and for delayed sends to ``#_internal``.
    """
    if not state.running:
        raise NotRunningError(f"execution {state.session_id} is not running")
    run = _Run.resume(state, routes)
    run.internal_queue.append(
        Event(
            name=name,
            type=kind,
            data=data,
            sendid=sendid,
            origin=origin,
            origintype=origintype,
            invokeid=invokeid,
        )
    )
    run.main_event_loop()
    return run.freeze(), run.effects


def cancel(state: MachineState) -> tuple[MachineState, Effects]:
    """Cancel the execution: run every onexit, cancel invocations, emit ``Done``.

    Cancelling an execution that already finished changes nothing.
    """
    if state.status == "done":
        return state, []
    run = _Run.resume(state, KEEP)
    run.running = False
    run.exit_interpreter()
    return run.freeze(), run.effects


class _BlockAbort(Exception):
    """An error inside a block of executable content: the rest of the block is skipped."""


class _Run:
    """A mutable working copy of a ``MachineState`` for the duration of one public call."""

    __slots__ = (
        "_frozen",
        "_order",
        "caller_context",
        "config",
        "datamodel",
        "effects",
        "entered",
        "history",
        "internal_queue",
        "invocations",
        "invoke_counter",
        "invoke_types",
        "machine",
        "macrostep",
        "max_rounds",
        "microstep",
        "round",
        "routes",
        "running",
        "send_counter",
        "session_id",
        "states",
        "states_to_invoke",
        "status",
        "timer_counter",
        "trace",
        "transitions",
    )

    machine: Machine
    states: tuple[StateNode, ...]
    transitions: tuple[TransitionNode, ...]
    session_id: str
    config: set[int]
    _order: list[int] | None
    _frozen: frozenset[int] | None
    internal_queue: deque[Event]
    history: dict[int, tuple[int, ...]]
    entered: frozenset[int]
    states_to_invoke: set[int]
    invocations: dict[tuple[int, int], str]
    invoke_counter: int
    send_counter: int
    timer_counter: int
    caller_context: Any
    datamodel: dict[str, Any]
    running: bool
    status: str
    macrostep: int
    microstep: int
    round: int
    trace: bool
    max_rounds: int | None
    invoke_types: frozenset[str] | None
    routes: Container[str] | None
    effects: Effects

    @classmethod
    def fresh(
        cls,
        machine: Machine,
        session_id: str,
        max_rounds: int | None,
        trace: bool,
        invoke_types: Iterable[str] | None,
        routes: Container[str] | None,
    ) -> _Run:
        run = cls.__new__(cls)
        run.machine = machine
        run.states = machine.states
        run.transitions = machine.transitions
        run.session_id = session_id
        run.config = set()
        run._order = None
        run._frozen = None
        run.internal_queue = deque()
        run.history = {}
        run.entered = frozenset()
        run.states_to_invoke = set()
        run.invocations = {}
        run.invoke_counter = run.send_counter = run.timer_counter = 0
        run.caller_context = None
        run.datamodel = {}
        run.running = True
        run.status = "running"
        run.macrostep, run.microstep, run.round = 1, 0, 0
        run.trace = trace
        run.max_rounds = max_rounds
        run.invoke_types = frozenset(invoke_types) if invoke_types is not None else None
        run.routes = routes
        run.effects = []
        return run

    @classmethod
    def resume(cls, state: MachineState, routes: Container[str] | _Keep | None = KEEP) -> _Run:
        run = cls.__new__(cls)
        machine = state.machine
        run.machine = machine
        run.states = machine.states
        run.transitions = machine.transitions
        run.session_id = state.session_id
        run.config = set(state.configuration)
        run._order = None
        run._frozen = state.configuration
        run.internal_queue = deque(state.internal_queue)
        # history, entered and invocations are copied on write: most steps never touch them.
        run.history = state.history
        run.entered = state.entered
        run.states_to_invoke = set(state.states_to_invoke)
        run.invocations = state.invocations
        run.invoke_counter = state.invoke_counter
        run.send_counter = state.send_counter
        run.timer_counter = state.timer_counter
        run.caller_context = state.caller_context
        run.datamodel = dict(state.datamodel)
        run.running = state.running
        run.status = state.status
        run.macrostep, run.microstep, run.round = state.macrostep, state.microstep, state.round
        run.trace = state.trace
        run.max_rounds = state.max_macrostep_rounds
        run.invoke_types = state.invoke_types
        run.routes = state.routes if isinstance(routes, _Keep) else routes
        run.effects = []
        return run

    def freeze(self) -> MachineState:
        state = MachineState.__new__(MachineState)
        # MachineState is frozen; filling its __dict__ directly is the fast path that the
        # generated __init__ (one object.__setattr__ per field) is not.
        state.__dict__.update(
            machine=self.machine,
            session_id=self.session_id,
            configuration=self.frozen_config(),
            internal_queue=tuple(self.internal_queue),
            history=self.history,
            entered=self.entered,
            states_to_invoke=tuple(sorted(self.states_to_invoke)) if self.states_to_invoke else (),
            invocations=self.invocations,
            invoke_counter=self.invoke_counter,
            send_counter=self.send_counter,
            timer_counter=self.timer_counter,
            caller_context=self.caller_context,
            datamodel=self.datamodel,
            running=self.running,
            status="done" if self.status == "done" else "running",
            macrostep=self.macrostep,
            microstep=self.microstep,
            round=self.round,
            trace=self.trace,
            max_macrostep_rounds=self.max_rounds,
            invoke_types=self.invoke_types,
            routes=self.routes,
        )
        return state

    # -- small helpers -------------------------------------------------------------------

    def frozen_config(self) -> frozenset[int]:
        """The configuration as a frozenset, cached until it changes."""
        if self._frozen is None:
            self._frozen = frozenset(self.config)
        return self._frozen

    def changed(self) -> None:
        """The configuration changed: drop the cached views of it."""
        self._order = None
        self._frozen = None

    def set_invocation(self, key: tuple[int, int], invoke_id: str) -> None:
        self.invocations = {**self.invocations, key: invoke_id}

    def pop_invocation(self, key: tuple[int, int]) -> str | None:
        if key not in self.invocations:
            return None
        invocations = dict(self.invocations)
        invoke_id = invocations.pop(key)
        self.invocations = invocations
        return invoke_id

    def order(self) -> list[int]:
        """The configuration in document (entry) order, cached until it changes."""
        if self._order is None:
            self._order = sorted(self.config)
        return self._order

    def counters(self) -> dict[str, int]:
        return {"macrostep": self.macrostep, "microstep": self.microstep, "round": self.round}

    def ids(self, indexes: Iterable[int]) -> tuple[str, ...]:
        states = self.states
        return tuple(states[i].id for i in indexes)

    def in_state(self, state_id: str) -> bool:
        index = self.machine.state_ids.get(state_id)
        return index is not None and index in self.config

    def raise_error(self, name: str, message: str, sendid: str | None = None) -> None:
        """Place a platform error event (``error.execution``...) on the internal queue."""
        self.internal_queue.append(
            Event(name=name, type="platform", data={"message": message}, sendid=sendid)
        )

    def evaluate(self, expr: Expression) -> Any:
        """Evaluate or raise ``_BlockAbort`` after queueing ``error.execution``."""
        try:
            return expr.evaluate(self.datamodel, self.in_state)
        except EvaluationError as exc:
            self.raise_error("error.execution", f"{expr.source!r}: {exc}")
        except Exception as exc:  # nothing may escape the core as a Python exception
            self.raise_error("error.execution", f"{expr.source!r}: internal error {exc!r}")
        raise _BlockAbort

    def condition(self, expr: Expression | None) -> bool:
        """Spec 5.9.1: a condition that cannot be evaluated is false and raises an error."""
        if expr is None:
            return True
        try:
            return bool(expr.evaluate(self.datamodel, self.in_state))
        except Exception as exc:
            self.raise_error("error.execution", f"condition {expr.source!r}: {exc}")
            return False

    def write(
        self,
        location: Location,
        value: Any,
        c_index: int | None,
        owner: Owner | None,
        *,
        emit: bool = True,
    ) -> fx.DatamodelChange:
        """Assign through a location; unknown or system roots are errors (block aborts)."""
        root = location.root
        if root.startswith("_") or root not in self.datamodel:
            what = "a read-only system variable" if root.startswith("_") else "not declared"
            self.raise_error(
                "error.execution", f"cannot assign to {location.source!r}: {root!r} is {what}"
            )
            raise _BlockAbort
        try:
            result = location.write(self.datamodel, value, self.in_state)
        except Exception as exc:
            self.raise_error("error.execution", f"cannot assign to {location.source!r}: {exc}")
            raise _BlockAbort from None
        self.datamodel[root] = result.root_value
        change = fx.DatamodelChange(
            location=location.source,
            path=tuple(result.path),
            new_value=value,
            prior_value=result.prior,
            c_index=c_index,
            owner=owner,
            **self.counters(),
        )
        if emit:
            self.effects.append(change)
        return change

    def bind(self, name: str, value: Any, c_index: int | None, owner: Owner | None) -> None:
        """Bind a top-level variable (``<data>``, foreach item/index), creating it if needed."""
        if name.startswith("_"):
            self.raise_error(
                "error.execution", f"cannot bind {name!r}: it is a read-only system variable"
            )
            raise _BlockAbort
        prior = self.datamodel.get(name)
        self.datamodel[name] = value
        self.effects.append(
            fx.DatamodelChange(
                location=name,
                path=(name,),
                new_value=value,
                prior_value=prior,
                c_index=c_index,
                owner=owner,
                **self.counters(),
            )
        )

    # -- initialization (Appendix D ``interpret``) ---------------------------------------

    def initialize(self, seed: dict[str, Any]) -> None:
        machine = self.machine
        datamodel = self.datamodel
        datamodel.update(seed)
        location = f"#_scxml_{self.session_id}"
        datamodel["_sessionid"] = self.session_id
        datamodel["_name"] = machine.name
        datamodel["_ioprocessors"] = {
            SCXML_EVENT_PROCESSOR: {"location": location},
            "scxml": {"location": location},
        }
        datamodel["_event"] = None
        for data in machine.data:
            datamodel.setdefault(data.id, None)
        self.effects.append(fx.DatamodelInit(datamodel=dict(datamodel), **self.counters()))
        for data in machine.data:
            # A value handed in (an invoking parent's params) overrides the declaration.
            if data.id in seed:
                continue
            if not machine.late_binding or data.state == 0:
                self.initialize_data(data)
        for script in machine.scripts:
            self.run_script(script, None, None)
        root = self.states[0]
        assert root.initial_transition is not None
        self.microstep += 1
        self.enter_states([self.transitions[root.initial_transition]])
        self.main_event_loop()

    def initialize_data(self, data: DataNode) -> None:
        if data.has_value:
            value = data.value
        elif data.expr is not None:
            try:
                value = data.expr.evaluate(self.datamodel, self.in_state)
            except Exception as exc:
                self.raise_error("error.execution", f"data {data.id!r}: {exc}")
                return
        elif data.src is not None:
            self.raise_error(
                "error.execution", f"data {data.id!r}: src {data.src!r} was not resolved"
            )
            return
        else:
            return
        self.bind(data.id, value, None, None)

    def run_script(self, script: Any, c_index: int | None, owner: Owner | None) -> None:
        try:
            writes = script.run(self.datamodel, self.in_state, _writable)
        except EvaluationError as exc:
            for write in getattr(exc, "writes", ()):
                self.record_write(write, c_index, owner)
            self.raise_error("error.execution", f"script: {exc}")
            raise _BlockAbort from None
        except Exception as exc:
            self.raise_error("error.execution", f"script: internal error {exc!r}")
            raise _BlockAbort from None
        for write in writes:
            self.record_write(write, c_index, owner)

    def record_write(self, write: Any, c_index: int | None, owner: Owner | None) -> None:
        self.effects.append(
            fx.DatamodelChange(
                location=write.root,
                path=tuple(write.path),
                new_value=write.root_value,
                prior_value=write.prior,
                c_index=c_index,
                owner=owner,
                **self.counters(),
            )
        )

    # -- the event loop ------------------------------------------------------------------

    def process_external(self, event: Event) -> None:
        """The second half of ``mainEventLoop``: what follows the blocking dequeue."""
        self.macrostep += 1
        self.microstep = 0
        self.round = 0
        self.caller_context = event.caller_context
        if self.trace:
            self.effects.append(fx.EventDequeued(event=event, source="external", **self.counters()))
        self.datamodel["_event"] = event.as_system_variable()
        self.finalize_and_autoforward(event)
        enabled = self.select_transitions(event)
        if enabled:
            self.microstep += 1
            self.do_microstep(enabled)
        self.main_event_loop()

    def finalize_and_autoforward(self, event: Event) -> None:
        if not self.invocations:
            return
        states = self.states
        finished: list[tuple[int, int]] = []
        for s in self.order():
            for inv in states[s].invokes:
                key = (s, inv.index)
                invoke_id = self.invocations.get(key)
                if invoke_id is None:
                    continue
                if event.invokeid == invoke_id:
                    self.execute_block(inv.finalize)
                    if event.name in (
                        f"done.invoke.{invoke_id}",
                        f"error.communication.invoke.{invoke_id}",
                    ):
                        finished.append(key)
                if inv.autoforward:
                    self.effects.append(
                        fx.Autoforward(
                            invoke_id=invoke_id, state_index=s, event=event, **self.counters()
                        )
                    )
        for key in finished:
            self.pop_invocation(key)

    def main_event_loop(self) -> None:
        """Run eventless transitions and internal events to quiescence (or budget)."""
        budget = self.max_rounds
        rounds = 0
        while self.running:
            macrostep_done = False
            while self.running and not macrostep_done:
                if budget is not None and rounds >= budget:
                    self.effects.append(
                        fx.BudgetExhausted(
                            configuration=self.ids(self.order()),
                            budget=budget,
                            pending_internal_events=len(self.internal_queue),
                            **self.counters(),
                        )
                    )
                    return
                rounds += 1
                self.round += 1
                enabled = self.select_eventless_transitions()
                if not enabled:
                    if not self.internal_queue:
                        macrostep_done = True
                    else:
                        internal_event = self.internal_queue.popleft()
                        if self.trace:
                            self.effects.append(
                                fx.EventDequeued(
                                    event=internal_event, source="internal", **self.counters()
                                )
                            )
                        self.datamodel["_event"] = internal_event.as_system_variable()
                        enabled = self.select_transitions(internal_event)
                if enabled:
                    self.microstep += 1
                    self.do_microstep(enabled)
            if not self.running:
                break
            self.invoke_pass()
            if self.internal_queue:
                continue
            if self.trace:
                self.effects.append(
                    fx.MacrostepStable(configuration=self.ids(self.order()), **self.counters())
                )
            return
        self.exit_interpreter()

    def exit_interpreter(self) -> None:
        states = self.states
        configuration = self.ids(self.order())
        donedata: Any = None
        for s in sorted(self.config, reverse=True):
            state = states[s]
            for block in state.onexit:
                self.execute_block(block)
            self.cancel_invocations(state)
            self.config.discard(s)
            self.changed()
            if state.kind == "final" and state.parent == 0:
                donedata = self.evaluate_donedata(state)
        self.running = False
        self.status = "done"
        self.effects.append(
            fx.Done(donedata=donedata, configuration=configuration, **self.counters())
        )

    # -- selection -----------------------------------------------------------------------

    def matching(self, name: str) -> frozenset[int]:
        """Transitions whose event descriptors match ``name`` (memoized per machine)."""
        cache = self.machine._cache
        key = ("match", name)
        found = cache.get(key)
        if found is None:
            found = frozenset(
                t.index for t in self.transitions if t.events and name_matches(t.events, name)
            )
            cache[key] = found
        return found

    def select_eventless_transitions(self) -> list[TransitionNode]:
        if not self.machine.has_eventless:
            return []
        return self._select(None)

    def select_transitions(self, event: Event) -> list[TransitionNode]:
        return self._select(self.matching(event.name))

    def candidates(self, matching: frozenset[int] | None) -> tuple[tuple[TransitionNode, ...], ...]:
        """Per active atomic state (document order), the transitions that could fire.

        Each chain lists, nearest state first and in document order within a state, the
        transitions whose events match (or the eventless ones when ``matching`` is None):
        exactly the candidates Appendix D's ``selectTransitions`` walks before conditions.
        Memoized per (configuration, event set); conditions are evaluated by the caller.
        """
        cache = self.machine._cache.setdefault("select", {})
        key = (self.frozen_config(), matching)
        chains = cache.get(key)
        if chains is not None:
            return chains  # type: ignore[no-any-return]
        states = self.states
        transitions = self.transitions
        found: list[tuple[TransitionNode, ...]] = []
        for s in self.order():
            state = states[s]
            if not state.atomic:
                continue
            chain = [
                transitions[t]
                for anc in (s, *state.ancestors)
                for t in states[anc].transitions
                if (not transitions[t].events if matching is None else t in matching)
            ]
            if chain:
                found.append(tuple(chain))
        chains = tuple(found)
        if len(cache) >= _SELECT_CACHE_LIMIT:
            cache.clear()
        cache[key] = chains
        return chains

    def _select(self, matching: frozenset[int] | None) -> list[TransitionNode]:
        enabled: list[TransitionNode] = []
        chosen: set[int] = set()
        for chain in self.candidates(matching):
            for transition in chain:
                if transition.cond is None or self.condition(transition.cond):
                    if transition.index not in chosen:
                        chosen.add(transition.index)
                        enabled.append(transition)
                    break
        if len(enabled) > 1:
            enabled = self.remove_conflicting_transitions(enabled)
        if self.trace and (enabled or matching is not None):
            self.effects.append(
                fx.TransitionsSelected(t_indexes=tuple(t.index for t in enabled), **self.counters())
            )
        return enabled

    def remove_conflicting_transitions(self, enabled: list[TransitionNode]) -> list[TransitionNode]:
        filtered: list[TransitionNode] = []
        exit_sets: dict[int, set[int]] = {}

        def exit_set(t: TransitionNode) -> set[int]:
            found = exit_sets.get(t.index)
            if found is None:
                found = set(self.compute_exit_set([t]))
                exit_sets[t.index] = found
            return found

        for t1 in enabled:
            t1_preempted = False
            to_remove: list[TransitionNode] = []
            for t2 in filtered:
                if exit_set(t1) & exit_set(t2):
                    if self.machine.is_descendant(t1.source, t2.source):
                        to_remove.append(t2)
                    else:
                        t1_preempted = True
                        break
            if not t1_preempted:
                for t3 in to_remove:
                    filtered.remove(t3)
                filtered.append(t1)
        return filtered

    # -- microstep -----------------------------------------------------------------------

    def do_microstep(self, enabled: list[TransitionNode]) -> None:
        self.exit_states(enabled)
        self.execute_transition_content(enabled)
        self.enter_states(enabled)

    def execute_transition_content(self, enabled: list[TransitionNode]) -> None:
        for t in enabled:
            self.execute_block(t.content)

    def compute_exit_set(self, transitions: list[TransitionNode]) -> list[int]:
        states_to_exit: list[int] = []
        for t in transitions:
            if not t.targets:
                continue
            domain = self.get_transition_domain(t)
            if domain is None:
                continue
            last = self.states[domain].last
            for s in self.order():
                if domain < s <= last and s not in states_to_exit:
                    states_to_exit.append(s)
        return states_to_exit

    def exit_states(self, enabled: list[TransitionNode]) -> None:
        states = self.states
        to_exit = self.compute_exit_set(enabled)
        if not to_exit:
            return
        if self.states_to_invoke:
            for s in to_exit:
                self.states_to_invoke.discard(s)
        to_exit.sort(reverse=True)
        for s in to_exit:
            for h in states[s].history:
                if states[h].history_deep:
                    last = states[s].last
                    recorded = tuple(x for x in self.order() if states[x].atomic and s < x <= last)
                    self.history = {**self.history, h: recorded}
                else:
                    recorded = tuple(x for x in self.order() if states[x].parent == s)
                    self.history = {**self.history, h: recorded}
        for s in to_exit:
            state = states[s]
            for block in state.onexit:
                self.execute_block(block)
            self.cancel_invocations(state)
            self.config.discard(s)
            self.changed()
        if self.trace:
            self.effects.append(fx.StatesExited(states=self.ids(to_exit), **self.counters()))

    def cancel_invocations(self, state: StateNode) -> None:
        for inv in state.invokes:
            invoke_id = self.pop_invocation((state.index, inv.index))
            if invoke_id is not None:
                self.effects.append(
                    fx.CancelInvoke(invoke_id=invoke_id, state_index=state.index, **self.counters())
                )

    def enter_states(self, enabled: list[TransitionNode]) -> None:
        states = self.states
        machine = self.machine
        to_enter, default_entry, default_history = self.compute_entry_set(enabled)
        has_invokes = machine.has_invokes
        for s in to_enter:
            state = states[s]
            self.config.add(s)
            self.changed()
            if has_invokes:
                self.states_to_invoke.add(s)
            if s not in self.entered:
                self.entered = self.entered | {s}
                if machine.late_binding and s != 0:
                    for d in state.data:
                        self.initialize_data(machine.data[d])
            for block in state.onentry:
                self.execute_block(block)
            if s in default_entry and state.initial_transition is not None:
                self.execute_block(self.transitions[state.initial_transition].content)
            history_content = default_history.get(s)
            if history_content:
                self.execute_block(history_content)
            if state.kind == "final":
                if state.parent == 0:
                    self.running = False
                else:
                    parent = states[state.parent]
                    self.internal_queue.append(
                        Event(
                            name=f"done.state.{parent.id}",
                            type="platform",
                            data=self.evaluate_donedata(state),
                        )
                    )
                    if parent.parent > 0:
                        grandparent = states[parent.parent]
                        if grandparent.kind == "parallel" and all(
                            self.is_in_final_state(c) for c in grandparent.children
                        ):
                            self.internal_queue.append(
                                Event(name=f"done.state.{grandparent.id}", type="platform")
                            )
        if self.trace:
            self.effects.append(fx.StatesEntered(states=self.ids(to_enter), **self.counters()))

    def compute_entry_set(
        self, transitions: list[TransitionNode]
    ) -> tuple[list[int], set[int], dict[int, tuple[ContentNode, ...]]]:
        """Appendix D ``computeEntrySet``; memoized when no history state is involved."""
        cacheable = all(t.static for t in transitions)
        key: Any = None
        if cacheable:
            key = ("entry", tuple(t.index for t in transitions))
            cached = self.machine._cache.get(key)
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        entry = _EntrySet()
        for t in transitions:
            for s in t.targets:
                self.add_descendant_states_to_enter(s, entry)
            ancestor = self.get_transition_domain(t)
            for s in self.get_effective_target_states(t):
                self.add_ancestor_states_to_enter(s, ancestor, entry)
        result = (sorted(entry.states), entry.default_entry, entry.default_history)
        if cacheable and not entry.touched_history:
            self.machine._cache[key] = result
        return result

    def add_descendant_states_to_enter(self, s: int, entry: _EntrySet) -> None:
        states = self.states
        state = states[s]
        if state.kind == "history":
            entry.touched_history = True
            recorded = self.history.get(s)
            if recorded:
                for r in recorded:
                    self.add_descendant_states_to_enter(r, entry)
                for r in recorded:
                    self.add_ancestor_states_to_enter(r, state.parent, entry)
            else:
                assert state.initial_transition is not None
                default = self.transitions[state.initial_transition]
                entry.default_history[state.parent] = default.content
                for r in default.targets:
                    self.add_descendant_states_to_enter(r, entry)
                for r in default.targets:
                    self.add_ancestor_states_to_enter(r, state.parent, entry)
            return
        entry.states.add(s)
        if state.compound:
            entry.default_entry.add(s)
            assert state.initial_transition is not None
            initial = self.transitions[state.initial_transition]
            for r in initial.targets:
                self.add_descendant_states_to_enter(r, entry)
            for r in initial.targets:
                self.add_ancestor_states_to_enter(r, s, entry)
        elif state.kind == "parallel":
            for child in state.children:
                if not any(child <= x <= states[child].last for x in entry.states):
                    self.add_descendant_states_to_enter(child, entry)

    def add_ancestor_states_to_enter(self, s: int, ancestor: int | None, entry: _EntrySet) -> None:
        states = self.states
        for anc in self.get_proper_ancestors(s, ancestor):
            entry.states.add(anc)
            if states[anc].kind == "parallel":
                for child in states[anc].children:
                    if not any(child <= x <= states[child].last for x in entry.states):
                        self.add_descendant_states_to_enter(child, entry)

    def get_proper_ancestors(self, s: int, ancestor: int | None) -> list[int]:
        """Proper ancestors of ``s`` up to (excluding) ``ancestor``; never the root."""
        found: list[int] = []
        for anc in self.states[s].ancestors:
            if anc == ancestor or anc == 0:
                break
            found.append(anc)
        return found

    def is_in_final_state(self, s: int) -> bool:
        state = self.states[s]
        if state.compound:
            return any(self.states[c].kind == "final" and c in self.config for c in state.children)
        if state.kind == "parallel":
            return all(self.is_in_final_state(c) for c in state.children)
        return False

    def get_transition_domain(self, t: TransitionNode) -> int | None:
        if t.static:
            return t.domain
        tstates = self.get_effective_target_states(t)
        if not tstates:
            return None
        source = self.states[t.source]
        if t.internal and source.compound and all(source.index < s <= source.last for s in tstates):
            return t.source
        if t.source == 0:
            return 0
        return find_lcca(self.states, (t.source, *tstates))

    def get_effective_target_states(self, t: TransitionNode) -> list[int]:
        targets: list[int] = []
        for s in t.targets:
            if self.states[s].kind == "history":
                recorded = self.history.get(s)
                if recorded:
                    extra: Iterable[int] = recorded
                else:
                    default = self.states[s].initial_transition
                    assert default is not None
                    extra = self.get_effective_target_states(self.transitions[default])
                for r in extra:
                    if r not in targets:
                        targets.append(r)
            elif s not in targets:
                targets.append(s)
        return targets

    # -- invocations ---------------------------------------------------------------------

    def invoke_pass(self) -> None:
        if not self.states_to_invoke:
            return
        if not self.machine.has_invokes:
            self.states_to_invoke.clear()
            return
        pending = sorted(self.states_to_invoke)
        self.states_to_invoke.clear()
        for s in pending:
            if s not in self.config:
                continue
            for inv in self.states[s].invokes:
                self.start_invocation(inv)

    def start_invocation(self, inv: InvokeNode) -> None:
        state = self.states[inv.state]
        try:
            if inv.id is not None:
                invoke_id = inv.id
            else:
                self.invoke_counter += 1
                prefix = f"{state.id}." if state.named else ""
                invoke_id = f"{prefix}inv_{self.invoke_counter}"
                if inv.idlocation is not None:
                    self.write(inv.idlocation, invoke_id, None, None)
            invoke_type = self.evaluate(inv.typeexpr) if inv.typeexpr is not None else inv.type
            if invoke_type is None:
                invoke_type = "http://www.w3.org/TR/scxml/"
            if not isinstance(invoke_type, str):
                self.raise_error(
                    "error.execution", f"invoke type must be a string, not {invoke_type!r}"
                )
                return
            src = self.evaluate(inv.srcexpr) if inv.srcexpr is not None else inv.src
            if src is not None and not isinstance(src, str):
                self.raise_error("error.execution", f"invoke src must be a string, not {src!r}")
                return
            params = self.event_data_fields(inv.namelist, inv.params)
            content = self.content_value(inv.content) if inv.content is not None else None
        except _BlockAbort:
            return
        if invoke_type not in SCXML_INVOKE_TYPES and (
            self.invoke_types is None or invoke_type not in self.invoke_types
        ):
            self.raise_error("error.execution", f"invoke type {invoke_type!r} is not registered")
            return
        self.set_invocation((inv.state, inv.index), invoke_id)
        self.effects.append(
            fx.Invoke(
                invoke_id=invoke_id,
                type=invoke_type,
                src=src,
                params=params,
                content=content,
                autoforward=inv.autoforward,
                state_index=inv.state,
                invoke_index=inv.index,
                caller_context=self.caller_context,
                **self.counters(),
            )
        )

    # -- executable content --------------------------------------------------------------

    def execute_block(self, nodes: tuple[ContentNode, ...]) -> None:
        if not nodes:
            return
        try:
            for node in nodes:
                _EXECUTORS[type(node)](self, node)
        except _BlockAbort:
            pass

    def execute_nodes(self, nodes: tuple[ContentNode, ...]) -> None:
        for node in nodes:
            _EXECUTORS[type(node)](self, node)

    def exec_raise(self, node: RaiseNode) -> None:
        self.internal_queue.append(Event(name=node.event, type="internal"))

    def exec_log(self, node: LogNode) -> None:
        value = self.evaluate(node.expr) if node.expr is not None else None
        self.effects.append(
            fx.Log(
                label=node.label,
                value=value,
                c_index=node.c_index,
                owner=node.owner,
                **self.counters(),
            )
        )

    def exec_assign(self, node: AssignNode) -> None:
        value = self.evaluate(node.expr) if node.expr is not None else node.value
        self.write(node.location, value, node.c_index, node.owner)

    def exec_if(self, node: IfNode) -> None:
        for cond, body in node.branches:
            if cond is None or self.condition(cond):
                self.execute_nodes(body)
                return

    def exec_foreach(self, node: ForeachNode) -> None:
        array = self.evaluate(node.array)
        if not isinstance(array, list):
            self.raise_error(
                "error.execution", f"foreach array {node.array.source!r} is not a list"
            )
            raise _BlockAbort
        for position, item in enumerate(list(array)):
            self.bind(node.item, item, node.c_index, node.owner)
            if node.index is not None:
                self.bind(node.index, position, node.c_index, node.owner)
            self.execute_nodes(node.body)

    def exec_script(self, node: ScriptNode) -> None:
        self.run_script(node.script, node.c_index, node.owner)

    def exec_cancel(self, node: CancelNode) -> None:
        if node.sendidexpr is not None:
            sendid = self.evaluate(node.sendidexpr)
            if not isinstance(sendid, str):
                self.raise_error(
                    "error.execution", f"cancel sendid must be a string, not {sendid!r}"
                )
                raise _BlockAbort
        else:
            assert node.sendid is not None
            sendid = node.sendid
        self.timer_counter += 1
        self.effects.append(
            fx.Cancel(
                send_id=sendid,
                c_index=node.c_index,
                owner=node.owner,
                ordinal=self.timer_counter,
                caller_context=self.caller_context,
                **self.counters(),
            )
        )

    def exec_send(self, node: SendNode) -> None:
        # The id is minted (and idlocation written) before anything can fail, so a rejected
        # send still consumes an id and its error event carries it (W3C test 332).
        change: fx.DatamodelChange | None = None
        if node.id is not None:
            send_id, from_author = node.id, True
        else:
            self.send_counter += 1
            send_id, from_author = f"send_{self.send_counter}", False
            if node.idlocation is not None:
                change = self.write(node.idlocation, send_id, node.c_index, node.owner, emit=False)
        try:
            name = self.evaluate(node.eventexpr) if node.eventexpr is not None else node.event
            target = self.evaluate(node.targetexpr) if node.targetexpr is not None else node.target
            send_type = self.evaluate(node.typeexpr) if node.typeexpr is not None else node.type
            delay_ms = node.delay_ms
            if node.delayexpr is not None:
                delay_ms = self.delay_value(self.evaluate(node.delayexpr))
            data = (
                self.content_value(node.content)
                if node.content is not None
                else self.event_data_fields(node.namelist, node.params) or None
            )
        except _BlockAbort:
            self.retag_last_error(send_id)
            raise
        problem = _send_problem(name, target, send_type)
        if problem is not None:
            self.raise_error("error.execution", problem, sendid=send_id)
            raise _BlockAbort
        if not self.reachable(target):
            self.raise_error(
                "error.communication", f"send target {target!r} is unreachable", sendid=send_id
            )
            raise _BlockAbort
        if change is not None:
            self.effects.append(change)
        assert isinstance(name, str)
        if delay_ms:
            self.timer_counter += 1
            self.effects.append(
                fx.SendDelayed(
                    event=name,
                    target=target,
                    type=send_type,
                    data=data,
                    send_id=send_id,
                    delay_ms=delay_ms,
                    c_index=node.c_index,
                    owner=node.owner,
                    ordinal=self.timer_counter,
                    id_from_author=from_author,
                    caller_context=self.caller_context,
                    **self.counters(),
                )
            )
        elif target == "#_internal":
            self.internal_queue.append(
                Event(
                    name=name,
                    type="internal",
                    data=data,
                    sendid=send_id if from_author else None,
                    origin=f"#_scxml_{self.session_id}",
                    origintype=SCXML_EVENT_PROCESSOR,
                )
            )
        else:
            self.effects.append(
                fx.Send(
                    event=name,
                    target=target,
                    type=send_type,
                    data=data,
                    send_id=send_id,
                    c_index=node.c_index,
                    owner=node.owner,
                    id_from_author=from_author,
                    caller_context=self.caller_context,
                    **self.counters(),
                )
            )

    def reachable(self, target: str | None) -> bool:
        """Judge a valid target against the routes snapshot (True when there is none)."""
        if self.routes is None or target is None or target == "#_internal":
            return True
        if target == f"#_scxml_{self.session_id}" or target in self.routes:
            return True
        if target.startswith("#_") and not target.startswith("#_scxml_") and target != "#_parent":
            return target[2:] in self.invocations.values()
        return False

    def retag_last_error(self, send_id: str) -> None:
        """Give the error event a failed send argument just queued the send's id."""
        if self.internal_queue:
            last = self.internal_queue[-1]
            if last.name == "error.execution" and last.sendid is None:
                self.internal_queue[-1] = Event(
                    name=last.name, type=last.type, data=last.data, sendid=send_id
                )

    def delay_value(self, value: Any) -> int:
        if isinstance(value, str):
            try:
                return parse_duration(value)
            except InvalidDuration as exc:
                self.raise_error("error.execution", str(exc))
                raise _BlockAbort from None
        self.raise_error(
            "error.execution", f"a delay must be a duration string like '5s', not {value!r}"
        )
        raise _BlockAbort

    def event_data_fields(
        self, namelist: tuple[tuple[str, Expression], ...], params: tuple[ParamNode, ...]
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for name, expr in namelist:
            fields[name] = self.evaluate(expr)
        for param in params:
            fields[param.name] = self.evaluate(param.value)
        return fields

    def content_value(self, content: ContentSpec) -> Any:
        if content.expr is not None:
            return self.evaluate(content.expr)
        return content.value

    def evaluate_donedata(self, state: StateNode) -> Any:
        """Spec 5.5: a failed donedata evaluation raises an error and gives no data."""
        done = state.donedata
        if done is None:
            return None
        try:
            if done.content is not None:
                return self.content_value(done.content)
            return self.event_data_fields((), done.params)
        except _BlockAbort:
            return None


class _EntrySet:
    __slots__ = ("default_entry", "default_history", "states", "touched_history")

    def __init__(self) -> None:
        self.states: set[int] = set()
        self.default_entry: set[int] = set()
        self.default_history: dict[int, tuple[ContentNode, ...]] = {}
        self.touched_history = False


def _writable(name: str) -> bool:
    return not name.startswith("_")


def _send_problem(name: Any, target: Any, send_type: Any) -> str | None:
    """Why a send's evaluated arguments are invalid for the SCXML processor, or None."""
    if not isinstance(name, str) or not name:
        return f"send event name must be a non-empty string, not {name!r}"
    if send_type is not None and send_type not in SCXML_SEND_TYPES:
        return f"send type {send_type!r} is not supported"
    if target is None:
        return None
    if not isinstance(target, str):
        return f"send target must be a string, not {target!r}"
    if target in ("#_internal", "#_parent"):
        return None
    if target.startswith("#_scxml_") and len(target) > len("#_scxml_"):
        return None
    if target.startswith("#_") and len(target) > 2:
        return None
    return f"send target {target!r} is not a valid SCXML target"


_EXECUTORS: dict[type, Callable[[_Run, Any], None]] = {
    RaiseNode: _Run.exec_raise,
    LogNode: _Run.exec_log,
    AssignNode: _Run.exec_assign,
    IfNode: _Run.exec_if,
    ForeachNode: _Run.exec_foreach,
    ScriptNode: _Run.exec_script,
    SendNode: _Run.exec_send,
    CancelNode: _Run.exec_cancel,
}
