"""Values: an execution row, and what a step answers.

A step answers one of ``Stepped`` (the event was driven and stored), ``AlreadyApplied``
(its key was applied before: nothing driven), ``Discarded`` (the execution is terminal:
nothing driven, SCXML 6.2) or ``Declined`` (the event's builder found it unwanted, e.g. the
answer of an invocation that is no longer live: nothing driven, SCXML 6.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Literal, get_args

from statifier.core.effects import Effect
from statifier.core.state import MachineState
from statifier.values import format_time

if TYPE_CHECKING:
    from ._journal import StoredEntry
    from .history import HistoryEntry

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


def utc_text(moment: datetime) -> str:
    """``moment`` as records write it: UTC ISO-8601 to the microsecond
    (``2025-01-31T09:30:00.250000Z``, ``statifier.values.format_time``)."""
    return format_time(moment, timespec="microseconds")


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
    changed the execution's position (create, steps, cancel, migrate). ``history_seq`` is
    the ``seq`` of its latest history entry (every transaction that changed it, parking
    included, counts; ``statifier_persistence.history``).
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
    history_seq: int = 0

    def __repr__(self) -> str:
        chart = self.chart_name or self.chart_identity[:24]
        return (
            f"<Execution {self.id} {self.status} chart={chart} steps={self.step_count} "
            f"updated={utc_text(self.updated_at)}>"
        )

    def to_json(self) -> dict[str, Any]:
        """The execution as a JSON object: the one shape of an execution record (the
        ``--json`` of ``statifier-oban executions`` prints it). Times are UTC ISO-8601."""
        parent = self.parent
        return {
            "id": self.id,
            "status": self.status,
            "chart": {
                "identity": self.chart_identity,
                "name": self.chart_name,
                "version": self.chart_version,
            },
            "metadata": dict(self.metadata),
            "parent": (
                None
                if parent is None
                else {
                    "execution_id": parent.execution_id,
                    "invoke_id": parent.invoke_id,
                    "index": parent.index,
                }
            ),
            "failure": None if self.failure is None else dict(self.failure),
            "outcome": None if self.outcome is None else dict(self.outcome),
            "step_count": self.step_count,
            "history_seq": self.history_seq,
            "created_at": utc_text(self.created_at),
            "updated_at": utc_text(self.updated_at),
        }


@dataclass(frozen=True, slots=True)
class Stepped:
    """The event (or the initial drive, or the cancel) was driven and stored.

    ``execution`` is the row as committed, ``state`` the new position, ``effects`` every
    effect the transaction performed, in order (self-sends drained in it included).
    ``transition_taken`` says whether the event's macrostep took a transition (None when
    the execution drove no event of its own: a creation, a cancel, a timer sent
    elsewhere); when it took none, ``unmatched`` is the notice, with a "did you mean"
    over the events the configuration accepts (``statifier.chart.matching``). ``entry``
    is the history entry the transaction wrote (None with history off).
    """

    execution: Execution
    state: MachineState
    effects: tuple[Effect, ...]
    transition_taken: bool | None = None
    unmatched: str | None = None
    _written: StoredEntry | None = field(default=None, repr=False, compare=False)

    @property
    def entry(self) -> HistoryEntry | None:
        """The history entry the transaction wrote (None with history off), read from what
        it stored when asked: a worker that never asks pays nothing for it."""
        return None if self._written is None else self._written.read()

    def __repr__(self) -> str:
        active = " ".join(self.state.active_leaf_ids()) or "-"
        taken = {True: ", transition taken", False: ", no transition taken", None: ""}
        return (
            f"<Stepped {self.execution.id} {self.execution.status} in {active}, "
            f"{len(self.effects)} effects{taken[self.transition_taken]}>"
        )


@dataclass(frozen=True, slots=True)
class AlreadyApplied:
    """A step with this ``key`` was applied before; nothing was driven this time."""

    execution: Execution
    key: str

    def __repr__(self) -> str:
        return f"<AlreadyApplied {self.execution.id} key={self.key!r}>"


@dataclass(frozen=True, slots=True)
class Discarded:
    """The execution is terminal (``status``); the event was dropped (SCXML 6.2)."""

    execution: Execution
    status: ExecutionStatus

    def __repr__(self) -> str:
        return f"<Discarded {self.execution.id} {self.status}>"


@dataclass(frozen=True, slots=True)
class Declined:
    """The event builder declined to build an event for this position (``reason``)."""

    execution: Execution
    reason: str

    def __repr__(self) -> str:
        return f"<Declined {self.execution.id} {self.reason!r}>"


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

    def __repr__(self) -> str:
        return f"<Page {len(self.executions)} executions, after={self.after!r}>"
