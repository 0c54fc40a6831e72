"""Values: an execution row, and what a step answers.

A step answers one of ``Stepped`` (the event was driven and stored), ``AlreadyApplied``
(its key was applied before: nothing driven), ``Discarded`` (the execution is terminal:
nothing driven, SCXML 6.2) or ``Declined`` (the event's builder found it unwanted, e.g. the
answer of an invocation that is no longer live: nothing driven, SCXML 6.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, get_args

from statifier.core.effects import Effect
from statifier.core.state import MachineState

ExecutionStatus = Literal["active", "completed", "failed", "cancelled", "needs_migration"]
"""Where an execution stands.

``active`` takes events; ``completed`` (the chart reached a top-level final state),
``failed`` (it ran away: round budget or self-send bound) and ``cancelled`` are terminal
for events; ``needs_migration`` is parked: not terminal, but it takes no event.
"""

STATUSES: Final[tuple[ExecutionStatus, ...]] = get_args(ExecutionStatus)
"""Every status, in the order above."""

TERMINAL: Final[frozenset[ExecutionStatus]] = frozenset({"completed", "failed", "cancelled"})
"""Statuses that discard every event (a ``failed`` execution can still be cancelled)."""


@dataclass(frozen=True, slots=True)
class ParentLink:
    """The invocation an execution was started for: its parent, invoke id and index.

    ``index`` is the child's place in a fan-out (None for a single child).
    """

    execution_id: str
    invoke_id: str
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Execution:
    """One stored execution, as read (the position itself is not part of it).

    ``metadata`` is the host's JSON object (treat it as read-only). ``failure`` says why a
    ``failed`` execution failed (``{"reason": ..., ...}``), else None. ``outcome`` is how a
    ``completed`` or ``cancelled`` execution ended: ``{"configuration": [state ids active
    at exit], "donedata": ...}`` (else None). ``step_count`` counts the transactions that
    changed the execution (create, steps, cancel).
    """

    id: str
    chart_identity: str
    chart_name: str | None
    chart_version: str | None
    status: ExecutionStatus
    metadata: Mapping[str, Any]
    parent: ParentLink | None
    failure: Mapping[str, Any] | None
    outcome: Mapping[str, Any] | None
    step_count: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Stepped:
    """The event (or the initial drive, or the cancel) was driven and stored.

    ``execution`` is the row as committed, ``state`` the new position, ``effects`` every
    effect the transaction performed, in order (self-sends drained in it included).
    """

    execution: Execution
    state: MachineState
    effects: tuple[Effect, ...]


@dataclass(frozen=True, slots=True)
class AlreadyApplied:
    """A step with this ``key`` was applied before; nothing was driven this time."""

    execution: Execution
    key: str


@dataclass(frozen=True, slots=True)
class Discarded:
    """The execution is terminal (``status``); the event was dropped (SCXML 6.2)."""

    execution: Execution
    status: ExecutionStatus


@dataclass(frozen=True, slots=True)
class Declined:
    """The event builder declined to build an event for this position (``reason``)."""

    execution: Execution
    reason: str


StepResult = Stepped | AlreadyApplied | Discarded | Declined
"""What ``Executions.step`` answers."""


@dataclass(frozen=True, slots=True)
class Decline:
    """What an event builder returns to drive nothing (the step answers ``Declined``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Page:
    """One page of ``Executions.list``: ``after`` continues it (None: no more pages)."""

    executions: tuple[Execution, ...]
    after: str | None
