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

from bisect import bisect_left, bisect_right, insort
from collections.abc import Container, Iterable
from typing import Any, Final

from statifier.budget import DEFAULT_LIMITS, NODE_COST, MacrostepLimits, Reason
from statifier.chart.model import (
    ContentNode,
    InvokeNode,
    Machine,
    StateNode,
    TransitionNode,
    transition_domain,
)
from statifier.core import _replay, planner
from statifier.core import content as _content
from statifier.core import effects as fx
from statifier.core._memo import room
from statifier.core._run import KEEP, BlockAbort, Effects, Keep, shared
from statifier.core.content import ContentExecutor, DirectRun, KeptRun, compiled, direct_of
from statifier.core.events import Event, transition_index
from statifier.core.state import MachineState
from statifier.datamodel import DirectEvaluation, variables_of
from statifier.datamodel.base import DirectEvaluator
from statifier.errors import ExecutionResourceError, NotRunningError
from statifier.ids import new_session_id
from statifier.values import brief

DEFAULT_MAX_MACROSTEP_ROUNDS = 10_000

_SELECT_CACHE_LIMIT = 4096
"""Memoized candidate chains kept per machine before the memo is reset."""

_MEMO_LIMIT = 2048
"""Memoized event matches and entry sets kept per machine before the memo is reset."""

_MEMO_NAME_LENGTH = 256
"""Longer event names are matched every time, never memoized."""

SYSTEM_VARIABLES = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})

_NOTHING: frozenset[int] = frozenset()

_NONE: list[TransitionNode] = []
"""No transition enabled (never changed: ``main_event_loop`` only reads it)."""

QUIET_ROUNDS = True
"""Whether ``process_external`` settles a macrostep that nothing follows without
``main_event_loop`` (tests turn it off to compare both ways)."""


def initialize(
    machine: Machine,
    *,
    session_id: str | None = None,
    max_macrostep_rounds: int | None = DEFAULT_MAX_MACROSTEP_ROUNDS,
    datamodel: dict[str, Any] | None = None,
    trace: bool = False,
    invoke_types: Iterable[str] | None = None,
    routes: Container[str] | None = None,
    caller_context: Any = None,
    limits: MacrostepLimits = DEFAULT_LIMITS,
    basichttp_location: str | None = None,
) -> tuple[MachineState, Effects]:
    """Start an execution: datamodel, global scripts, initial entry, first macrostep.

    ``session_id`` becomes ``_sessionid``; pass one for a fully deterministic run (a fresh
    ``sess_...`` id is minted otherwise). ``datamodel`` seeds extra variables. ``invoke_types``
    lists the registered non-SCXML invoke types (None: built-ins only).
    ``max_macrostep_rounds`` of None means no round budget; ``limits`` are the other
    budgets of every macrostep (``statifier.budget``, ADR 0011); both are kept in the
    state, so they hold for the whole execution. ``caller_context`` is the opaque host
    term of the first macrostep: the core copies it onto that macrostep's effects (and a
    delayed send carries it into the event it fires).

    ``routes`` is the driver's reachability snapshot: the send targets it can deliver to
    besides the session itself and its live invocations (``#_parent``, ``#_scxml_<id>``
    of sessions it knows). With a snapshot, a send to any other target raises
    ``error.communication`` at once and aborts its block (spec 6.2); with None the core
    does not judge, and the driver reports unreachable targets when it delivers.
    Routes are per-driver data: positions never store them.

    ``basichttp_location`` is the URL at which the host receives BasicHTTP POSTs for this
    session (SCXML D.2): it becomes ``_ioprocessors['basichttp']['location']`` (and the
    entry under the processor's type URI). Without one the session has no such entry. It
    is part of the datamodel, so a position keeps it for the session's whole life.
    """
    if max_macrostep_rounds is not None and max_macrostep_rounds < 1:
        raise ValueError("max_macrostep_rounds must be a positive integer or None")
    sid = session_id if session_id is not None else new_session_id()
    run = Interpreter.fresh(
        machine, sid, max_macrostep_rounds, trace, invoke_types, routes, caller_context, limits
    )
    try:
        run.interpret(dict(datamodel or {}), basichttp_location)
    except (MemoryError, RecursionError) as exc:
        raise _resource_error(sid, exc) from None
    return run.freeze(), run.effects


def handle_event(
    state: MachineState,
    event: Event | str,
    *,
    routes: Container[str] | Keep | None = KEEP,
) -> tuple[MachineState, Effects]:
    """Process one external event: a full macrostep. Raises ``NotRunningError`` if halted.

    ``routes`` (see ``initialize``) replaces the reachability snapshot for this drive.
    Whether an event from a cancelled invocation is still wanted is the driver's call
    (one already queued when its child finished is; one from a cancelled child is not).
    """
    if not state.running:
        raise NotRunningError(f"execution {state.session_id} is not running")
    # (An Event by its exact type first: ``isinstance`` of one against ``str`` looks up
    # its ``__class__`` attribute the slow way.)
    if type(event) is not Event and isinstance(event, str):
        event = Event(name=event)
    if state.machine._cache.get(_replay.STEPS) is not None:
        replayed = _replay.replay(state, event, routes)
        if replayed is not None:
            return replayed, []
    run = _resume(state, routes)
    try:
        run.process_external(event)
    except (MemoryError, RecursionError) as exc:
        raise _resource_error(state.session_id, exc) from None
    after = run.freeze()
    if run.replayable and not run.effects and run.running and not run.internal_queue:
        _replay.record(state, event.name, after, run.entered_now)
    return after, run.effects


def deliver_internal(
    state: MachineState,
    event: Event,
    *,
    routes: Container[str] | Keep | None = KEEP,
) -> tuple[MachineState, Effects]:
    """Place ``event`` on the internal queue and run to quiescence, in no new macrostep.

    The door for errors a driver detects after the fact (``planner.undeliverable``,
    ``planner.invocation_start_failed``) and for delayed sends to ``#_internal``
    (``planner.fire``). An ``error.*`` event is announced with ``ErrorRaised``.
    """
    if not state.running:
        raise NotRunningError(f"execution {state.session_id} is not running")
    run = _resume(state, routes)
    try:
        if event.name.startswith("error."):
            run.queue_error(event)
        else:
            run.queue().append(event)
        run.main_event_loop()
    except (MemoryError, RecursionError) as exc:
        raise _resource_error(state.session_id, exc) from None
    return run.freeze(), run.effects


def cancel(state: MachineState) -> tuple[MachineState, Effects]:
    """Cancel the execution: run every onexit, cancel invocations, emit ``Done``.

    Cancelling an execution that already finished changes nothing.
    """
    if state.status == "done":
        return state, []
    run = _resume(state, KEEP)
    try:
        run.running = False
        run.exit_interpreter()
    except (MemoryError, RecursionError) as exc:
        raise _resource_error(state.session_id, exc) from None
    return run.freeze(), run.effects


def _resource_error(session_id: str, exc: BaseException) -> ExecutionResourceError:
    """Memory or stack exhaustion inside one call, as the engine's typed error.

    The working copy is then half-way through a microstep, so nothing of it is returned:
    the state the caller passed in is unchanged (the call had no effect).
    """
    return ExecutionResourceError(
        session_id, "memory" if isinstance(exc, MemoryError) else "stack depth"
    )


class Interpreter(ContentExecutor):
    """The Appendix D algorithm over the working copy; one instance per public call."""

    __slots__ = ()

    # -- initialization --------------------------------------------------------------

    def interpret(self, seed: dict[str, Any], basichttp_location: str | None = None) -> None:
        """Appendix D ``interpret``: datamodel, global scripts, initial entry, first loop.

        ``seed`` values (an invoking parent's params) override the declared ``<data>``;
        ``basichttp_location`` is the session's BasicHTTP location (see ``initialize``).
        """
        machine = self.machine
        datamodel = self.datamodel
        datamodel.update(seed)
        datamodel["_sessionid"] = self.session_id
        datamodel["_name"] = machine.name
        datamodel["_ioprocessors"] = planner.io_processors(self.session_id, basichttp_location)
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
        assert root.initial_transition is not None  # noqa: S101 - the compiler gives the root one
        self.microstep += 1
        self.enter_states([self.transitions[root.initial_transition]])
        self.main_event_loop()

    # -- the event loop ------------------------------------------------------------------

    def process_external(self, event: Event) -> None:
        """Appendix D ``mainEventLoop``, second half: what follows the blocking dequeue of
        an external event (cancel check, ``_event``, finalize/autoforward, selection)."""
        self.macrostep += 1
        self.microstep = 0
        self.round = 0
        self.caller_context = event.caller_context
        self.replayable = not (
            self.trace or self.invocations or self.internal_queue or self.machine.has_invokes
        )
        if self.replayable:
            self.entered_now = _NOTHING
        if self.trace:
            self.effects.append(fx.EventDequeued(event=event, source="external", **self.counters()))
        self.datamodel["_event"] = _system_variable(event)
        if self.invocations:
            self.finalize_and_autoforward(event)
        # ``select_transitions``, inlined: once per event.
        name = event.name
        memo = self.machine._cache.get("select")
        configuration = self._frozen  # ``frozen_config``, inlined: a resumed run has it
        if configuration is None:
            configuration = self.frozen_config()
        chains = None if memo is None else memo.get((configuration, name))
        if chains is not None:
            enabled = self._first_enabled(chains, True)
        else:
            enabled = self._select(self.matching(name), name)
        if enabled:
            self.microstep += 1
            self.do_microstep(enabled)
        # ``main_event_loop``'s one round when nothing follows the event (no eventless
        # transition, no internal event, no invocation to start, no trace, budgets left):
        # the round's charge and count, as its loop has them; anything else runs the loop.
        meter = self.budget
        steps = meter.steps - NODE_COST
        rounds = self.max_rounds
        if (
            QUIET_ROUNDS
            and steps >= 0
            and meter.exhausted is None
            and self.running
            and not self.internal_queue
            and not self.states_to_invoke
            and not self.trace
            and not self.machine.has_eventless
            and len(self.effects) < self.limits.max_effects
            and (rounds is None or rounds > 0)
        ):
            meter.steps = steps
            self.round += 1
        else:
            self.main_event_loop()

    def finalize_and_autoforward(self, event: Event) -> None:
        """Appendix D ``mainEventLoop``: the ``<finalize>`` and ``autoforward`` pass over
        every active state's invocations for an external event."""
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
                    if planner.is_answer_of(event, invoke_id):
                        finished.append(key)
                if inv.autoforward:
                    self.effects.append(
                        fx.Autoforward(
                            invoke_id=invoke_id, state_index=s, event=event, **self.counters()
                        )
                    )
        for key in finished:
            self.pop_invocation(key)

    def main_event_loop(self) -> None:  # noqa: C901 - Appendix D, its hot checks inlined
        """Appendix D ``mainEventLoop``, first half: eventless transitions and internal
        events to quiescence (or the round budget), then the invoke pass."""
        budget = self.max_rounds
        meter = self.budget
        eventless = self.machine.has_eventless
        rounds = 0
        while self.running:
            macrostep_done = False
            while self.running and not macrostep_done:
                meter.steps -= NODE_COST
                if (
                    meter.steps < 0
                    or meter.exhausted is not None
                    or len(self.effects) >= self.limits.max_effects
                    or len(self.internal_queue) > self.limits.max_queue
                ):
                    self.budget_exhausted(meter.exhausted or self.overspent())
                    return
                if budget is not None and rounds >= budget:
                    self.budget_exhausted("rounds")
                    return
                rounds += 1
                self.round += 1
                enabled = self.select_eventless_transitions() if eventless else _NONE
                if not enabled:
                    if not self.internal_queue:
                        macrostep_done = True
                    else:
                        self.replayable = False
                        internal_event = self.queue().popleft()
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
            if self.states_to_invoke:
                self.invoke_pass()
            if self.internal_queue:
                continue
            if self.trace:
                self.effects.append(
                    fx.MacrostepStable(configuration=self.ids(self.order()), **self.counters())
                )
            return
        self.exit_interpreter()

    def overspent(self) -> Reason:
        """Which per-call budget is over (checked at a round boundary)."""
        if self.budget.steps < 0:
            return "steps"
        if len(self.effects) >= self.limits.max_effects:
            return "effects"
        return "internal_events"

    def budget_exhausted(self, reason: Reason) -> None:
        """End the macrostep: announce which budget ran out (the state stays running)."""
        limit = self.max_rounds if reason == "rounds" else self.budget.limit_of(reason)
        self.effects.append(
            fx.BudgetExhausted(
                configuration=self.ids(self.order()),
                budget=limit or 0,
                pending_internal_events=len(self.internal_queue),
                reason=reason,
                **self.counters(),
            )
        )

    def exit_interpreter(self) -> None:
        """Appendix D ``exitInterpreter``: every onexit, invocations cancelled, ``Done``."""
        states = self.states
        configuration = self.ids(self.order())
        donedata: Any = None
        for s in sorted(self.config, reverse=True):
            state = states[s]
            for block in state.onexit:
                self.execute_block(block)
            self.cancel_invocations(state)
            self.thaw_config().discard(s)
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
        """Transitions whose event descriptors match ``name`` (memoized per machine), read
        from the machine's index of its descriptors: a scan of every transition per new
        name made a thousand distinct ``done.state`` events of a wide parallel quadratic."""
        cache = self.machine._cache
        key = ("match", name)
        found = cache.get(key)
        if found is None:
            found = transition_index(self.machine).matching(name)
            if len(name) <= _MEMO_NAME_LENGTH:
                _memoize(cache, key, found, len(found) + len(name))
        return found

    def select_eventless_transitions(self) -> list[TransitionNode]:
        """Appendix D ``selectEventlessTransitions``."""
        if not self.machine.has_eventless:
            return []
        return self._select(None)

    def select_transitions(self, event: Event) -> list[TransitionNode]:
        """Appendix D ``selectTransitions``."""
        name = event.name
        memo = self.machine._cache.get("select")
        if memo is not None:
            # The candidates are remembered per event name too (see ``candidates``).
            chains = memo.get((self.frozen_config(), name))
            if chains is not None:
                return self._first_enabled(chains, True)
        return self._select(self.matching(name), name)

    def candidates(
        self, matching: frozenset[int] | None, name: str | None = None
    ) -> tuple[tuple[TransitionNode, ...], ...]:
        """Per active atomic state (document order), the transitions that could fire.

        Each chain lists, nearest state first and in document order within a state, the
        transitions whose events match (or the eventless ones when ``matching`` is None):
        exactly the candidates Appendix D's ``selectTransitions`` walks before conditions.
        Memoized per (configuration, event set), and per (configuration, event ``name``)
        when one is given; conditions are evaluated by the caller.
        """
        cache = self.machine._cache.setdefault("select", {})
        configuration = self.frozen_config()
        key = (configuration, matching)
        chains = cache.get(key)
        if chains is not None:
            if name is not None and len(name) <= _MEMO_NAME_LENGTH:
                # By count alone: the entry holds the chains and configuration of the one
                # just found, which the room of its own insertion measured.
                if len(cache) >= _SELECT_CACHE_LIMIT:
                    cache.clear()
                cache[(configuration, name)] = chains
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
        size = len(configuration) + sum(map(len, chains))
        if len(cache) >= room(_SELECT_CACHE_LIMIT, size) - 1:
            cache.clear()
        cache[key] = chains
        if name is not None and len(name) <= _MEMO_NAME_LENGTH:
            cache[(configuration, name)] = chains
        return chains

    def _select(
        self, matching: frozenset[int] | None, name: str | None = None
    ) -> list[TransitionNode]:
        """The shared body of both Appendix D selection functions: the first enabled
        transition per atomic state, then ``removeConflictingTransitions``."""
        return self._first_enabled(self.candidates(matching, name), matching is not None)

    def _first_enabled(  # noqa: C901 - one state's guards, inlined: most of a selection
        self, chains: tuple[tuple[TransitionNode, ...], ...], evented: bool
    ) -> list[TransitionNode]:
        enabled: list[TransitionNode] = []
        if len(chains) == 1:
            chain = chains[0]
            if chain[0].cond is None:
                enabled.append(chain[0])  # the first candidate has no condition: it is taken
            elif len(chain) > 1 and type(self.datamodel) is not dict:
                # The first transition whose condition holds, for variables their
                # datamodel keeps (ADR 22): the datamodel evaluates the conditions in turn,
                # in as few calls as it can (``KeptVariables.first_true``); a failing one
                # raises ``error.execution`` and counts as false, as ``guard`` has it.
                # ``_guards_of``, inlined for a chain it knows: once an event.
                memos = self.machine._cache.get(_GUARDS)
                found = None if memos is None else memos[0].get(id(chain))
                guards = (
                    found[1]
                    if found is not None and found[0] is chain
                    else _guards_of(self.machine, chain)
                )
                datamodel: Any = self.datamodel
                end = len(chain)
                start = 0
                self.replayable = False
                while start < end:
                    if not self.charge_guard():
                        # Past the budget no guard is evaluated: each is false (ADR 11).
                        enabled.extend(_first_unconditional(chain, start))
                        break
                    first: tuple[int, Exception | None] = datamodel.first_true(
                        guards, start, self.in_state, self.budget
                    )
                    index, error = first
                    # One call evaluated the guards up to ``index``: the rest of their cost.
                    budget = self.budget
                    # (Nothing taken off when it was one guard: a subtraction of 0 would
                    # still make a new int of the large remaining count.)
                    more = (index + 1 if index < end else end) - start - 1
                    if more:
                        budget.steps -= NODE_COST * more
                    if budget.steps < 0 and budget.exhausted is None:
                        budget.exhausted = "steps"
                    if index >= end:
                        self.line = chain[-1].line
                        break
                    transition = chain[index]
                    self.line = transition.line
                    if error is None:
                        enabled.append(transition)
                        break
                    self.condition_failed(guards[index], error)
                    start = index + 1
            else:
                memo = self.machine._cache.get(_DIRECT_GUARDS)
                known = None if memo is None else memo.get(id(chain))
                if known is None or known[0] is not chain:
                    known = _direct_guards(self.machine, chain)
                direct: DirectEvaluation | None = known[1]
                limit = known[3]
                budget = self.budget
                for transition, evaluator in known[2]:
                    expr = transition.cond
                    if expr is not None:
                        # ``charge_guard``, inlined: past the budget a guard is false.
                        if budget.exhausted is None and budget.steps >= NODE_COST:
                            budget.steps -= NODE_COST
                        elif not self.charge_guard():
                            continue
                        # ``guard``, inlined: the guards of one state are most of a selection.
                        self.line = transition.line
                        self.replayable = False
                        if evaluator is None or direct is None:
                            try:
                                if not expr.evaluate(self.datamodel, self.in_state, budget):
                                    continue
                            except Exception as exc:
                                self.condition_failed(expr, exc)
                                continue
                        else:
                            # ``Expression.evaluate`` without its wrapper (ADR 20): the same
                            # allowance, charge and error.
                            context = self.context
                            if context is None:
                                context = self.context = direct.context(
                                    self.datamodel, self.in_state
                                )
                            allowance = budget.steps
                            if allowance > limit:
                                allowance = limit
                            context.steps = allowance
                            try:
                                value = evaluator(context)
                            except Exception as exc:
                                budget.spend(allowance - context.steps)
                                self.condition_failed(expr, direct.failure(exc))
                                continue
                            # What it spent, taken off only when it is not nothing: each
                            # arithmetic on the large remaining count makes a new int.
                            spent = allowance - context.steps
                            if spent:
                                steps = budget.steps = budget.steps - spent
                                if steps < 0 and budget.exhausted is None:
                                    budget.exhausted = "steps"
                            if not value:
                                continue
                    enabled.append(transition)
                    break
        else:
            chosen: set[int] = set()
            for chain in chains:
                for transition in chain:
                    if transition.cond is None or self.guard(transition):
                        if transition.index not in chosen:
                            chosen.add(transition.index)
                            enabled.append(transition)
                        break
            if len(enabled) > 1:
                enabled = self.remove_conflicting_transitions(enabled)
        if self.trace and (enabled or evented):
            self.effects.append(
                fx.TransitionsSelected(t_indexes=tuple(t.index for t in enabled), **self.counters())
            )
        return enabled

    def guard(self, transition: TransitionNode) -> bool:
        """A transition's ``cond``, with errors located at the transition."""
        self.line = transition.line
        # ``condition``, inlined: one guard per candidate transition per event.
        expr = transition.cond
        if expr is None:
            return True
        if not self.charge_guard():
            return False  # past the budget a guard is not evaluated: it is false (ADR 11)
        self.replayable = False
        try:
            return bool(expr.evaluate(self.datamodel, self.in_state, self.budget))
        except Exception as exc:
            return self.condition_failed(expr, exc)

    def remove_conflicting_transitions(self, enabled: list[TransitionNode]) -> list[TransitionNode]:
        """Appendix D ``removeConflictingTransitions``, in near-linear time.

        A transition's exit set is the active part of its domain's subtree, and subtrees
        are nested or disjoint, so two non-empty exit sets intersect exactly when one
        domain is an ancestor-or-self of the other. The kept transitions have pairwise
        disjoint exit sets, hence distinct domains: the ones ``t1`` conflicts with are
        found by looking up its domain's ancestors and the kept domains inside its
        subtree, not by intersecting sets pairwise (cubic with a wide ``<parallel>``).
        """
        states = self.states
        is_descendant = self.machine.is_descendant
        filtered: dict[int, TransitionNode] = {}  # insertion-ordered, O(1) removal
        by_domain: dict[int, TransitionNode] = {}
        domains: list[int] = []  # the keys of by_domain, ascending
        for t1 in enabled:
            d1 = self.exit_domain(t1)
            if d1 is None:  # an empty exit set conflicts with nothing
                filtered[t1.index] = t1
                continue
            conflicts = [by_domain[anc] for anc in (d1, *states[d1].ancestors) if anc in by_domain]
            inside = domains[bisect_right(domains, d1) : bisect_right(domains, states[d1].last)]
            conflicts.extend(by_domain[d] for d in inside)
            if any(not is_descendant(t1.source, t2.source) for t2 in conflicts):
                continue  # t1 is preempted
            for t2 in conflicts:
                del filtered[t2.index]
                d2 = self.exit_domain(t2)
                assert d2 is not None  # noqa: S101 - t2 conflicts, so it exits states: a domain
                del by_domain[d2]
                domains.pop(bisect_left(domains, d2))
            filtered[t1.index] = t1
            by_domain[d1] = t1
            insort(domains, d1)
        return list(filtered.values())

    def exit_domain(self, t: TransitionNode) -> int | None:
        """The domain whose active descendants ``t`` exits, or None if it exits nothing."""
        if not t.targets:
            return None
        domain = self.get_transition_domain(t)
        if domain is None:
            return None
        order = self.order()
        start = bisect_right(order, domain)
        if start == len(order) or order[start] > self.states[domain].last:
            return None
        return domain

    # -- microstep -----------------------------------------------------------------------

    def do_microstep(self, enabled: list[TransitionNode]) -> None:  # noqa: C901 - inlined
        """Appendix D ``microstep``.

        A microstep of one transition with a plan (``plan``) follows it: exactly what
        ``exitStates``, ``executeTransitionContent`` and ``enterStates`` do then. The
        configuration after each state exited or entered is the plan's own set (content
        cannot change it), so nothing is copied or changed in place."""
        if len(enabled) == 1 and not self.trace:
            # ``plan``, inlined: once per microstep.
            t = enabled[0]
            configuration = self._frozen
            if configuration is None:
                configuration = self.frozen_config()
            plan = self.machine._cache.get(("plan", configuration, t.index), _UNPLANNED)
            if plan is _UNPLANNED:
                plan = self.plan(t)
            if plan is not None:
                if self.states_to_invoke:
                    to_invoke = self.to_invoke()
                    for s, _, _ in plan.exits:
                        to_invoke.discard(s)
                # (``if blocks``: iterating even an empty tuple makes an iterator object.)
                for _, blocks, after in plan.exits:
                    if blocks:
                        for block in blocks:
                            self.execute_block(block)
                    if after is not None:
                        self.config = self._frozen = after
                        self._order = None
                content = t.content
                if content:  # ``execute_block``, inlined
                    self.replayable = False
                    try:
                        program = plan.content
                        if program is None:
                            self.execute_nodes(content)
                        else:
                            # ``execute_nodes`` of a block one run covers: the run, then
                            # the nodes it stopped before (budgets, a guarded call).
                            done = (
                                self.run_direct(program)
                                if type(program) is DirectRun
                                else self.run_kept(program)
                            )
                            if done < len(content):
                                self.execute_nodes(content, done)
                    except BlockAbort:
                        pass
                    self.node = None
                if self.replayable:
                    self.entered_now = self.entered_now | plan.entered
                for _, blocks, after in plan.entries:
                    if after is not None:
                        self.config = self._frozen = after
                        self._order = None
                    if blocks:
                        for block in blocks:
                            self.execute_block(block)
                if not plan.entered <= self.entered:
                    self.entered = self.entered | plan.entered
                return
        # A transition to a history state has a domain that depends on the history recorded
        # (getEffectiveTargetStates), which exitStates may record: Appendix D read
        # literally then enters under another domain than it exited, and a deep history of
        # a parallel state, targeted from inside it, would leave that parallel state out of
        # the configuration. Exit and entry use the domains worked out once, before the exit.
        domains = (
            None
            if all(t.static for t in enabled)
            else [t.domain if t.static else self.get_transition_domain(t) for t in enabled]
        )
        self.exit_states(enabled, domains)
        self.execute_transition_content(enabled)
        self.enter_states(enabled, domains)

    def plan(self, t: TransitionNode) -> _Plan | None:
        """The plan of a microstep taking ``t`` alone from this configuration, when one can
        stand for ``exitStates``, ``executeTransitionContent`` and ``enterStates`` (a static
        transition that records and follows no history and exits or enters no state with
        invocations, no final state and no state with data bound late); else None."""
        cache = self.machine._cache
        configuration = self.frozen_config()
        key = ("plan", configuration, t.index)
        plan = cache.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self.make_plan(t)
            _memoize(cache, key, plan, 2 * len(configuration))  # its configurations, at most
        return plan  # type: ignore[no-any-return]

    def make_plan(self, t: TransitionNode) -> _Plan | None:
        """The plan ``plan`` remembers, worked out from this configuration (None when the
        microstep needs the general functions)."""
        machine = self.machine
        if not t.static or machine.has_invokes or machine.late_binding:
            return None
        states = self.states
        to_exit = self.compute_exit_set([t])
        to_exit.sort(reverse=True)
        to_enter, default_entry, default_history = self.compute_entry_set([t])
        if default_history or any(states[s].history for s in to_exit):
            return None
        planned = self.plan_steps(to_exit, to_enter, default_entry)
        if planned is None:
            return None
        exits, entries = planned
        # The configuration the microstep ends in is the machine's one such set (``freeze``
        # then finds it is where a self-transition started without comparing).
        steps = entries or exits
        if steps:
            s, blocks, end = steps[-1]
            assert end is not None  # noqa: S101 - the last step's configuration is kept
            steps[-1] = (s, blocks, shared(machine, end))
        # The transition's content, when one run covers it: a direct run, or one call of a
        # datamodel keeping its variables (never in trace mode: plans are not followed).
        program: DirectRun | KeptRun | None = None
        content = t.content
        if content:
            if variables_of(machine) is None:
                program = compiled(machine, content)[2]
                if program is not None and len(program.ops) < len(content):
                    program = None
            else:
                # (Through the module: a test runs every node alone by replacing it.)
                program = _content.kept_runs(machine, content)[0]
                if program is not None and len(program.nodes) < len(content):
                    program = None
        return _Plan(tuple(exits), tuple(entries), frozenset(to_enter), program)

    def plan_steps(
        self, to_exit: list[int], to_enter: list[int], default_entry: set[int]
    ) -> tuple[list[_Step], list[_Step]] | None:
        """A plan's exits and entries (``make_plan``), or None when one enters a final state
        or its configurations would keep more than ``_PLAN_MEMBERS`` states.

        A configuration between two steps is kept only where content sees it: while the
        next exited state's ``<onexit>`` runs, while an entered state's blocks run, and
        after the last exit and the last entry. One configuration per step made the plan
        of a wide parallel quadratic in time and memory."""
        states = self.states
        config = set(self.config)
        kept = 0
        exits: list[_Step] = []
        for n, s in enumerate(to_exit):
            config.discard(s)
            after = None
            if n + 1 == len(to_exit) or any(states[to_exit[n + 1]].onexit):
                kept += len(config)
                if kept > _PLAN_MEMBERS:
                    return None
                after = frozenset(config)
            exits.append((s, states[s].onexit, after))
        entries: list[_Step] = []
        for n, s in enumerate(to_enter):
            state = states[s]
            if state.kind == "final":
                return None
            blocks = state.onentry
            if s in default_entry and state.initial_transition is not None:
                content = self.transitions[state.initial_transition].content
                if content:  # (an empty block runs nothing: ``execute_block``)
                    blocks = (*blocks, content)
            config.add(s)
            after = None
            if any(blocks) or n + 1 == len(to_enter):
                kept += len(config)
                if kept > _PLAN_MEMBERS:
                    return None
                after = frozenset(config)
            entries.append((s, blocks, after))
        return exits, entries

    def execute_transition_content(self, enabled: list[TransitionNode]) -> None:
        """Appendix D ``executeTransitionContent``."""
        for t in enabled:
            self.execute_block(t.content)

    def compute_exit_set(
        self, transitions: list[TransitionNode], domains: list[int | None] | None = None
    ) -> list[int]:
        """Appendix D ``computeExitSet``, in document order.

        The active descendants of a domain are a contiguous run of the sorted
        configuration, found by bisection.
        """
        order = self.order()
        states = self.states
        if len(transitions) == 1:
            # The common case: one run of the sorted configuration, already in order.
            t = transitions[0]
            if not t.targets:
                return []
            if t.static:
                domain = t.domain
            else:
                domain = domains[0] if domains is not None else self.get_transition_domain(t)
            if domain is None:
                return []
            return order[bisect_right(order, domain) : bisect_right(order, states[domain].last)]
        found: set[int] = set()
        for n, t in enumerate(transitions):
            if not t.targets:
                continue
            domain = domains[n] if domains is not None else self.get_transition_domain(t)
            if domain is None:
                continue
            found.update(
                order[bisect_right(order, domain) : bisect_right(order, states[domain].last)]
            )
        return sorted(found)

    def exit_states(
        self, enabled: list[TransitionNode], domains: list[int | None] | None = None
    ) -> None:
        """Appendix D ``exitStates`` (history recorded, onexit run, invocations cancelled)."""
        states = self.states
        to_exit = self.compute_exit_set(enabled, domains)
        if not to_exit:
            return
        if self.states_to_invoke:
            to_invoke = self.to_invoke()
            for s in to_exit:
                to_invoke.discard(s)
        to_exit.sort(reverse=True)
        recorded: dict[int, tuple[int, ...]] | None = None
        for s in to_exit:
            state = states[s]
            if state.history:
                self.replayable = False
                if recorded is None:
                    recorded = dict(self.history)  # one copy: the old map is the state's
                self.record_history(state, recorded)
        if recorded is not None:
            self.history = recorded
        config = self.thaw_config()
        for s in to_exit:
            state = states[s]
            for block in state.onexit:
                self.execute_block(block)
            if state.invokes:
                self.cancel_invocations(state)
            config.discard(s)
            self._order = self._frozen = None
        if self.trace:
            self.effects.append(fx.StatesExited(states=self.ids(to_exit), **self.counters()))

    def record_history(self, state: StateNode, recorded: dict[int, tuple[int, ...]]) -> None:
        """Appendix D ``exitStates``' record of each history state of ``state`` into
        ``recorded``: its active children (shallow) or active atomic descendants (deep),
        in document order. Read from the state's own children and the slice of the sorted
        configuration under it, not from the whole configuration per history state, which
        made leaving a wide parallel of regions with history quadratic."""
        states = self.states
        shallow: tuple[int, ...] | None = None
        deep: tuple[int, ...] | None = None
        for h in state.history:
            if states[h].history_deep:
                if deep is None:
                    order = self.order()
                    start = bisect_right(order, state.index)
                    below = order[start : bisect_right(order, state.last)]
                    deep = tuple(x for x in below if states[x].atomic)
                recorded[h] = deep
            else:
                if shallow is None:
                    config = self.config
                    shallow = tuple(c for c in state.children if c in config)
                recorded[h] = shallow

    def cancel_invocations(self, state: StateNode) -> None:
        """Appendix D ``exitStates``: ``cancelInvoke`` for each invocation of ``state``."""
        for inv in state.invokes:
            invoke_id = self.pop_invocation((state.index, inv.index))
            if invoke_id is not None:
                self.effects.append(
                    fx.CancelInvoke(invoke_id=invoke_id, state_index=state.index, **self.counters())
                )

    def enter_states(  # noqa: C901 - Appendix D
        self, enabled: list[TransitionNode], domains: list[int | None] | None = None
    ) -> None:
        """Appendix D ``enterStates``; ``domains``: each transition's domain as its exit
        computed it (for a transition to a history state; see ``do_microstep``)."""
        states = self.states
        machine = self.machine
        to_enter, default_entry, default_history = self.compute_entry_set(enabled, domains)
        has_invokes = machine.has_invokes
        if self.replayable:
            self.entered_now = self.entered_now.union(to_enter)
        config = self.thaw_config()
        to_invoke = self.to_invoke() if has_invokes else None
        entered = self.entered  # as before this microstep: ``s not in entered`` is a first entry
        if not entered.issuperset(to_enter):
            self.entered = entered.union(to_enter)  # one union, not a copy per state
        finals: dict[int, int] = {}  # ``_regions_final``'s progress, per parallel
        for s in to_enter:
            state = states[s]
            config.add(s)
            self._order = self._frozen = None
            if to_invoke is not None:
                to_invoke.add(s)
            if s not in entered and machine.late_binding and s != 0 and state.data:
                self.replayable = False
                for d in state.data:
                    self.initialize_data(machine.data[d])
            for block in state.onentry:
                self.execute_block(block)
            if s in default_entry and state.initial_transition is not None:
                self.execute_block(self.transitions[state.initial_transition].content)
            if default_history:
                history_content = default_history.get(s)
                if history_content:
                    self.execute_block(history_content)
            if state.kind == "final":
                self.replayable = False
                if state.parent == 0:
                    self.running = False
                else:
                    parent = states[state.parent]
                    self.queue().append(
                        Event(
                            name=f"done.state.{parent.id}",
                            type="platform",
                            data=self.evaluate_donedata(state),
                        )
                    )
                    if parent.parent > 0:
                        grandparent = states[parent.parent]
                        if grandparent.kind == "parallel" and self._regions_final(
                            grandparent, finals
                        ):
                            self.queue().append(
                                Event(name=f"done.state.{grandparent.id}", type="platform")
                            )
        if self.trace:
            self.effects.append(fx.StatesEntered(states=self.ids(to_enter), **self.counters()))

    def _regions_final(self, parallel: StateNode, known: dict[int, int]) -> bool:
        """Whether every region of ``parallel`` is in a final state (Appendix D
        ``enterStates``' test before ``done.state`` of a parallel), the scan resumed where
        the last look at ``parallel`` in this ``enter_states`` stopped (``known``: how many
        leading regions were found final). Entering states only adds to the configuration,
        so a region found final stays final: one pass a microstep, where scanning every
        region at each final state entered made finishing a wide parallel quadratic."""
        children = parallel.children
        done = known.get(parallel.index, 0)
        while done < len(children) and self.is_in_final_state(children[done]):
            done += 1
        known[parallel.index] = done
        return done == len(children)

    def compute_entry_set(
        self, transitions: list[TransitionNode], domains: list[int | None] | None = None
    ) -> tuple[list[int], set[int], dict[int, tuple[ContentNode, ...]]]:
        """Appendix D ``computeEntrySet``; memoized when no history state is involved.
        ``domains``, when given, are the transitions' domains as their exit computed them
        (``do_microstep``); a static transition's domain never changes."""
        if len(transitions) == 1:
            cacheable = transitions[0].static
            key: Any = ("entry", transitions[0].index)
        else:
            cacheable = all(t.static for t in transitions)
            key = ("entry", tuple(t.index for t in transitions))
        if cacheable:
            cached = self.machine._cache.get(key)
            if cached is not None:
                return cached  # type: ignore[no-any-return]
        entry = _EntrySet(self.states)
        for n, t in enumerate(transitions):
            for s in t.targets:
                self.add_descendant_states_to_enter(s, entry)
            if t.static:
                ancestor = t.domain
            elif domains is not None:
                ancestor = domains[n]
            else:
                ancestor = self.get_transition_domain(t)
            for s in self.get_effective_target_states(t):
                self.add_ancestor_states_to_enter(s, ancestor, entry)
        result = (sorted(entry.states), entry.default_entry, entry.default_history)
        if entry.touched_history:
            self.replayable = False
        elif cacheable:
            _memoize(self.machine._cache, key, result, len(result[0]) + len(transitions))
        return result

    def add_descendant_states_to_enter(self, s: int, entry: _EntrySet) -> None:
        """Appendix D ``addDescendantStatesToEnter``."""
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
                assert state.initial_transition is not None  # noqa: S101 - compiled history: a default
                default = self.transitions[state.initial_transition]
                entry.default_history[state.parent] = default.content
                for r in default.targets:
                    self.add_descendant_states_to_enter(r, entry)
                for r in default.targets:
                    self.add_ancestor_states_to_enter(r, state.parent, entry)
            return
        entry.add(s)
        if state.compound:
            entry.default_entry.add(s)
            assert state.initial_transition is not None  # noqa: S101 - compiled compound
            initial = self.transitions[state.initial_transition]
            for r in initial.targets:
                self.add_descendant_states_to_enter(r, entry)
            for r in initial.targets:
                self.add_ancestor_states_to_enter(r, s, entry)
        elif state.kind == "parallel":
            self.enter_regions(state, entry)

    def add_ancestor_states_to_enter(self, s: int, ancestor: int | None, entry: _EntrySet) -> None:
        """Appendix D ``addAncestorStatesToEnter``."""
        states = self.states
        for anc in self.get_proper_ancestors(s, ancestor):
            entry.add(anc)
            if states[anc].kind == "parallel":
                self.enter_regions(states[anc], entry)

    def enter_regions(self, parallel: StateNode, entry: _EntrySet) -> None:
        """The loop over a ``<parallel>``'s regions in Appendix D's
        ``addDescendantStatesToEnter`` and ``addAncestorStatesToEnter``: a region with no
        state to enter yet is entered by default. Once per parallel and entry set: after
        it every region has a state to enter (``reached`` only grows), so the loop again
        would do nothing; a deep history of a wide parallel otherwise ran it once per
        recorded state."""
        if parallel.index in entry.filled:
            return
        entry.filled.add(parallel.index)
        for child in parallel.children:
            if child not in entry.reached:
                self.add_descendant_states_to_enter(child, entry)

    def get_proper_ancestors(self, s: int, ancestor: int | None) -> list[int]:
        """Appendix D ``getProperAncestors``: proper ancestors of ``s`` up to (excluding)
        ``ancestor``; never the root."""
        found: list[int] = []
        for anc in self.states[s].ancestors:
            if anc == ancestor or anc == 0:
                break
            found.append(anc)
        return found

    def is_in_final_state(self, s: int) -> bool:
        """Appendix D ``isInFinalState``."""
        state = self.states[s]
        if state.compound:
            return any(self.states[c].kind == "final" and c in self.config for c in state.children)
        if state.kind == "parallel":
            return all(self.is_in_final_state(c) for c in state.children)
        return False

    def get_transition_domain(self, t: TransitionNode) -> int | None:
        """Appendix D ``getTransitionDomain`` (precomputed unless a target is a history)."""
        if t.static:
            return t.domain
        return transition_domain(
            self.states, t.source, self.get_effective_target_states(t), t.internal
        )

    def get_effective_target_states(self, t: TransitionNode) -> list[int]:
        """Appendix D ``getEffectiveTargetStates``: its ordered set is a dict's keys (a
        list's membership test made a deep history of many regions quadratic)."""
        targets: dict[int, None] = {}
        for s in t.targets:
            if self.states[s].kind == "history":
                recorded = self.history.get(s)
                if recorded:
                    extra: Iterable[int] = recorded
                else:
                    default = self.states[s].initial_transition
                    assert default is not None  # noqa: S101 - compiled history: a default
                    extra = self.get_effective_target_states(self.transitions[default])
                targets.update(dict.fromkeys(extra))
            else:
                targets[s] = None
        return list(targets)

    # -- invocations ---------------------------------------------------------------------

    def invoke_pass(self) -> None:
        """Appendix D ``mainEventLoop``: invoke every state entered in the macrostep."""
        if not self.states_to_invoke:
            return
        if not self.machine.has_invokes:
            self.states_to_invoke = ()
            return
        pending = sorted(self.states_to_invoke)
        self.states_to_invoke = ()
        for s in pending:
            if s not in self.config:
                continue
            for inv in self.states[s].invokes:
                self.start_invocation(inv)

    def start_invocation(self, inv: InvokeNode) -> None:
        """Appendix D ``invoke``: evaluate the ``<invoke>`` and emit the ``Invoke`` effect."""
        state = self.states[inv.state]
        self.line = inv.line
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
                    "error.execution", f"invoke type must be a string, not {brief(invoke_type)}"
                )
                return
            src = self.evaluate(inv.srcexpr) if inv.srcexpr is not None else inv.src
            if src is not None and not isinstance(src, str):
                self.raise_error(
                    "error.execution", f"invoke src must be a string, not {brief(src)}"
                )
                return
            params = self.ship(self.event_data_fields(inv.namelist, inv.params))
            content = None
            if inv.content is not None:
                content = self.ship(self.content_value(inv.content))
        except BlockAbort:
            return
        if invoke_type not in planner.SCXML_INVOKE_TYPES and (
            self.invoke_types is None or invoke_type not in self.invoke_types
        ):
            self.raise_error(
                "error.execution", f"invoke type {brief(invoke_type)} is not registered"
            )
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


_GUARDS = "guards"
"""The key, in a machine's ``_cache``, of each candidate chain's conditions: by the chain's
identity (reset with the select memo's limit), and the tuples themselves by the chain's
transitions (bounded by the chart: a state's chain is the transitions whose longest
matching event descriptor, or none, is the same)."""


def _first_unconditional(
    chain: tuple[TransitionNode, ...], start: int
) -> tuple[TransitionNode, ...]:
    """The first transition of ``chain`` from ``start`` on without a condition, if any."""
    for transition in chain[start:]:
        if transition.cond is None:
            return (transition,)
    return ()


def _guards_of(machine: Machine, chain: tuple[TransitionNode, ...]) -> tuple[Any, ...]:
    """The conditions of ``chain``'s transitions (None for none), one tuple per distinct
    chain for the machine's lifetime: a datamodel prepares each once (``first_true``)."""
    memos: tuple[dict[int, Any], dict[tuple[int, ...], Any]] | None = machine._cache.get(_GUARDS)
    if memos is None:
        memos = machine._cache[_GUARDS] = ({}, {})
    by_id, by_chain = memos
    found = by_id.get(id(chain))
    if found is not None and found[0] is chain:
        return found[1]  # type: ignore[no-any-return]
    key = tuple(t.index for t in chain)
    guards = by_chain.get(key)
    if guards is None:
        guards = by_chain[key] = tuple(t.cond for t in chain)
    if len(by_id) >= _SELECT_CACHE_LIMIT:
        by_id.clear()
    by_id[id(chain)] = (chain, guards)
    return guards


_resume: Final = Interpreter.resume
"""``Interpreter.resume``, looked up once: reading a classmethod off its class makes a
bound method at every call of the core."""

_system_variable: Final = Event.as_system_variable
"""``Event.as_system_variable`` as a function: an event keeps its fields in its own dict,
where CPython finds none of its methods by a specialised lookup."""

_DIRECT_GUARDS = "direct guards"
"""The key, in a machine's ``_cache``, of each candidate chain's transitions with their
conditions' code for ``DirectEvaluation`` (by the chain's identity, reset with the select
memo's limit)."""

type DirectGuards = tuple[
    tuple[TransitionNode, ...],
    DirectEvaluation | None,
    tuple[tuple[TransitionNode, DirectEvaluator | None], ...],
    int,
]


def _direct_guards(machine: Machine, chain: tuple[TransitionNode, ...]) -> DirectGuards:
    """``chain``, its datamodel's ``DirectEvaluation`` (None: none), each transition with
    its condition's code (None: none, or evaluated through ``evaluate``), and the step
    limit of one evaluation."""
    memo: dict[int, DirectGuards] = machine._cache.setdefault(_DIRECT_GUARDS, {})
    # One condition: its ``evaluate`` costs less than making the run's context.
    direct = direct_of(machine) if sum(t.cond is not None for t in chain) > 1 else None
    pairs = tuple(
        (t, None if direct is None or t.cond is None else direct.evaluator(t.cond)) for t in chain
    )
    found: DirectGuards = (chain, direct, pairs, 0 if direct is None else direct.step_limit)
    if len(memo) >= _SELECT_CACHE_LIMIT:
        memo.clear()
    memo[id(chain)] = found
    return found


def _memoize(cache: dict[Any, Any], key: Any, value: Any, size: int) -> None:
    """Remember ``value`` (of ``size`` members) in a machine's memo, which is reset when it
    grows past its room (events and transition sets come from outside: the memo must not
    grow with them)."""
    if len(cache) >= room(_MEMO_LIMIT, size):
        # The named entries are memos of their own, each bounded by its owner.
        kept = {name: memo for name, memo in cache.items() if isinstance(name, str)}
        cache.clear()
        cache.update(kept)
    cache[key] = value


_UNPLANNED: Any = object()


_Step = tuple[int, tuple[tuple[ContentNode, ...], ...], frozenset[int] | None]
"""A state a plan exits or enters, its blocks, and the configuration once it is out or in
(None where no content sees that configuration: the next step's replaces it)."""

_PLAN_MEMBERS: Final = 1024
"""The most states a plan keeps in its configurations, all steps together."""


class _Plan:
    """What a microstep of one transition from one configuration does (``Interpreter.plan``):
    the states it exits, in exit order, with their ``<onexit>`` blocks; the states it
    enters, in entry order, with their ``<onentry>`` blocks (and the initial transition's
    content of a state entered by default); each with the configuration once that state is
    out or in; the states it enters, as a set; and the transition's content as one run when
    one covers it."""

    __slots__ = ("content", "entered", "entries", "exits")

    def __init__(
        self,
        exits: tuple[_Step, ...],
        entries: tuple[_Step, ...],
        entered: frozenset[int],
        content: DirectRun | KeptRun | None,
    ) -> None:
        self.exits = exits
        self.entries = entries
        self.entered = entered
        self.content = content
        """The transition's content as one run (``run_direct`` or ``run_kept``; None:
        ``execute_nodes`` runs it)."""


class _EntrySet:
    __slots__ = (
        "default_entry",
        "default_history",
        "filled",
        "reached",
        "states",
        "touched_history",
        "tree",
    )

    def __init__(self, tree: tuple[StateNode, ...]) -> None:
        self.tree = tree
        self.states: set[int] = set()
        self.reached: set[int] = set()
        """Every state with a state to enter at or below it: a ``<parallel>``'s region
        needs its default entry exactly when it is not here (one lookup, where scanning
        the states to enter per region made entering a wide parallel quadratic)."""
        self.filled: set[int] = set()
        """The parallels whose regions were given their entries (``enter_regions``)."""
        self.default_entry: set[int] = set()
        self.default_history: dict[int, tuple[ContentNode, ...]] = {}
        self.touched_history = False

    def add(self, s: int) -> None:
        """Enter ``s``, and mark it and its ancestors reached (up to one marked before:
        its ancestors are then marked too)."""
        self.states.add(s)
        reached = self.reached
        if s in reached:
            return
        reached.add(s)
        for ancestor in self.tree[s].ancestors:
            if ancestor in reached:
                return
            reached.add(ancestor)
