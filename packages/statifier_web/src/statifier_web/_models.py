"""The JSON shapes of the API (pydantic models, so the OpenAPI document is their schema),
built from the library's values in one place: the console renders the same objects.

Times are UTC. ``datamodel`` leaves out the system variables (``_event``, ``_sessionid``,
``_name``, ``_ioprocessors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from statifier.core.algorithm import SYSTEM_VARIABLES
from statifier.core.events import MAX_NAME_LENGTH
from statifier.core.state import MachineState
from statifier_oban.executions import PendingJob
from statifier_persistence import MAX_ID_LENGTH, Execution

Status = Literal["active", "completed", "failed", "cancelled", "needs_migration"]


def utc(moment: datetime) -> datetime:
    """``moment`` in UTC (a naive time is taken as UTC, as oban stores it)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


class ChartOut(BaseModel):
    """The chart revision an execution runs."""

    name: str | None
    version: str | None
    identity: str = Field(description="The revision's identity (sha256 of its canonical form)")


class ParentOut(BaseModel):
    """The invocation a child execution was started for."""

    execution_id: str
    invoke_id: str
    index: int | None = Field(description="The child's place in a fan-out (null: a single child)")


class ExecutionSummary(BaseModel):
    """An execution as listed: its row, without its position."""

    id: str
    status: Status
    chart: ChartOut
    step_count: int = Field(description="Transactions that changed its position")
    history_seq: int = Field(description="Transactions that changed it (its last history entry)")
    created_at: datetime
    updated_at: datetime
    metadata: dict[str, Any]
    parent: ParentOut | None
    failure: dict[str, Any] | None = Field(description="Why a failed execution failed")
    outcome: dict[str, Any] | None = Field(
        description="How a completed or cancelled execution ended (configuration, donedata)"
    )

    @classmethod
    def of(cls, execution: Execution) -> ExecutionSummary:
        """The summary of a row."""
        return cls(**_summary_fields(execution))


def _summary_fields(execution: Execution) -> dict[str, Any]:
    parent = execution.parent
    return {
        "id": execution.id,
        "status": execution.status,
        "chart": ChartOut(
            name=execution.chart_name,
            version=execution.chart_version,
            identity=execution.chart_identity,
        ),
        "step_count": execution.step_count,
        "history_seq": execution.history_seq,
        "created_at": utc(execution.created_at),
        "updated_at": utc(execution.updated_at),
        "metadata": dict(execution.metadata),
        "parent": (
            ParentOut(
                execution_id=parent.execution_id, invoke_id=parent.invoke_id, index=parent.index
            )
            if parent is not None
            else None
        ),
        "failure": dict(execution.failure) if execution.failure is not None else None,
        "outcome": dict(execution.outcome) if execution.outcome is not None else None,
    }


class TimerOut(BaseModel):
    """A pending delayed send of the execution (an oban job)."""

    send_id: str | None
    event: str | None
    due_at: datetime
    job_id: int
    job_state: str = Field(description="The job's oban state (scheduled, available...)")


class JobOut(BaseModel):
    """An unfinished invocation job."""

    job_id: int
    job_state: str


class InvocationOut(BaseModel):
    """A live invocation: its id, the state that invoked it, and its unfinished jobs."""

    invoke_id: str
    state: str
    jobs: list[JobOut]


class ExecutionDetail(ExecutionSummary):
    """One execution: its row, where it stands, its variables, timers and invocations."""

    configuration: list[str] = Field(description="Every active state id, in document order")
    active_states: list[str] = Field(description="The active atomic states")
    datamodel: dict[str, Any]
    timers: list[TimerOut]
    invocations: list[InvocationOut]

    @classmethod
    def build(
        cls, execution: Execution, state: MachineState, jobs: Sequence[PendingJob]
    ) -> ExecutionDetail:
        """The detail of a row, its loaded position and its pending jobs."""
        states = state.machine.states
        live = state.live_invocations()
        invocations = [
            InvocationOut(
                invoke_id=invoke_id,
                state=states[state_index].id,
                jobs=[
                    JobOut(job_id=job.job_id, job_state=job.state)
                    for job in jobs
                    if job.kind == "invocation" and job.invoke_id == invoke_id
                ],
            )
            for invoke_id, (state_index, _) in sorted(live.items())
        ]
        return cls(
            **_summary_fields(execution),
            configuration=list(state.configuration_ids()),
            active_states=list(state.active_leaf_ids()),
            datamodel={
                name: value
                for name, value in state.datamodel.items()
                if name not in SYSTEM_VARIABLES
            },
            timers=timers_of(jobs),
            invocations=invocations,
        )


def timers_of(jobs: Sequence[PendingJob]) -> list[TimerOut]:
    """The timer jobs among ``jobs``, earliest due first (as they come)."""
    return [
        TimerOut(
            send_id=job.send_id,
            event=job.event,
            due_at=utc(job.scheduled_at),
            job_id=job.job_id,
            job_state=job.state,
        )
        for job in jobs
        if job.kind == "timer"
    ]


class ExecutionPage(BaseModel):
    """One page of executions; ``after`` continues it (null: no more pages)."""

    executions: list[ExecutionSummary]
    after: str | None


class StatusCounts(BaseModel):
    """How many executions are in each status."""

    counts: dict[Status, int]
    total: int


class StartRequest(BaseModel):
    """Start an execution of a registered chart."""

    model_config = ConfigDict(extra="forbid")

    chart: str = Field(
        min_length=1,
        max_length=1024,
        description="The chart's name (its newest revision) or a revision's identity",
    )
    id: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ID_LENGTH,
        description="The execution id (default: derived from the Idempotency-Key, else fresh)",
    )
    datamodel: dict[str, Any] | None = Field(default=None, description="Variables to seed")
    metadata: dict[str, Any] | None = Field(
        default=None, description="Your JSON object, for filtering lists"
    )


class EventRequest(BaseModel):
    """An external event to step into the execution."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=MAX_NAME_LENGTH, pattern=r"^\S+$")
    data: Any = Field(default=None, description="Any JSON value: the event's _event.data")


class StepAnswer(BaseModel):
    """What a start or an event did: ``stepped`` (driven now) or ``already_applied`` (its
    Idempotency-Key was applied before: nothing driven this time)."""

    outcome: Literal["stepped", "already_applied"]
    execution: ExecutionDetail


class HistoryOut(BaseModel):
    """A page of an execution's history, oldest first: each entry is
    ``statifier_persistence.history.HistoryEntry.to_json()``, the one shape of an entry.
    ``after`` continues it (null: no entry after these yet)."""

    entries: list[dict[str, Any]]
    after: int | None


class ErrorDetail(BaseModel):
    """A failed request: a stable ``code``, a message, and context (execution id...)."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorOut(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


class Health(BaseModel):
    """Whether the server and its database answer."""

    status: Literal["ok", "unavailable"]
    database: str = Field(description="ok, or why not (unreachable)")
