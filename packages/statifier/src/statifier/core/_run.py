"""The working copy of a position that one public call of the core mutates.

``Run`` holds the fields of a ``MachineState`` in mutable form plus the helpers every
part of the core shares: evaluating expressions and conditions, writing and binding
the datamodel, raising error events. ``freeze`` turns it back into an immutable state.
``content.ContentExecutor`` (executable content) and ``algorithm.Interpreter``
(Appendix D) build on it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterable
from typing import Any, Final, NoReturn, Self

from statifier._slots import bare
from statifier.budget import NODE_COST, Budget, MacrostepLimits, Reason
from statifier.chart.model import ContentNode, DataNode, Machine, Owner, StateNode, TransitionNode
from statifier.core import effects as fx
from statifier.core._build import datamodel_change
from statifier.core._memo import room
from statifier.core.events import Event
from statifier.core.state import MachineState, StateBuilder
from statifier.datamodel import (
    EvaluationError,
    Expression,
    Location,
    WriteResult,
    datamodel_for,
    variables_of,
)
from statifier.datamodel.registry import VARIABLES_KEY
from statifier.errors import ExecutionResourceError
from statifier.values import (
    ONE_DIGIT,
    ValueRefused,
    ValueTooLarge,
    brief,
    clip,
    entry_key_size,
    measure,
)

Effects = list[fx.Effect]


SMALL_INT = ONE_DIGIT
"""Integers below this in magnitude are small scalars to ``Run.admit``: within one digit,
so the comparisons with it run specialised (with 2**64 each fell back to the generic
one); larger ones are measured."""

NEGATIVE_SMALL_INT = -SMALL_INT
"""``-SMALL_INT``, made once (negating it in a check makes an int each time)."""

SMALL_SCALAR_SIZE = 22
"""What ``Run.admit`` counts for a small scalar without measuring it: more than ``measure``
counts for a bool, None or an int below ``SMALL_INT``."""

_BARE_BUDGET: Final = bare(Budget)
"""A call's budget, made without ``Budget.__init__`` (``Run.resume`` fills it)."""


class Keep:
    """Marker: keep the routes snapshot the state already carries."""


KEEP = Keep()


class BlockAbort(Exception):
    """An error inside a block of executable content: the rest of the block is skipped."""


class Run:
    """A mutable working copy of a ``MachineState`` for the duration of one public call.

    A run is also what a datamodel gets for ``In()`` (``in_state``, the run itself): call
    it with a state id, or list the active ids (the Python datamodel calls it; the
    ECMAScript datamodel, whose chart code cannot call back into Python, hands
    ``active_state_ids()`` to the engine before a call).
    """

    __slots__ = (
        "_frozen",
        "_order",
        "bound",
        "budget",
        "caller_context",
        "cap",
        "config",
        "context",
        "datamodel",
        "effects",
        "entered",
        "entered_now",
        "history",
        "in_state",
        "internal_queue",
        "invocations",
        "invoke_counter",
        "invoke_types",
        "limits",
        "line",
        "machine",
        "macrostep",
        "max_rounds",
        "microstep",
        "node",
        "origin",
        "replayable",
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
    config: set[int] | frozenset[int]
    """The configuration: the state's own set until a change (``thaw_config``) or a
    microstep plan (``Interpreter.do_microstep``) replaces it."""
    _order: list[int] | None
    _frozen: frozenset[int] | None
    internal_queue: deque[Event] | tuple[()]
    """The internal queue: an empty tuple until the first event (``queue``), most calls
    never queue one."""
    history: dict[int, tuple[int, ...]]
    entered: frozenset[int]
    states_to_invoke: set[int] | tuple[int, ...]
    """An empty tuple until the first change (``to_invoke``): most calls never touch it."""
    invocations: dict[tuple[int, int], str]
    invoke_counter: int
    send_counter: int
    timer_counter: int
    caller_context: Any
    datamodel: dict[str, Any]
    context: Any
    """The datamodel's evaluation context over ``datamodel`` (``DirectEvaluation``, ADR
    20), made when first needed (None until then)."""
    running: bool
    status: str
    macrostep: int
    microstep: int
    round: int
    trace: bool
    in_state: Run
    """What a datamodel gets for ``In()``: the run itself, until it ends (``freeze``
    deletes it), so that no object is made for it."""
    max_rounds: int | None
    invoke_types: frozenset[str] | None
    routes: Container[str] | None
    effects: Effects
    limits: MacrostepLimits
    budget: Budget
    """The meter of this call (one macrostep): every evaluation and node spends it."""
    bound: int | None
    origin: MachineState | None
    """The state this call resumed (it may carry the datamodel's size bound)."""
    """An upper bound of the written-out size of the chart's variables (None: not known)."""
    node: ContentNode | None
    """The executable-content node being run (it locates the errors it raises)."""
    line: int | None
    """The source line of the element being run, for ``ErrorRaised``."""
    replayable: bool
    """Whether this macrostep so far depends only on the configuration and the event name
    (``statifier.core._replay``): cleared by any condition, content, history, final state,
    internal event or invocation."""
    entered_now: frozenset[int]
    """The states this macrostep entered (kept while it is replayable; a new set each
    time, so that a step that stops being replayable made none)."""

    @classmethod
    def fresh(
        cls,
        machine: Machine,
        session_id: str,
        max_rounds: int | None,
        trace: bool,
        invoke_types: Iterable[str] | None,
        routes: Container[str] | None,
        caller_context: Any = None,
        limits: MacrostepLimits | None = None,
    ) -> Self:
        run = cls()  # no ``__init__``: a bare run, cheaper than ``__new__``
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
        run.caller_context = caller_context
        opener = variables_of(machine)
        # A datamodel that keeps its variables itself gives the call a mapping of its own.
        run.datamodel = {} if opener is None else opener(machine, None)  # type: ignore[assignment]
        run.context = None
        run.running = True
        run.status = "running"
        run.macrostep, run.microstep, run.round = 1, 0, 0
        run.trace = trace
        run.max_rounds = max_rounds
        run.invoke_types = frozenset(invoke_types) if invoke_types is not None else None
        run.routes = routes
        run.effects = []
        run.in_state = run
        run.node = None
        run.line = None
        run.replayable = False
        run.meter(limits if limits is not None else MacrostepLimits())
        return run

    @classmethod
    def resume(cls, state: MachineState, routes: Container[str] | Keep | None = KEEP) -> Self:
        run = cls()  # no ``__init__``: a bare run, cheaper than ``__new__``
        machine = state.machine
        run.machine = machine
        run.states = machine.states
        run.transitions = machine.transitions
        run.session_id = state.session_id
        # The configuration, states_to_invoke, history, entered and invocations are
        # copied on write: most steps never change them in place.
        run.config = run._frozen = state.configuration
        run._order = None
        queued = state.internal_queue
        run.internal_queue = deque(queued) if queued else ()
        run.history = state.history
        run.entered = state.entered
        to_invoke = state.states_to_invoke
        run.states_to_invoke = set(to_invoke) if to_invoke else ()
        run.invocations = state.invocations
        run.invoke_counter = state.invoke_counter
        run.send_counter = state.send_counter
        run.timer_counter = state.timer_counter
        run.caller_context = state.caller_context
        # ``variables_of``, inlined: once per event.
        opener = machine._cache.get(VARIABLES_KEY, variables_of)
        if opener is variables_of:
            opener = variables_of(machine)
        run.datamodel = dict(state.datamodel) if opener is None else opener(machine, state)
        run.context = None
        run.running = state.running
        run.status = state.status
        run.macrostep, run.microstep, run.round = state.macrostep, state.microstep, state.round
        run.trace = state.trace
        run.max_rounds = state.max_macrostep_rounds
        run.invoke_types = state.invoke_types
        run.routes = state.routes if isinstance(routes, Keep) else routes
        run.effects = []
        run.in_state = run  # ``In()``: no object of its own (``freeze`` drops it)
        run.node = None
        run.line = None
        run.replayable = False
        # The budget, inlined from ``meter``: this runs once per event.
        limits = run.limits = state.limits
        budget = run.budget = _BARE_BUDGET()  # no ``__init__``: cheaper than ``__new__``
        budget.limits = limits
        budget.steps = limits.start_steps
        budget.output = limits.start_output
        budget.exhausted = None
        budget.admit = run.admit_write
        run.bound = None
        run.origin = state
        return run

    def meter(self, limits: MacrostepLimits) -> None:
        """Start this call's budget under ``limits``."""
        self.limits = limits
        self.budget = Budget(limits)
        self.budget.admit = self.admit_write
        self.bound = None
        self.origin = None

    def freeze(self) -> MachineState:
        state: Any = StateBuilder()
        state.machine = self.machine
        state.session_id = self.session_id
        origin = self.origin
        entered = self.entered
        config = self.config
        if origin is not None and (
            config is origin.configuration or config == origin.configuration
        ):
            # Back where it started (a self-transition, most steps): no new set.
            configuration = origin.configuration
        else:
            configuration = shared(self.machine, self.frozen_config())
        if origin is None or entered is not origin.entered:
            entered = shared(self.machine, entered)
        state.configuration = configuration
        state.internal_queue = tuple(self.internal_queue) if self.internal_queue else ()
        state.history = self.history
        state.entered = entered
        to_invoke = self.states_to_invoke
        state.states_to_invoke = (
            () if type(to_invoke) is tuple else (tuple(sorted(to_invoke)) if to_invoke else ())
        )
        state.invocations = self.invocations
        state.invoke_counter = self.invoke_counter
        state.send_counter = self.send_counter
        state.timer_counter = self.timer_counter
        state.caller_context = self.caller_context
        datamodel = self.datamodel
        if type(datamodel) is dict:
            state.datamodel = datamodel
            # Derived data, not a field: carried to the next call on this very datamodel.
            bound = self.bound
            if bound is not None:
                state._datamodel_bound = (datamodel, bound)
            elif (
                origin is not None
                and (carried := origin._datamodel_bound) is not None
                and carried[0] is origin.datamodel
            ):
                # Nothing written to a chart variable (each write goes through the bound):
                # what bounded them before this call still does.
                state._datamodel_bound = (datamodel, carried[1])
            else:
                state._datamodel_bound = None
        else:
            kept: Any = datamodel  # variables kept by their datamodel (ADR 22)
            try:  # ``kept_freeze``, inlined: once a call
                state.datamodel, state._datamodel_bound = kept.freeze()
            except MemoryError:
                raise ExecutionResourceError(self.session_id, "memory") from None
        state.running = self.running
        state.status = "done" if self.status == "done" else "running"
        state.macrostep = self.macrostep
        state.microstep = self.microstep
        state.round = self.round
        state.trace = self.trace
        state.max_macrostep_rounds = self.max_rounds
        state.invoke_types = self.invoke_types
        state.routes = self.routes
        state.limits = self.limits
        # The call ends here. The run's In() view (itself), its datamodel's context (which
        # holds that view) and its budget's ``admit`` point back at the run: without them
        # the run (with the state it resumed and the effects it made) is freed at once,
        # not left to the cyclic collector.
        del self.in_state
        self.context = None
        self.budget.admit = None
        state.__class__ = MachineState  # ``finish``, inlined: once per call
        made: MachineState = state
        return made

    def __call__(self, state_id: str) -> bool:
        """``In(state_id)``: whether the state is active."""
        index = self.machine.state_ids.get(state_id)
        return index is not None and index in self.config

    def active_state_ids(self) -> tuple[str, ...]:
        """Ids of every active state, in document order."""
        return self.ids(self.order())

    # -- small helpers -------------------------------------------------------------------

    def frozen_config(self) -> frozenset[int]:
        """The configuration as a frozenset, cached until it changes."""
        if self._frozen is None:
            self._frozen = frozenset(self.config)
        return self._frozen

    def thaw_config(self) -> set[int]:
        """The configuration as a set of this call's own, to change in place (views of it
        are dropped by whoever changes it)."""
        config = self.config
        if type(config) is not set:
            config = self.config = set(config)
        return config

    def queue(self) -> deque[Event]:
        """The internal queue as a deque of this call's own, to add events to."""
        found = self.internal_queue
        if type(found) is not deque:
            found = self.internal_queue = deque()
        return found

    def to_invoke(self) -> set[int]:
        """``states_to_invoke`` as a set of this call's own, to change in place."""
        found = self.states_to_invoke
        if type(found) is not set:
            found = self.states_to_invoke = set(found)
        return found

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

    def raise_error(self, name: str, message: str, sendid: str | None = None) -> None:
        """Place a platform error event (``error.execution``...) on the internal queue.

        The message is clipped: it may hold an exception's text, which the chart (a
        ``throw``) or a host function chose.
        """
        self.queue_error(
            Event(name=name, type="platform", data={"message": clip(message)}, sendid=sendid)
        )

    def queue_error(self, event: Event) -> None:
        """Queue an ``error.*`` event and announce it with an ``ErrorRaised`` effect.

        The effect names the element being run (line, ``c_index``, owner) when the error
        comes from the chart; errors a driver hands in carry no location. At the internal
        queue's or the effects' limit the error becomes the budget's own (ADR 11), said
        once; past it, errors are dropped (the macrostep ends at the next round boundary).
        """
        limits = self.limits
        if len(self.internal_queue) >= limits.max_queue or len(self.effects) >= limits.max_effects:
            budget = self.budget
            if budget.exhausted is not None:
                return
            reason: Reason = (
                "internal_events" if len(self.internal_queue) >= limits.max_queue else "effects"
            )
            budget.exhausted = reason
            event = self.exhaustion_error(reason)
        self.announce_error(event)

    def exhaustion_error(self, reason: Reason) -> Event:
        """The ``error.execution`` saying the budget ``reason`` ran out."""
        message = self.exhausted_message(reason)
        return Event(name="error.execution", type="platform", data={"message": message})

    def announce_error(self, event: Event) -> None:
        """Queue ``event`` with its ``ErrorRaised``, whatever the limits (``queue_error``
        checks them first)."""
        self.queue().append(event)
        node = self.node
        data = event.data
        message = data.get("message") if isinstance(data, dict) else None
        self.effects.append(
            fx.ErrorRaised(
                name=event.name,
                message=message if isinstance(message, str) else "",
                sendid=event.sendid,
                line=self.line,
                c_index=node.c_index if node is not None else None,
                owner=node.owner if node is not None else None,
                **self.counters(),
            )
        )

    def evaluate(self, expr: Expression) -> Any:
        """Evaluate or raise ``BlockAbort`` after queueing ``error.execution``."""
        self.replayable = False
        try:
            return expr.evaluate(self.datamodel, self.in_state, self.budget)
        except Exception as exc:  # nothing may escape the core as a Python exception
            self.evaluation_failed(expr, exc)

    def evaluation_failed(self, expr: Expression, exc: Exception) -> NoReturn:
        """An expression failed: queue ``error.execution`` and abort the block."""
        self.raise_error("error.execution", self.failure(brief(expr.source), exc))
        raise BlockAbort

    def condition(self, expr: Expression | None) -> bool:
        """Spec 5.9.1: a condition that cannot be evaluated is false and raises an error."""
        if expr is None:
            return True
        self.replayable = False
        try:
            return bool(expr.evaluate(self.datamodel, self.in_state, self.budget))
        except Exception as exc:
            return self.condition_failed(expr, exc)

    def condition_failed(self, expr: Expression, exc: Exception) -> bool:
        """A condition failed to evaluate: raise ``error.execution``; it is false."""
        self.raise_error("error.execution", self.failure(f"condition {brief(expr.source)}", exc))
        return False

    def failure(self, what: str, exc: BaseException) -> str:
        """The message of an ``error.execution`` for a failed evaluation of ``what``."""
        reason = self.budget.exhausted
        if reason is not None:
            return f"{what}: {self.exhausted_message(reason)}"
        if isinstance(exc, EvaluationError | ValueRefused):
            return f"{what}: {exc}"
        return f"{what}: internal error {type(exc).__name__}"

    def exhausted_message(self, reason: Reason) -> str:
        return f"the macrostep's {reason} budget ({self.budget.limit_of(reason)}) is exhausted"

    # -- the macrostep budget ------------------------------------------------------------

    def check_budget(self) -> None:
        """Raise ``BlockAbort`` if a per-call budget ran out (the first time with an error).

        Called before every executable-content node and ``<foreach>`` iteration; the
        macrostep then ends at the next round boundary with ``BudgetExhausted``.
        """
        budget = self.budget
        if budget.exhausted is not None:
            raise BlockAbort
        if budget.steps < 0:
            self.exhaust("steps")
        if len(self.effects) >= self.limits.max_effects:
            self.exhaust("effects")
        if len(self.internal_queue) >= self.limits.max_queue:
            self.exhaust("internal_events")

    def charge_guard(self) -> bool:
        """Spend ``NODE_COST`` for a guard about to be evaluated, as a node does (ADR 11).

        False once the budget is out: the guard is then not evaluated and is false (it
        would fail alike), and the guard that overdraws the budget says so, once, with
        ``error.execution``.
        """
        budget = self.budget
        if budget.exhausted is not None:
            return False
        budget.steps -= NODE_COST
        if budget.steps < 0:
            budget.exhausted = "steps"
            self.announce_error(self.exhaustion_error("steps"))
            return False
        return True

    def exhaust(self, reason: Reason) -> NoReturn:
        """A per-call budget ran out: say so once with ``error.execution``, abort the block."""
        budget = self.budget
        if budget.exhausted is None:
            budget.exhausted = reason
            self.announce_error(self.exhaustion_error(reason))  # said once, past any limit
        raise BlockAbort

    def ship(self, value: Any) -> Any:
        """Admit a value the call hands out (event data, a logged value, invoke params).

        It must be storable (``statifier.values.measure``) and its written-out size is
        taken from the output budget; otherwise the block aborts.
        """
        if value is None or (type(value) is str and len(value) < 256):
            # The common case (no data, a short string) costs no walk.
            self.budget.output -= 0 if value is None else len(value) + 2
            return value
        budget = self.budget
        output = budget.output
        try:
            size, work = measure(value, output if output > 0 else 0)
        except ValueTooLarge:
            budget.output = -1
            self.exhaust("output_bytes")
        except ValueRefused as exc:
            self.raise_error("error.execution", f"cannot hand out the value: {exc}")
            raise BlockAbort from None
        budget.output = output - size
        # ``Budget.spend``, inlined: a logged number or list comes through here.
        steps = budget.steps = budget.steps - work
        if steps < 0 and budget.exhausted is None:
            budget.exhausted = "steps"
        return value

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
        datamodel = self.datamodel
        if root[:1] == "_" or root not in datamodel:
            self.undeclared(location)
        if type(datamodel) is not dict:
            return self.write_kept(location, None, value, c_index, owner, emit=emit)
        try:
            if location.plain:
                # The variable itself: no datamodel call (see ``Location.plain``).
                path: tuple[str | int, ...] = ()
                prior = datamodel[root]
                root_value = value
            else:
                result = location.write(datamodel, value, self.in_state, self.budget)
                path, prior, root_value = result.path, result.prior, result.root_value
            self.admit(root, path, value, root_value)
        except Exception as exc:
            self.raise_error(
                "error.execution", self.failure(f"cannot assign to {brief(location.source)}", exc)
            )
            raise BlockAbort from None
        datamodel[root] = root_value
        change = self.change(location.source, path, value, prior, c_index, owner)
        if emit:
            self.effects.append(change)
        return change

    def undeclared(self, location: Location) -> NoReturn:
        """A write whose root is no declared variable, or a system variable: the error."""
        root = location.root
        what = "a read-only system variable" if root.startswith("_") else "not declared"
        self.raise_error(
            "error.execution",
            f"cannot assign to {brief(location.source)}: {brief(root)} is {what}",
        )
        raise BlockAbort

    # -- a datamodel that keeps its variables itself (ADR 22) -----------------------------

    def write_kept(
        self,
        location: Location,
        expr: Expression | None,
        value: Any,
        c_index: int | None,
        owner: Owner | None,
        *,
        emit: bool = True,
    ) -> fx.DatamodelChange:
        """``write`` for kept variables: ``expr``'s value (or ``value``) is stored in place,
        admitted by the datamodel itself. The caller checked the root is declared."""
        datamodel: Any = self.datamodel
        root = location.root
        try:
            datamodel.assign(location, expr, value, root, self.in_state, self.budget)
        except Exception as exc:
            self.raise_error(
                "error.execution", self.failure(f"cannot assign to {brief(location.source)}", exc)
            )
            raise BlockAbort from None
        traced = self.trace
        change = self.change(
            location.source, (), datamodel.export(root) if traced else value, None, c_index, owner
        )
        if emit:
            self.effects.append(change)
        return change

    def change(
        self,
        location: str,
        path: tuple[str | int, ...],
        value: Any,
        prior: Any,
        c_index: int | None,
        owner: Owner | None,
    ) -> fx.DatamodelChange:
        """The ``DatamodelChange`` of one write; values are recorded only in trace mode (an
        effect list that held every prior value would keep every version of the datamodel
        alive for the whole call)."""
        traced = self.trace
        return datamodel_change(
            location,
            path,
            value if traced else fx.NOT_RECORDED,
            prior if traced else fx.NOT_RECORDED,
            c_index,
            owner,
            self.macrostep,
            self.microstep,
            self.round,
        )

    def admit_write(self, write: WriteResult) -> None:
        """``admit`` for a datamodel's write result (the callback scripts are given).

        A write that does not say what it wrote at its path (``value`` None, which a
        datamodel may leave unset) is measured as its whole new root value.
        """
        if write.path and write.value is not None:
            self.admit(write.root, write.path, write.value, write.root_value)
        else:
            self.admit(write.root, (), write.root_value, write.root_value)

    def admit(self, root: str, path: tuple[Any, ...], value: Any, root_value: Any) -> None:
        """Check a write of ``value`` at ``root``/``path`` (making the variable
        ``root_value``) against the datamodel cap before it is applied.

        The value must be storable (finite, JSON-like, not too deep) and the datamodel's
        written-out size, shared references expanded, must stay within ``datamodel_bytes``.
        Raises ``ValueRefused`` (the caller turns it into ``error.execution``).

        The size is kept as an upper bound (every write adds what it wrote, nothing is
        taken off), carried from call to call; only when the bound passes the cap is the
        datamodel measured exactly, and the bound reset to that.
        """
        if root[0] == "_":
            return
        bound = self.bound
        if bound is None:
            bound = self.bound = self.carried_bound()
        cap = self.limits.cap
        # Worked out from the bound up, not from the room down: each arithmetic on these
        # large counts makes a new int.
        used = bound
        if path and isinstance(path[-1], str):
            used = bound + entry_key_size(path[-1])  # the key, if it is new
        kind = type(value)
        if (
            (kind is int and NEGATIVE_SMALL_INT < value < SMALL_INT)
            or kind is bool
            or value is None
        ) and (grown := used + SMALL_SCALAR_SIZE) <= cap:
            # A small scalar: an upper bound of its size without walking anything.
            self.bound = grown
            return
        room = cap - used
        try:
            size, work = measure(value, room if room > 0 else 0, len(path))
        except ValueTooLarge:
            others = self.measure_datamodel(root, cap)
            size, work = measure(root_value, max(cap - others, 0))
            self.budget.steps -= work
            self.bound = others + size
            return
        self.budget.steps -= work
        self.bound = used + size

    def carried_bound(self) -> int:
        """The bound the previous call left on the state it returned, if this call works on
        that datamodel; else the datamodel measured."""
        origin = self.origin
        if origin is not None:
            carried = origin._datamodel_bound
            if carried is not None and carried[0] is origin.datamodel:
                bound: int = carried[1]  # (an int here: no ``int()`` call an event)
                return bound
        return self.measure_datamodel(None, None)

    def measure_datamodel(self, skip: str | None, limit: int | None) -> int:
        """The written-out size of the chart's variables (all but ``skip``)."""
        total = 0
        cap = self.limits.cap if limit is None else limit
        budget = self.budget
        for name, value in self.datamodel.items():
            if name[0] == "_" or name == skip:
                continue
            try:
                size, work = measure(value, cap)
            except ValueRefused:
                size, work = cap, cap // 64  # a host stored it; it fills the cap
            budget.steps -= work
            total += size
        return total

    def bindable(self, name: str) -> None:
        """Raise ``BlockAbort`` (after the error) unless ``name`` can be bound."""
        if name.startswith("_"):
            self.raise_error(
                "error.execution",
                f"cannot bind {brief(name)}: it is a read-only system variable",
            )
            raise BlockAbort
        if not datamodel_for(self.machine.datamodel).is_identifier(name):
            # Only a datamodel that reports bad names at run time lets one compile (test 457).
            self.raise_error("error.execution", f"cannot bind {name!r}: not a variable name")
            raise BlockAbort

    def bind(self, name: str, value: Any, c_index: int | None, owner: Owner | None) -> None:
        """Bind a top-level variable (``<data>``, foreach item/index), creating it if needed."""
        self.bindable(name)
        datamodel = self.datamodel
        prior = datamodel.get(name) if self.trace else None
        try:
            if type(datamodel) is dict:
                self.admit(name, (), value, value)
            else:  # kept variables admit the value themselves, before binding it
                datamodel.bind(name, value, self.budget)  # type: ignore[attr-defined]
        except (ValueRefused, EvaluationError) as exc:
            self.raise_error("error.execution", f"cannot bind {brief(name)}: {exc}")
            raise BlockAbort from None
        if type(datamodel) is dict:
            datamodel[name] = value
        self.effects.append(self.change(name, (name,), value, prior, c_index, owner))

    def initialize_data(self, data: DataNode) -> None:
        """Bind a ``<data>`` element's initial value (spec 5.3; errors are located at it)."""
        self.line = data.line
        if data.has_value:
            value = data.value
        elif data.expr is not None:
            datamodel = self.datamodel
            if type(datamodel) is not dict:
                self.bind_kept(data)
                return
            try:
                value = data.expr.evaluate(datamodel, self.in_state, self.budget)
            except Exception as exc:
                self.raise_error("error.execution", self.failure(f"data {brief(data.id)}", exc))
                return
        elif data.src is not None:
            self.raise_error(
                "error.execution", f"data {brief(data.id)}: src {brief(data.src)} was not resolved"
            )
            return
        else:
            return
        try:
            self.bind(data.id, value, None, None)
        except BlockAbort:
            return

    def bind_kept(self, data: DataNode) -> None:
        """``<data expr>`` into kept variables: the value is bound in place (a variable may
        be the very object another one or a system variable holds)."""
        name = data.id
        datamodel: Any = self.datamodel
        try:
            self.bindable(name)
        except BlockAbort:
            return
        try:
            datamodel.assign(None, data.expr, None, name, self.in_state, self.budget)
        except Exception as exc:
            self.raise_error("error.execution", self.failure(f"data {brief(name)}", exc))
            return
        value = datamodel.export(name) if self.trace else None
        self.effects.append(self.change(name, (name,), value, None, None, None))

    def run_script(self, script: Any, c_index: int | None, owner: Owner | None) -> None:
        """Run a ``<script>`` and record each of its writes as a ``DatamodelChange``."""
        try:
            writes = script.run(
                self.datamodel, self.in_state, _writable, self.budget, self.admit_write
            )
        except EvaluationError as exc:
            for write in getattr(exc, "writes", ()):
                self.record_write(write, c_index, owner)
            self.raise_error("error.execution", self.failure("script", exc))
            raise BlockAbort from None
        except Exception as exc:
            self.raise_error("error.execution", self.failure("script", exc))
            raise BlockAbort from None
        for write in writes:
            self.record_write(write, c_index, owner)

    def record_write(self, write: Any, c_index: int | None, owner: Owner | None) -> None:
        """The ``DatamodelChange`` for one write a script made."""
        path = tuple(write.path)
        self.effects.append(
            self.change(write.root, path, write.root_value, write.prior, c_index, owner)
        )


_SHARED = "sets"
"""The key, in a machine's ``_cache``, of the state sets its executions share."""

_SHARED_LIMIT = 4096


def shared(machine: Machine, states: frozenset[int]) -> frozenset[int]:
    """The one set of ``machine``'s executions equal to ``states`` (states hold their
    configuration and the states they entered; many executions hold equal ones)."""
    memo: dict[frozenset[int], frozenset[int]] = machine._cache.setdefault(_SHARED, {})
    found = memo.get(states)
    if found is None:
        if len(memo) >= room(_SHARED_LIMIT, len(states)):
            memo.clear()
        found = memo[states] = states
    return found


def _writable(name: str) -> bool:
    return not name.startswith("_")
