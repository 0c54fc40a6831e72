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
from typing import Any, Self

from statifier.chart.model import ContentNode, DataNode, Machine, Owner, StateNode, TransitionNode
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.datamodel import EvaluationError, Expression, Location, datamodel_for

Effects = list[fx.Effect]


class Keep:
    """Marker: keep the routes snapshot the state already carries."""


KEEP = Keep()


class BlockAbort(Exception):
    """An error inside a block of executable content: the rest of the block is skipped."""


class ActiveStates:
    """What a datamodel gets for ``In()``: call it with a state id, or list the active ids.

    The Python datamodel calls it; the ECMAScript datamodel, whose chart code cannot call
    back into Python, hands ``active_state_ids()`` to the engine before a call.
    """

    __slots__ = ("_run",)

    def __init__(self, run: Run) -> None:
        self._run = run

    def __call__(self, state_id: str) -> bool:
        run = self._run
        index = run.machine.state_ids.get(state_id)
        return index is not None and index in run.config

    def active_state_ids(self) -> tuple[str, ...]:
        """Ids of every active state, in document order."""
        run = self._run
        return run.ids(run.order())


class Run:
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
        "in_state",
        "internal_queue",
        "invocations",
        "invoke_counter",
        "invoke_types",
        "line",
        "machine",
        "macrostep",
        "max_rounds",
        "microstep",
        "node",
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
    in_state: ActiveStates
    max_rounds: int | None
    invoke_types: frozenset[str] | None
    routes: Container[str] | None
    effects: Effects
    node: ContentNode | None
    """The executable-content node being run (it locates the errors it raises)."""
    line: int | None
    """The source line of the element being run, for ``ErrorRaised``."""

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
    ) -> Self:
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
        run.caller_context = caller_context
        run.datamodel = {}
        run.running = True
        run.status = "running"
        run.macrostep, run.microstep, run.round = 1, 0, 0
        run.trace = trace
        run.max_rounds = max_rounds
        run.invoke_types = frozenset(invoke_types) if invoke_types is not None else None
        run.routes = routes
        run.effects = []
        run.in_state = ActiveStates(run)
        run.node = None
        run.line = None
        return run

    @classmethod
    def resume(cls, state: MachineState, routes: Container[str] | Keep | None = KEEP) -> Self:
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
        run.routes = state.routes if isinstance(routes, Keep) else routes
        run.effects = []
        run.in_state = ActiveStates(run)
        run.node = None
        run.line = None
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

    def raise_error(self, name: str, message: str, sendid: str | None = None) -> None:
        """Place a platform error event (``error.execution``...) on the internal queue."""
        self.queue_error(
            Event(name=name, type="platform", data={"message": message}, sendid=sendid)
        )

    def queue_error(self, event: Event) -> None:
        """Queue an ``error.*`` event and announce it with an ``ErrorRaised`` effect.

        The effect names the element being run (line, ``c_index``, owner) when the error
        comes from the chart; errors a driver hands in carry no location.
        """
        self.internal_queue.append(event)
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
        try:
            return expr.evaluate(self.datamodel, self.in_state)
        except EvaluationError as exc:
            self.raise_error("error.execution", f"{expr.source!r}: {exc}")
        except Exception as exc:  # nothing may escape the core as a Python exception
            self.raise_error("error.execution", f"{expr.source!r}: internal error {exc!r}")
        raise BlockAbort

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
            raise BlockAbort
        try:
            result = location.write(self.datamodel, value, self.in_state)
        except Exception as exc:
            self.raise_error("error.execution", f"cannot assign to {location.source!r}: {exc}")
            raise BlockAbort from None
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
            raise BlockAbort
        if not datamodel_for(self.machine.datamodel).is_identifier(name):
            # Only a datamodel that reports bad names at run time lets one compile (test 457).
            self.raise_error("error.execution", f"cannot bind {name!r}: not a variable name")
            raise BlockAbort
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

    def initialize_data(self, data: DataNode) -> None:
        """Bind a ``<data>`` element's initial value (spec 5.3; errors are located at it)."""
        self.line = data.line
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
        """Run a ``<script>`` and record each of its writes as a ``DatamodelChange``."""
        try:
            writes = script.run(self.datamodel, self.in_state, _writable)
        except EvaluationError as exc:
            for write in getattr(exc, "writes", ()):
                self.record_write(write, c_index, owner)
            self.raise_error("error.execution", f"script: {exc}")
            raise BlockAbort from None
        except Exception as exc:
            self.raise_error("error.execution", f"script: internal error {exc!r}")
            raise BlockAbort from None
        for write in writes:
            self.record_write(write, c_index, owner)

    def record_write(self, write: Any, c_index: int | None, owner: Owner | None) -> None:
        """The ``DatamodelChange`` for one write a script made."""
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


def _writable(name: str) -> bool:
    return not name.startswith("_")
