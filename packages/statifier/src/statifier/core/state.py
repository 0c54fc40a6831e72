"""``MachineState``: an execution's whole position, as an immutable value.

It holds no closures, tasks, timers or handles: everything a driver needs to carry an
execution across a restart is here, and ``statifier.core.position`` serializes it.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.chart.model import Machine
from statifier.core.events import Event

Status = Literal["running", "done"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MachineState:
    """The position of one execution of a ``Machine``.

    ``configuration`` is the set of active state indexes (the root is implicit).
    ``invocations`` maps ``(state_index, invoke_index)`` to the live invoke id.
    ``history`` maps a history state's index to the state indexes it recorded.
    ``datamodel`` maps variable names (system variables included) to JSON-like values;
    treat it as read-only. It is a ``dict``, or for a datamodel that keeps a stored form of
    its own (ECMAScript, ADR 22) a read-only mapping of plain values
    (``statifier.datamodel.StoredVariables``) whose stored form only positions read.
    """

    machine: Machine
    session_id: str
    configuration: frozenset[int]
    internal_queue: tuple[Event, ...]
    history: dict[int, tuple[int, ...]]
    entered: frozenset[int]
    states_to_invoke: tuple[int, ...]
    invocations: dict[tuple[int, int], str]
    invoke_counter: int
    send_counter: int
    timer_counter: int
    caller_context: Any
    datamodel: Mapping[str, Any]
    running: bool
    status: Status
    macrostep: int
    microstep: int
    round: int
    trace: bool
    max_macrostep_rounds: int | None
    invoke_types: frozenset[str] | None
    routes: Container[str] | None = None
    limits: MacrostepLimits = DEFAULT_LIMITS
    """The budgets of every macrostep (``statifier.budget``); rounds are
    ``max_macrostep_rounds``."""
    _datamodel_bound: tuple[Mapping[str, Any], Any] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """(derived) ``(datamodel, carried)``: what the call that made this state knows of that
    very datamodel, carried to the next call (a state with another datamodel starts
    afresh). ``carried`` is an upper bound of the written-out size of the chart's variables
    (an ``int``), or, for a datamodel that keeps its variables itself (ADR 22), what leads
    back to the engine that holds them. Never stored."""

    def configuration_ids(self) -> tuple[str, ...]:
        """Ids of every active state, in document order."""
        states = self.machine.states
        return tuple(states[i].id for i in sorted(self.configuration))

    def active_leaf_ids(self) -> tuple[str, ...]:
        """Ids of the active atomic states, in document order."""
        states = self.machine.states
        return tuple(states[i].id for i in sorted(self.configuration) if states[i].atomic)

    @property
    def final_configuration(self) -> tuple[str, ...]:
        """Where a finished execution ended: ``(final_id,)`` once it reached a top-level
        ``<final>``; ``()`` while it runs, and after a ``cancel`` that reached none.

        The core exits every state when an execution ends (SCXML ``exitInterpreter``), so
        ``configuration`` and ``active_leaf_ids()`` are empty then; this is what a test or
        a host asks instead. It is derived from ``entered`` (entering a top-level final
        ends the execution, so at most one of them is ever in it), so positions carry it
        without a field of its own, positions written before it existed included. The
        ``Done`` effect's ``configuration`` says the same for a completed execution, and
        for a cancelled one where it stood when it was cancelled.
        """
        if self.status != "done":
            return ()
        states = self.machine.states
        return tuple(states[i].id for i in _top_level_finals(self.machine) if i in self.entered)

    def is_active(self, state_id: str) -> bool:
        """Whether the state with this id is in the configuration."""
        index = self.machine.state_ids.get(state_id)
        return index is not None and index in self.configuration

    def live_invocations(self) -> dict[str, tuple[int, int]]:
        """Invoke id -> ``(state_index, invoke_index)`` of every live invocation."""
        return {invoke_id: key for key, invoke_id in self.invocations.items()}


_TOP_LEVEL_FINALS = "top_level_finals"


def _top_level_finals(machine: Machine) -> tuple[int, ...]:
    """Indexes of the ``<final>`` children of the root, in document order (memoized)."""
    found: tuple[int, ...] | None = machine._cache.get(_TOP_LEVEL_FINALS)
    if found is None:
        found = tuple(s.index for s in machine.states if s.kind == "final" and s.parent == 0)
        machine._cache[_TOP_LEVEL_FINALS] = found
    return found


class StateBuilder(MachineState):
    """A mutable object with exactly ``MachineState``'s layout (``statifier._slots``).

    The core builds a state on every call. A frozen dataclass sets each field through
    ``object.__setattr__``, which costs three times what plain slot stores do, so the core
    fills a ``StateBuilder`` and then turns it into the ``MachineState`` it is laid out as
    (``finish``); nothing else ever holds the builder.
    """

    # A subclass that adds no slots, so that ``finish`` swaps its class without CPython
    # comparing the slots' names (see ``statifier._slots``).
    __slots__ = ()
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__
    __init__ = object.__init__


def finish(builder: Any) -> MachineState:
    """The ``MachineState`` a fully filled ``StateBuilder`` stands for (the same object)."""
    builder.__class__ = MachineState
    state: MachineState = builder
    return state
