"""The variables of an ECMAScript chart instance, as the core sees them (ADR 22).

The core works on one mapping of variables per call (``Run.datamodel``). For an ECMAScript
chart that mapping is a :class:`Variables`: the values themselves live in the instance's
engine for the whole call and, while nothing else asks for them, from one call to the next.
The core reads and writes through the store's own operations (``assign``, ``bind``,
``foreach_*``) so that a value never makes a round trip through Python: object identity
holds, and a write is admitted (the datamodel cap) before it happens.

A call ends with ``freeze``: the state's ``datamodel``, a :class:`~.view.VariablesView`
(plain values to read, the stored form positions keep), and a :class:`Link` back to the
instance. The next call that resumes that very state continues in the same instance; any
other (an older state, a state read from a position) gets an instance of its own, built
from the stored form.

The variables are written out of the engine only when something asks for a state's stored
form (a position, a read): a :class:`Generation` stands for them until then. The engine
logs what each call's writes replace, so the state a call resumed can still be written out
after it; when the next call starts, that older state is written out if anything still
holds it, and forgotten otherwise.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Container, Iterator, Mapping, MutableMapping
from operator import itemgetter
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Final

from statifier._slots import bare
from statifier.datamodel.base import (
    EvaluationError,
    Expression,
    InState,
    Value,
    Writable,
    WriteResult,
    WritesFailed,
    stored_variables,
)
from statifier.datamodel.ecmascript._instance import BOX, Instance, JSFailure, setup_of
from statifier.datamodel.ecmascript.charges import (
    CALL_COST,
    NO_LIMIT,
    charge,
    charge_calls,
    charge_time,
)
from statifier.datamodel.ecmascript.limits import MAX_HOST_CALLS
from statifier.datamodel.ecmascript.plain import HEAP as _HEAP
from statifier.datamodel.ecmascript.plain import PlainDecoder
from statifier.datamodel.ecmascript.view import SYSTEM_VARIABLES, VariablesView, engine_view
from statifier.datamodel.host import HostFunctionError
from statifier.values import ValueRefused, json_text

if TYPE_CHECKING:
    from statifier.budget import Budget
    from statifier.chart.model import Machine
    from statifier.core.state import MachineState
    from statifier.datamodel.ecmascript.compiled import Compiled

__all__ = ["SYSTEM_VARIABLES", "Link", "Variables", "new_variables"]

_SYSTEM: Final = frozenset(SYSTEM_VARIABLES)


class Generation:
    """The variables of one state while only its instance's engine holds them: written
    out (and kept) the first time something asks for them.

    The engine can write out the state the last call made (the instance's ``generation``)
    and the one that call resumed; an older one was written out when the instance moved
    past it, if anything held it still (``Instance.previous``)."""

    __slots__ = ("__weakref__", "instance", "number", "stored")

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.number = instance.generation
        self.stored: dict[str, Value] | None = None

    def __call__(self) -> dict[str, Value]:
        """The stored form of the variables (``#objects`` included)."""
        stored = self.stored
        if stored is None:
            instance = self.instance
            try:
                if instance.pending is not None and instance.generation == self.number:
                    flush(instance)  # the last call's event, still waiting for the engine
                if instance.generation == self.number or (
                    instance.starting and instance.generation == self.number + 1
                ):  # the engine holds these very variables (a call may have begun)
                    stored = written_out(instance)
                elif instance.generation == self.number + 1:
                    stored = written_before(instance)
                else:  # pragma: no cover - written out when the instance moved past it
                    raise RuntimeError("the variables of this state were not kept")
            except JSFailure as failure:
                if failure.limit:
                    raise MemoryError(failure.message) from None
                raise failure.error() from None
            self.stored = stored
        return stored


def flush(instance: Instance) -> None:
    """Give the engine the event a call set (it waits for the call's next use of the engine:
    one call fewer an event), starting the engine's log if the call had not yet."""
    pending = instance.pending
    if pending is not None:
        instance.pending = None
        starting = instance.starting
        instance.starting = False
        try:
            instance.api.set_event(starting, *pending)
        except Exception as exc:
            raise instance.context.failure(exc).error() from None


def written_out(instance: Instance) -> dict[str, Value]:
    """The stored form of the variables the engine holds now (a new dict whenever they
    changed: states share no dict). The engine sends what changed since the version the
    instance last read."""
    answer = instance.context.call_long(instance.api.fetch, instance.version)
    if answer is not None:
        news = json.loads(_text(answer))
        if instance.version < 0:
            stored = news["set"]
        else:
            stored = {**instance.stored, **news["set"]}
            for name in news["gone"]:
                stored.pop(name, None)
        instance.stored = stored
        instance.version = news["version"]
    return instance.stored


def written_before(instance: Instance) -> dict[str, Value]:
    """The stored form of the variables as they were when the current (or last) call
    started (the engine puts back what the call replaced, for a moment)."""
    context = instance.context
    # Putting values back takes memory: the heap may be full after a call that failed.
    with context.roomy():
        text = context.call(instance.api.previous_stored)
    if text is None:  # pragma: no cover - every call logs from its start
        raise RuntimeError("the engine kept no state before this call")
    stored: dict[str, Value] = json.loads(_text(text))
    return stored


class Link:
    """Ties a state's stored variables to the instance that still holds them live.

    Only the instance's newest link can be taken (``new_variables``); taking it moves the
    instance on, so every older link (an older state, a copy of this one) builds an
    instance of its own.
    """

    __slots__ = ("generation", "instance")

    def __init__(self, instance: Instance) -> None:
        self.instance: Instance | None = instance
        self.generation = instance.generation


_new: Final = object.__new__
_BARE_GENERATION: Final = bare(Generation)
_BARE_LINK: Final = bare(Link)


def new_variables(machine: Machine, state: MachineState | None) -> Variables:
    """The variables of a call that starts ``machine`` (``state`` None) or resumes ``state``."""
    if state is None:
        return Variables(Instance(setup_of(machine), NO_LIMIT), set())
    # The cap is the state's (the engine holds to it from the first call on).
    cap = NO_LIMIT if state.limits.datamodel_bytes is None else state.limits.datamodel_bytes
    datamodel = state.datamodel
    carried = state._datamodel_bound
    if (
        carried is not None
        and carried[0] is datamodel
        and isinstance(carried[1], Link)
        # (By its exact type: ``isinstance`` of a ``Mapping`` goes through the ABC's check,
        # about 1,500 instructions. ``freeze`` makes exactly these; anything else is built
        # from its stored form, below.)
        and type(datamodel) is VariablesView
    ):
        # The link is taken (once: see ``Link``), inlined here: this runs once an event.
        link = carried[1]
        instance = link.instance
        link.instance = None
        if instance is not None and instance.generation == link.generation:
            # The state before these (what the last call resumed) is written out first if
            # anything still holds it; the engine logs the new call's writes from here.
            previous = None if instance.previous is None else instance.previous()
            if previous is not None and previous.stored is None:
                previous()
            if instance.pending is not None:
                flush(instance)  # the event of the last call, which used the engine no more
            # The engine starts logging with the call's first write (``Variables._begin``).
            instance.starting = True
            instance.generation += 1
            instance.previous, instance.current = instance.current, None
            # ``Variables(instance, instance.names)`` without the call (not a bare subclass:
            # compiled sources tell the engine's variables by their exact type).
            variables: Variables = _new(Variables)
            variables.instance = instance
            variables.names = instance.names
            variables.failed = False
            # ``sync`` only when the system variables or the cap differ (a replayed step):
            # most steps, the very dict the last call left.
            if datamodel._system is not instance.system or cap != instance.cap:
                variables.sync(datamodel, cap)
            return variables
    variables = Variables(Instance(setup_of(machine), cap), set())
    variables.load(stored_variables(datamodel))
    return variables


class Variables(MutableMapping[str, Value]):
    """One call's variables of an ECMAScript chart (see the module docstring).

    Reading an item gives its value as plain data (``.plain``), which writes the variables
    out first: the core reads only in trace mode. Setting one binds data (never decoded:
    data is never code).
    """

    __slots__ = ("failed", "instance", "names")

    def __init__(self, instance: Instance, names: set[str]) -> None:
        self.instance = instance
        self.names = names
        self.failed = False
        """A failed write could not be put back exactly: the call fails (see ``freeze``)."""

    # -- the mapping ---------------------------------------------------------------------

    def __getitem__(self, name: str) -> Value:
        system = self.instance.system
        if name in system:
            return system[name]
        if name not in self.names:
            raise KeyError(name)
        return self.export(name)

    def __setitem__(self, name: str, value: Value) -> None:
        if name == "_event":
            # ``set_system``'s common case, inlined: the core sets the event every step.
            instance = self.instance
            pending = _event_fields(value)
            if pending is None:
                self.set_system(name, value)
                return
            instance.pending = pending
            instance.system = {**instance.system, name: value}
            return
        if name in _SYSTEM:
            self.set_system(name, value)
            return
        self.bind(name, value, None)

    def __delitem__(self, name: str) -> None:
        raise TypeError("variables of an ECMAScript chart are never deleted by the core")

    def __contains__(self, name: object) -> bool:
        return name in self.names or name in self.instance.system

    def __iter__(self) -> Iterator[str]:
        yield from self.instance.system
        yield from sorted(self.names)

    def __len__(self) -> int:
        return len(self.instance.system) + len(self.names)

    def setdefault(self, name: str, default: Value = None) -> Value:
        """Declare ``name`` (unbound: undefined) unless it exists; ``default`` must be None."""
        if name in self:
            return self[name]
        if default is not None:
            self.bind(name, default, None)
        else:
            self._begin()
            self._call(self.instance.api.declare, name)
            self.names.add(name)
        return default

    # -- stored form ---------------------------------------------------------------------

    def stored(self) -> dict[str, Value]:
        """The stored form of the user variables now (the ``#objects`` entry included)."""
        flush(self.instance)
        return written_out(self.instance)

    def freeze(self) -> tuple[VariablesView, tuple[VariablesView, Link]]:
        """The state's ``datamodel`` and what the state carries to the next call: nothing
        is written out of the engine until something asks (``Generation``).

        Raises ``MemoryError`` (the call fails as a whole, ADR 11) when a failed write
        could not be put back exactly (``_replace_instance``)."""
        if self.failed:
            raise MemoryError("the variables could not be put back after a failed write")
        instance = self.instance
        names = self.names
        # ``Generation(instance)`` and ``Link(instance)`` without their ``__init__``'s
        # calls: once an event.
        generation = _BARE_GENERATION()
        generation.instance = instance
        generation.number = number = instance.generation
        generation.stored = None
        instance.current = weakref.ref(generation)
        datamodel = engine_view(instance.system, frozenset(names), generation)
        instance.names = names
        link = _BARE_LINK()
        link.instance = instance
        link.generation = number
        return datamodel, (datamodel, link)

    def load(self, datamodel: Mapping[str, Value]) -> None:
        """Install a state's stored variables in this (fresh) instance."""
        for name in SYSTEM_VARIABLES:
            if name in datamodel:
                self.set_system(name, datamodel[name])
        flush(self.instance)  # what a variable holds of the event is found in it
        user = {k: v for k, v in datamodel.items() if k not in _SYSTEM}
        try:
            text = json_text(user)
        except (TypeError, ValueError, RecursionError) as exc:
            raise EvaluationError(f"the stored variables are not JSON: {exc}") from None
        instance = self.instance
        instance.context.call_long(instance.api.decode, text)
        self.names = {name for name in user if name != _HEAP}

    def sync(self, datamodel: VariablesView, cap: int) -> None:
        """Bring the system variables up to the state's (a replayed step changes ``_event``)."""
        system = self.instance.system
        wanted = datamodel.system
        # The very dict when the state is the one the last call left (none is ever changed).
        if wanted is not system:
            self._sync_system(system, wanted)
        if cap != self.instance.cap:
            self._call(self.instance.api.set_cap, float(cap))
            self.instance.cap = cap

    def _sync_system(self, system: dict[str, Value], wanted: dict[str, Value]) -> None:
        for name in SYSTEM_VARIABLES:
            value = wanted.get(name)
            if system.get(name, _MISSING) is not value:
                self.set_system(name, value)

    def set_system(self, name: str, value: Value) -> None:
        """Bind a system variable (the core's, read-only for the chart)."""
        instance = self.instance
        if name == "_event":
            fields = _event_fields(value)
            if fields is not None:
                # It goes with the call's next use of the engine (see ``flush``), a
                # condition's most often; an event never used is never sent.
                instance.pending = fields
            else:
                self._begin()
                self._call(instance.api.set_event_json, _dumps(value, "the event"))
        else:
            self._begin()
            text = "null" if value is None else _dumps(value, f"the system variable {name}")
            self._call(instance.api.set_system, name, text)
        # A new dict: states share the one a call leaves (see ``freeze``).
        instance.system = {**instance.system, name: value}

    # -- the core's operations -----------------------------------------------------------

    def bind(self, name: str, value: Value, budget: Budget | None) -> None:
        """Bind the variable ``name`` to data (``<data>``, a seed, a ``<foreach>`` index).

        Raises ``ValueRefused`` when the datamodel cap refuses it (nothing changes)."""
        text = None if value is None else _dumps(value, f"the value of {name!r}")
        self._begin()
        self._meter(budget)
        try:
            self.instance.context.call(self.instance.api.bind, name, text)
        except JSFailure as failure:
            self._abort_after(failure)
            raise _refusal(failure) from None
        self.names.add(name)

    def assign(
        self,
        location: Compiled | None,
        expr: Compiled | None,
        value: Value,
        name: str,
        in_state: InState,
        budget: Budget | None = None,
    ) -> None:
        """Store ``expr``'s value (or the data ``value`` when there is no ``expr``) at
        ``location`` (or in the variable ``name`` when there is no location).

        Raises ``EvaluationError`` (the evaluation failed, or the datamodel cap refused the
        value: a ``ValueRefused`` too); nothing changes then."""
        self._begin()
        instance = self.instance
        # Keyed by identity: compiled sources live as long as their machine, and a key
        # that hashes their fields would cost more than the call.
        key = (id(location), id(expr))
        plan = instance.plans.get(key)
        if plan is None:
            reason = _failing(location, expr)
            if reason is not None:
                raise EvaluationError(reason)
            plan = instance.plans[key] = _WritePlan(instance, location, expr)
        text = None if expr is not None or value is None else _dumps(value, "the value")
        answers = _answers(plan, in_state) if plan.asks else None
        if budget is not None and budget.limits is not instance.limits:
            self._meter(budget)
        call = instance.context.call
        api = instance.api

        def send(guard: bool, pure: bool) -> bool:
            return bool(
                call(
                    api.assign,
                    plan.location,
                    plan.expr,
                    text,
                    name,
                    plan.root,
                    answers,
                    guard,
                    pure,
                    plan.plain,
                    plan.member,
                    plan.target,
                )
            )

        started = charge(budget)
        try:
            try:
                opened = send(plan.guard, plan.pure)
            except JSFailure as failure:
                self._abort_after(failure)
                raise _refusal(failure) from None
            if opened:  # the call is guarded: rerun as one if a host function asks
                self._settle(lambda: send(True, False))
        finally:
            charge_time(budget, started)
        if location is None:
            self.names.add(name)

    call_cost: Final = CALL_COST
    """Steps of the macrostep budget one call into the engine costs at least."""

    def assign_all(  # noqa: C901 - the run's call, inlined: most of an event's engine calls
        self,
        writes: tuple[tuple[Compiled, Compiled | None, Value], ...],
        log: Compiled | None,
        count: int,
        in_state: InState,
        budget: Budget | None = None,
    ) -> tuple[int, Value]:
        """Run the first ``count`` of ``writes`` and (when ``count`` reaches it) ``log`` in
        one call, as ``assign`` and ``evaluate`` would run each unguarded; stop before one
        that needs a guarded call. Returns how many ran and the log's value; a failing one
        raises ``WritesFailed``. Each charges the budget as its own call would."""
        instance = self.instance
        # ``_begin``, inlined (a run is most of an event's calls into the engine).
        if instance.pending is not None:
            flush(instance)
        elif instance.starting:
            instance.starting = False
            self._call(instance.api.next_generation)
        plan = instance.plans.get(id(writes))
        if plan is None:
            plan = instance.plans[id(writes)] = _BlockPlan(instance, writes, log)
        if plan.runnable < count:
            count = plan.runnable
        if not plan.roots <= self.names:
            # Up to a write into no declared variable (the core reports it).
            count = min(count, _first_undeclared(plan.order, self.names))
        if count <= 0:
            return 0, None
        answers = _answers(plan, in_state) if plan.asks else None
        if budget is not None and budget.limits is not instance.limits:
            self._meter(budget)
        if budget is None:
            limit = NO_LIMIT_FLOAT
        else:
            output = budget.output
            limit = float(output) if output > 0 else 0.0
        started = 0 if budget is None else perf_counter_ns()
        ran = count
        try:
            try:
                # ``Context.call`` and ``_timed``, inlined: the limit starts afresh.
                clock = instance.api.clock
                clock.deadline = 0.0
                try:
                    result = instance.api.raw_run_block(plan.handle, count, answers, limit)
                except Exception as exc:
                    raise instance.context.failure(exc) from None
                finally:
                    clock.deadline = 0.0
            except JSFailure as failure:
                ran = self._block_progress() + 1
                self._abort_after(failure)
                error = failure.error() if ran > len(writes) else _refusal(failure)
                raise WritesFailed(ran - 1, error) from None
            # By its exact type (the binding's objects cannot be subclassed): ``isinstance``
            # of another value looks up its ``__class__`` attribute the slow way.
            if type(result) is BOX:
                decoded = _json(result)
                if type(decoded) is dict:  # before a step that needs a guarded call
                    ran = int(decoded["stopped"])
                    return ran, None
                return count, _unboxed(decoded)
            if count > len(writes):
                # ``_scalar``, inlined for what a log's value mostly is: a finite number
                # (integral ones as int), else as it came.
                if type(result) is float and result - result == 0:
                    if result.is_integer() and _NEGATIVE_EXACT < result < _EXACT:
                        return count, int(result)
                    return count, result
                return count, _scalar(result)
            return count, None
        finally:
            if budget is not None and ran:
                charge_calls(budget, started, ran)

    def _block_progress(self) -> int:
        """The step a failed block call was at (its last one when the engine cannot say)."""
        instance = self.instance
        try:
            return int(instance.context.call(instance.api.block_progress))
        except JSFailure:
            return 0

    def evaluate(self, expr: Compiled, in_state: InState, budget: Budget | None = None) -> Value:
        """The value of ``expr`` (a copy: JSON-like data)."""
        instance = self.instance
        pending = instance.pending
        if pending is None and instance.starting:
            self._begin()
        plan = instance.plans.get(id(expr))
        if plan is None:
            plan = instance.plans[id(expr)] = _ReadPlan(instance, expr)
        answers = _answers(plan, in_state) if plan.asks else None
        limit = self._output_limit(budget)
        context = instance.context
        api = instance.api
        started = charge(budget)
        try:
            try:
                if plan.guard:
                    self._begin()
                    result = context.call(api.evaluate, plan.function, answers, limit)
                else:
                    # ``context.call``, inlined: conditions are the most frequent call.
                    try:
                        if pending is None:
                            result = api.read(plan.function, answers, limit, plan.pure)
                        else:  # the event the call set goes with it
                            instance.pending = None
                            starting = instance.starting
                            instance.starting = False
                            result = api.read_event(
                                starting, *pending, plan.function, answers, limit, plan.pure
                            )
                    except Exception as exc:
                        raise context.failure(exc) from None
                    kind = type(result)
                    if kind is bool or kind is str:
                        return result
                    if not isinstance(result, BOX):
                        return _scalar(result)
            except JSFailure as failure:
                self._abort_after(failure)
                raise failure.error() from None
            # A guarded call's value comes as {guarded: value} (nothing, when a host
            # function asked for its answer: then it runs again).
            decoded = _json(result) if isinstance(result, BOX) else {}
            if type(decoded) is not dict:
                return _unboxed(decoded)
            outcome = [decoded]
            self._settle(
                lambda: outcome.append(
                    _boxed(context.call(api.evaluate, plan.function, answers, limit))
                )
            )
            return outcome[-1].get("guarded")
        finally:
            charge_time(budget, started)

    def first_true(  # noqa: C901 - the engine's call, inlined: once an event
        self,
        conditions: tuple[Expression | None, ...],
        start: int,
        in_state: InState,
        budget: Budget | None = None,
    ) -> tuple[int, Exception | None]:
        """The first of ``conditions`` from ``start`` on that holds (None always does), each
        evaluated as ``evaluate`` would and in as few calls into the engine as it can (one,
        while every condition is an unguarded read with a primitive value): its index and
        None, ``len(conditions)`` when none holds, or the index of one that failed and its
        error (those before it did not hold). ``conditions`` is the caller's own tuple, the
        same at every call (prepared once here)."""
        end = len(conditions)
        if start >= end:
            return end, None
        instance = self.instance
        plan = instance.plans.get(id(conditions))
        if plan is None or plan.conditions is not conditions:
            plan = instance.plans[id(conditions)] = _GuardsPlan(instance, conditions)
        while start < end:
            if conditions[start] is None:
                return start, None
            count = end - start
            if budget is not None:
                # Each condition charges CALL_COST before it runs and fails past the budget:
                # the batch holds those whose charge the budget still covers.
                # (Compared by a product of small counts: the quotient of the large
                # remaining count would make a new int every event.)
                steps = budget.steps
                if steps < CALL_COST * count:
                    count = steps // CALL_COST if steps > 0 else 0
            if count > 0:
                # ``_guards``, inlined (once an event): one call evaluating up to ``count``
                # conditions from ``start``.
                pending = instance.pending
                if pending is None and instance.starting:
                    self._begin()
                answers = _answers(plan, in_state) if plan.asks else None
                if budget is None:  # ``_output_limit``, inlined
                    limit = NO_LIMIT_FLOAT
                else:
                    if budget.limits is not instance.limits:
                        self._meter(budget)
                    output = budget.output
                    limit = float(output) if output > 0 else 0.0
                api = instance.api
                started = 0 if budget is None else perf_counter_ns()
                ran = 0
                # ``_timed``, inlined: the call's time limit starts afresh (and ends with it).
                clock = api.clock
                clock.deadline = 0.0
                try:
                    try:
                        try:
                            if pending is None:
                                result = api.raw_read_guards(
                                    plan.handle, start, count, answers, limit
                                )
                            else:  # the event the call set goes with it
                                instance.pending = None
                                starting = instance.starting
                                instance.starting = False
                                result = api.raw_read_guards_event(
                                    starting, *pending, plan.handle, start, count, answers, limit
                                )
                        finally:
                            clock.deadline = 0.0
                    except Exception as exc:
                        failure = instance.context.failure(exc)
                        index = self._guard_progress(start)
                        ran = index - start + 1
                        self._abort_after(failure)
                        return index, failure.error()
                    if type(result) is int:
                        if result < start + count:
                            # A transition without a condition holds without an evaluation.
                            ran = result - start + (conditions[result] is not None)
                            return result, None
                        ran = count
                        start += count
                        continue
                    # Before one that runs alone (below).
                    index = int(_json(result)["stopped"])
                    ran = index - start
                finally:
                    if budget is not None and ran:
                        charge_calls(budget, started, ran)
            else:
                index = start
            # Alone, as the core evaluates it: a guarded read, a value only Python reads, a
            # source that did not compile, or one past the budget.
            condition: Any = conditions[index]
            try:
                if condition.evaluate(self, in_state, budget):
                    return index, None
            except Exception as exc:  # the core reports any failure, as it does alone
                return index, exc
            start = index + 1
        return end, None

    def _guard_progress(self, start: int) -> int:
        """The condition a failed guards call was at (``start`` when the engine cannot say)."""
        instance = self.instance
        try:
            return int(instance.context.call(instance.api.guard_progress))
        except JSFailure:
            return start

    def run_script(
        self,
        script: Compiled,
        in_state: InState,
        writable: Writable,
        budget: Budget | None = None,
    ) -> list[WriteResult]:
        """Run a ``<script>``; one write per variable whose stored form it changed."""
        self._begin()
        started = charge(budget)
        self._meter(budget)
        try:
            return self._run_script(script, in_state, writable)
        finally:
            charge_time(budget, started)

    def _run_script(
        self, script: Compiled, in_state: InState, writable: Writable
    ) -> list[WriteResult]:
        instance = self.instance
        plan = instance.plans.get(id(script))
        if plan is None:
            plan = instance.plans[id(script)] = _ScriptPlan(script)
        answers = _answers(plan, in_state)

        def run() -> bool:
            instance.context.call(instance.api.run_script, script.source, answers)
            return True

        try:
            run()
        except JSFailure as failure:
            self._abort_after(failure)
            raise failure.error() from None
        # The engine holds to the core's rule itself (no variable whose name starts with
        # "_"): a call into the engine cannot call back into Python.
        changed = self._settle(run)
        # By name: the order of the engine's globals depends on how the instance was built.
        return [WriteResult(name, None, (), None) for name in sorted(changed) if name != _HEAP]

    def foreach_array(
        self, expr: Compiled, in_state: InState, budget: Budget | None = None
    ) -> int | None:
        """Start a ``<foreach>``: the array's length (a shallow copy of it is kept until
        ``foreach_end``), or None when the value is not an array."""
        self._begin()
        started = charge(budget)
        self._meter(budget)
        try:
            return self._foreach_array(expr, in_state)
        finally:
            charge_time(budget, started)

    def _foreach_array(self, expr: Compiled, in_state: InState) -> int | None:
        instance = self.instance
        api = instance.api
        plan = instance.plans.get(id(expr))
        if plan is None:
            reason = _failing(expr)
            if reason is not None:
                raise EvaluationError(reason)
            plan = instance.plans[id(expr)] = _ReadPlan(instance, expr)
        answers = _answers(plan, in_state) if plan.asks else None
        call = instance.context.call
        try:
            result = call(api.foreach_array, plan.function, answers, plan.guard, plan.pure)
        except JSFailure as failure:
            self._abort_after(failure)
            raise failure.error() from None
        if not isinstance(result, BOX):
            return result  # type: ignore[no-any-return]
        outcome = [_json(result)]
        self._settle(
            lambda: outcome.append(
                _boxed(call(api.foreach_array, plan.function, answers, True, False))
            )
        )
        length = outcome[-1].get("guarded")
        return length if isinstance(length, int) else None

    def foreach_item(self, item: str, index: str | None, position: int) -> None:
        """Bind the ``position``-th item of the array (and ``index``)."""
        try:
            self.instance.context.call(self.instance.api.foreach_item, item, index, position)
        except JSFailure as failure:
            self._abort_after(failure)
            raise _refusal(failure) from None
        self.names.add(item)
        if index is not None:
            self.names.add(index)

    def foreach_end(self) -> None:
        """End the innermost ``<foreach>``."""
        self.instance.context.call(self.instance.api.foreach_end)

    def export(self, name: str) -> Value:
        """One variable's value as plain data (a traced write's value), as the state's
        ``datamodel`` will show it (the variables are written out first)."""
        system = self.instance.system
        if name in system:
            return system[name]
        try:
            stored = self.stored()
        except JSFailure:
            # Past the engine's limits: the call's freeze reports it (a trace never does).
            return None
        return PlainDecoder(stored, system).variable(name) if name in stored else None

    # -- helpers -------------------------------------------------------------------------

    def _output_limit(self, budget: Budget | None) -> float:
        """What output the engine may still write in this call (the budget metered first
        when its limits are not the engine's)."""
        if budget is None:
            return NO_LIMIT_FLOAT
        if budget.limits is not self.instance.limits:
            self._meter(budget)
        output = budget.output
        return float(output) if output > 0 else 0.0

    def _meter(self, budget: Budget | None) -> None:
        """Hold the engine to the call's datamodel cap (the limits a budget carries)."""
        if budget is not None:
            instance = self.instance
            instance.limits = budget.limits
            cap = budget.limits.cap
            if cap != instance.cap:
                instance.context.call(instance.api.set_cap, float(min(cap, NO_LIMIT)))
                instance.cap = cap

    def _begin(self) -> None:
        """Before the first write of a call that resumed this instance: the engine logs
        what the call's writes replace from here (see ``Generation``). Every operation that
        may write calls it first."""
        instance = self.instance
        if instance.pending is not None:
            flush(instance)
        elif instance.starting:
            instance.starting = False
            self._call(instance.api.next_generation)

    def _call(self, function: Any, *args: Any) -> Any:
        try:
            return self.instance.context.call(function, *args)
        except JSFailure as failure:
            raise failure.error() from None

    def _abort_after(self, failure: JSFailure) -> None:
        """Put back what a call that ``failure`` ended had changed (its promise jobs run
        first, so that they are put back too).

        The engine may have failed half-way through putting values back (the heap full of
        what the call made): it finishes with room to spare (``Context.roomy``) from the
        checkpoint it keeps until then. An engine left with jobs it cannot run, or past a
        resource limit, is replaced by one built from its variables as they were before the
        call wrote (QuickJS cannot drop a queued job); when those cannot be had exactly,
        the whole call fails (see ``freeze``) rather than keep any part of the write."""
        instance = self.instance
        context = instance.context
        replace = failure.limit
        try:
            instance.drain()
        except JSFailure:
            replace = True
        try:
            with context.roomy():
                context.call(instance.api.abort)
        except JSFailure:
            self._replace_instance(restored=False)
            return
        if replace:
            self._replace_instance(restored=True)

    def _replace_instance(self, restored: bool) -> None:
        """Move the call to a new engine built from the old one's variables, which
        ``restored`` says hold what they held before the failed write (nothing else is
        trusted: a half put-back engine still holds part of the write)."""
        old = self.instance
        # The state this call resumed lives on in the old engine alone: written out now.
        previous = None if old.previous is None else old.previous()
        resumed = None if previous is None else previous()
        stored = None
        if restored:
            try:
                with old.context.roomy():
                    stored = self.stored()
            except (JSFailure, EvaluationError):
                stored = None
        # No state resumes the old engine from here (the one this call resumed was written
        # out above).
        generation = old.generation
        old.generation += 1
        if stored is None:
            # Every stored form the old engine could give now may hold part of the failed
            # write (and the one Python read last may be older than the call's writes):
            # the call fails when it ends (a content error does not stop it), and the
            # state it resumed stays as it was. Until then it runs on that state.
            self.failed = True
            stored = {} if resumed is None else resumed
        datamodel = {**old.system, **stored}
        instance = Instance(old.setup, old.cap, old.context.limits)
        instance.generation = generation
        self.instance = instance
        self.load(datamodel)

    def _settle(self, rerun: Any) -> list[str]:
        """Finish a guarded call: run its promise jobs, write every variable out and check
        it (the engine puts everything back if the cap or a name refuses it); answer the
        host functions it asked for and ``rerun`` it. Returns the variables it changed."""
        instance = self.instance
        api = instance.api
        context = instance.context
        asked = 0
        try:
            while True:
                try:
                    instance.drain()
                except JSFailure as failure:
                    self._abort_after(failure)
                    raise failure.error() from None
                try:
                    outcome = json.loads(_text(context.call(api.settle)))
                except JSFailure as failure:
                    # The engine put back what the call changed unless that failed too.
                    self._abort_after(failure)
                    raise _refusal(failure) from None
                if outcome[0] == "done":
                    return self._changed(outcome[1], set(outcome[2]))
                asked += 1
                if asked > MAX_HOST_CALLS:
                    raise EvaluationError(
                        f"more than {MAX_HOST_CALLS} host function calls in one evaluation"
                    )
                self._answer(outcome[1])
                try:
                    rerun()
                except JSFailure as failure:
                    self._abort_after(failure)
                    raise failure.error() from None
        finally:
            if asked:
                context.call(api.forget_host_answers)

    def _changed(self, changed: list[str], present: set[str]) -> list[str]:
        for name in changed:
            if name == _HEAP:
                continue
            if name in present:
                self.names.add(name)
            else:
                self.names.discard(name)
        return changed

    def _answer(self, key: str) -> None:
        name, args = json.loads(key)
        instance = self.instance
        try:
            value = instance.host.call(name, args, {})
        except HostFunctionError as exc:
            instance.context.call(instance.api.answer_host, key, None, str(exc))
            return
        text = None if value is None else _dumps(value, f"the result of {name}()")
        instance.context.call(instance.api.answer_host, key, text, None)


_MISSING: Final = object()
NO_LIMIT_FLOAT: Final = float(NO_LIMIT)


_EVENT_FIELDS: Final = ("name", "type", "sendid", "origin", "origintype", "invokeid")
_FIELDS: Final = itemgetter(*_EVENT_FIELDS)
_NO_EVENT: Final = (None,) * 8
_CARRIED: Final[set[tuple[Any, ...]]] = set()
"""Events' fields found to be strings the binding carries as they are (a chart's events
mostly share their name, type and origin: each such tuple is checked once)."""
_CARRIED_LIMIT: Final = 1024
"""How many tuples ``_CARRIED`` keeps (cleared when full: fields that differ on every
event never pile up)."""


def _first_undeclared(order: tuple[str, ...], names: Container[str]) -> int:
    """The index of the first of ``order`` not in ``names`` (len(order): none). A function
    of its own: a generator in ``assign_all`` would make its locals cells at every call."""
    for index, root in enumerate(order):
        if root not in names:
            return index
    return len(order)


def _event_fields(event: Value) -> tuple[Any, ...] | None:  # noqa: C901 - once an event, inlined
    """``setEvent``'s arguments: the event's fields as they are, then its data: the key and
    value of a dict of one entry the binding carries as they are, else None and the data
    as JSON text; None when a field is not a string the binding carries as it is (ASCII
    without NUL)."""
    if type(event) is not dict and not isinstance(event, dict):
        return _NO_EVENT
    if "raw" in event:
        return None  # a received message's event (rare): the whole event goes as JSON
    try:
        fields = _FIELDS(event)
    except KeyError:
        fields = tuple(map(event.get, _EVENT_FIELDS))  # (no closure: ``event`` no cell)
    try:
        carried = fields in _CARRIED
    except TypeError:
        return None  # a field that is no string (nor hashable): the whole event goes as JSON
    if not carried:
        for field in fields:
            if field is not None and (type(field) is not str or not _carried_text(field)):
                return None  # rare: the whole event goes as JSON
        if len(_CARRIED) >= _CARRIED_LIMIT:
            _CARRIED.clear()
        _CARRIED.add(fields)
    data = event.get("data")
    if data is None:
        return (*fields, None, None)
    if type(data) is dict and len(data) == 1:
        # Most events carry a field or two, often one: such a one goes as its key and
        # value when the binding carries both as they are (an int of 32 bits: it wraps any
        # other; strings of ASCII without NUL), and the engine builds the object that
        # ``JSON.parse`` of its text would (no text written here, none parsed there).
        for key in data:  # its one key
            item = data[key]
            kind = type(item)
            if (
                (
                    (kind is int and -0x80000000 <= item <= 0x7FFFFFFF)
                    or (kind is str and _carried_text(item))
                    or kind is bool
                    or item is None
                    or (kind is float and item - item == 0)
                )
                and type(key) is str
                and (key in _KEYS or _carried_key(key))
            ):
                return (*fields, key, item)
    try:  # ``_dumps``, inlined: once an event
        text = json_text(data)
    except (TypeError, ValueError, RecursionError) as exc:
        raise _not_event_data(exc) from None
    return (*fields, None, text)


_KEYS: Final[set[str]] = set()
"""Keys of events' data found to be strings the binding carries as they are (checked once
each, as the fields are: ``_CARRIED``)."""


def _carried_key(key: str) -> bool:
    """Whether the binding carries ``key`` as it is; kept if so."""
    if not _carried_text(key):
        return False
    if len(_KEYS) >= _CARRIED_LIMIT:
        _KEYS.clear()
    _KEYS.add(key)
    return True


def _carried_text(text: str) -> bool:
    """Whether the binding carries ``text`` as it is: ASCII without NUL."""
    return text.isascii() and "\x00" not in text


def _not_event_data(exc: Exception) -> EvaluationError:
    """The error for event data that cannot be written out as JSON."""
    return EvaluationError(f"the event's data is not a JSON value: {exc}")


def _dumps(value: Value, what: str) -> str:
    try:
        return json_text(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EvaluationError(f"{what} is not a JSON value: {exc}") from None


def _text(value: Any) -> str:
    """A string from the engine (a boxed one comes as an object: read its JSON)."""
    if isinstance(value, str):
        return value
    decoded = json.loads(value.json())
    return decoded if isinstance(decoded, str) else json.dumps(decoded)


def _json(box: Any) -> Any:
    try:
        return json.loads(box.json())
    except RecursionError:
        raise EvaluationError("the value is nested too deeply to hand out") from None


def _boxed(result: Any) -> Any:
    """A guarded call's answer: its JSON, or nothing (a host function asked)."""
    return _json(result) if isinstance(result, BOX) else {}


def _guarded_value(box: Any) -> Value:
    """The value of a guarded call's ``{guarded: value}``."""
    decoded = _json(box)
    return decoded.get("guarded") if isinstance(decoded, dict) else None


_EXACT: Final = 2**53
"""Integral doubles below this in magnitude are exact: they come back as int."""

_NEGATIVE_EXACT: Final = -_EXACT
"""``-_EXACT``, made once (negating it in a check makes an int each time)."""


def _scalar(value: Any) -> Value:
    """A scalar the engine handed out, as JSON reads it."""
    if isinstance(value, float):
        if value != value or abs(value) == float("inf"):
            return None
        # Numbers are doubles in JavaScript; integral ones come back as int, as JSON reads them.
        return int(value) if value.is_integer() and abs(value) < _EXACT else value
    return value


def _unboxed(decoded: Any) -> Value:
    """A boxed value the engine handed out: ``[tree]`` for an object, a string's JSON."""
    if isinstance(decoded, list) and len(decoded) == 1:
        return decoded[0]
    return decoded


def _refusal(failure: JSFailure) -> EvaluationError:
    """A write the datamodel refused, as the core reports it."""
    error = failure.error()
    if failure.message.startswith("RangeError: the"):
        return _Refused(failure.message.removeprefix("RangeError: "))
    return error


class _Refused(EvaluationError, ValueRefused):
    """A write the datamodel cap refused (nothing was written)."""


def _failing(*sources: Any) -> str | None:
    """Why one of ``sources`` cannot run: the reason a source that did not compile gives
    (``datamodel.failing``); None when all compiled."""
    for source in sources:
        if source is not None and not hasattr(source, "analysis"):
            return str(getattr(source, "reason", "the source did not compile"))
    return None


def _answers(plan: _Plan, in_state: InState) -> str | None:
    """What ``In()`` answers from in one call: the state ids the sources name literally,
    and, for a call that may run other code, the whole active configuration."""
    active = getattr(in_state, "active_state_ids", None) if plan.dynamic else None
    active_ids = list(active()) if callable(active) else None
    if not plan.ids and active_ids is None:
        return None
    answers = {state_id: bool(in_state(state_id)) for state_id in plan.ids}
    return json_text([answers, active_ids])


class _Plan:
    """How one instance runs one source (worked out on its first run there)."""

    __slots__ = ("asks", "dynamic", "guard", "ids", "pure")

    ids: tuple[str, ...]
    dynamic: bool
    asks: bool
    guard: bool
    pure: bool

    def _sources(self, *compiled: Compiled | None) -> None:
        """``ids``, ``dynamic``, ``guard``, ``pure`` and ``asks`` of these sources."""
        ids: tuple[str, ...] = ()
        guard = pure = False
        for source in compiled:
            if source is None:
                continue
            analysis = source.analysis
            ids += analysis.in_ids
            if analysis.writes:
                if analysis.pure:
                    pure = True
                else:
                    guard = True
        self.ids = ids
        # Only a call that may run chart code can call In() with an id it computes (the
        # pure built-ins cannot): it gets the whole configuration.
        self.dynamic = guard
        self.guard = guard
        self.pure = pure
        self.asks = bool(ids) or guard


class _ReadPlan(_Plan):
    """An expression: its compiled function here."""

    __slots__ = ("function",)

    def __init__(self, instance: Instance, expr: Compiled) -> None:
        self._sources(expr)
        self.function = instance.compiled("expression", expr.source)


class _ScriptPlan(_Plan):
    """A ``<script>``: it runs as it is written (always guarded)."""

    __slots__ = ()

    def __init__(self, script: Compiled) -> None:
        self._sources(script)
        self.dynamic = self.guard = self.asks = True


class _BlockPlan(_Plan):
    """A run of ``<assign>`` (and a ``<log>`` ending it), made once in this instance: the
    steps that can run unguarded come first (``runnable``)."""

    __slots__ = ("handle", "order", "roots", "runnable")

    def __init__(
        self,
        instance: Instance,
        writes: tuple[tuple[Compiled, Compiled | None, Value], ...],
        log: Compiled | None,
    ) -> None:
        plans: list[_Plan] = []
        for location, expr, _value in writes:
            if _failing(location, expr) is not None:
                break  # run alone: it reports why
            key = (id(location), id(expr))
            write = instance.plans.get(key)
            if write is None:
                write = instance.plans[key] = _WritePlan(instance, location, expr)
            plans.append(write)
        if log is not None and len(plans) == len(writes) and _failing(log) is None:
            read = instance.plans.get(id(log))
            if read is None:
                read = instance.plans[id(log)] = _ReadPlan(instance, log)
            plans.append(read)
        runnable = next((i for i, plan in enumerate(plans) if plan.guard), len(plans))
        self.runnable = runnable
        # The variable each write goes into, in turn ("" for none: never declared).
        self.order = tuple(location.analysis.root for location, _, _ in writes[:runnable])
        self.roots = frozenset(self.order)
        self.ids = tuple(state_id for plan in plans[:runnable] for state_id in plan.ids)
        self.dynamic = self.guard = self.pure = False
        self.asks = bool(self.ids)
        call = instance.context.call
        api = instance.api
        handle = call(api.new_block)
        for (location, expr, value), plan in zip(writes, plans, strict=False):
            assert isinstance(plan, _WritePlan)  # noqa: S101 - made above
            text = None if expr is not None or value is None else _dumps(value, "the value")
            call(
                api.block_assign,
                handle,
                plan.location,
                plan.expr,
                text,
                location.analysis.root,
                plan.root,
                plan.pure,
                plan.plain,
                plan.member,
                plan.target,
            )
        if len(plans) > len(writes):
            read = plans[-1]
            assert isinstance(read, _ReadPlan)  # noqa: S101 - made above
            call(api.block_log, handle, read.function, read.pure)
        self.handle = handle


class _GuardsPlan(_Plan):
    """A chain of transitions' conditions (``Variables.first_true``), made once in this
    instance: per condition its function here, or None (no condition, or one that runs
    alone: it may write, or it did not compile)."""

    __slots__ = ("conditions", "handle")

    def __init__(self, instance: Instance, conditions: tuple[Expression | None, ...]) -> None:
        # Held, so that the id the plan is found by stays this tuple's.
        self.conditions = conditions
        call = instance.context.call
        api = instance.api
        handle = call(api.new_guards)
        ids: tuple[str, ...] = ()
        condition: Any
        for condition in conditions:
            if condition is None:
                call(api.guard_add, handle, None, False, False)
                continue
            if _failing(condition) is not None:
                call(api.guard_add, handle, None, False, True)
                continue
            read = instance.plans.get(id(condition))
            if read is None:
                read = instance.plans[id(condition)] = _ReadPlan(instance, condition)
            assert isinstance(read, _ReadPlan)  # noqa: S101 - made above, by expression
            call(api.guard_add, handle, read.function, read.pure, read.guard)
            if not read.guard:
                ids += read.ids
        self.handle = handle
        self.ids = ids
        self.dynamic = self.guard = self.pure = False
        self.asks = bool(ids)


class _WritePlan(_Plan):
    """An ``<assign>`` (or ``<data expr>``): the compiled location and expression here, the
    variable it writes into, and whether its value is read without descriptors."""

    __slots__ = ("expr", "location", "member", "plain", "root", "target")

    def __init__(
        self, instance: Instance, location: Compiled | None, expr: Compiled | None
    ) -> None:
        self._sources(expr, location)
        self.location = None if location is None else instance.compiled("location", location.source)
        # Where an unguarded write into a property goes, logged before it (lazy write-out).
        parts = None if location is None or self.guard else location.analysis.target
        self.target = None if parts is None else instance.target(*parts)
        self.expr = None if expr is None else instance.compiled("expression", expr.source)
        self.root = None if location is None else location.analysis.root or None
        # The variable itself (``count``), or a property of it the source spells out.
        whole = location is not None and location.source.strip() == location.analysis.root
        self.member = "" if whole else None if location is None else location.analysis.member
        # A value built by a source that makes no accessor is measured without descriptors.
        self.plain = expr is None or not expr.analysis.accessors
