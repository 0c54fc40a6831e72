"""What the API and the console do, once: each operation through ``Executions`` (and the
pending jobs through ``statifier_oban.executions.pending_jobs``), answering the models
of ``_models``. The app never reads or writes a table itself.

An operation raises what the library raises, or an ``ApiError``; the caller maps the
former with ``api_error``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from oban import Oban
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.values import ValueRefused, measure, parse_json
from statifier_oban.executions import ObanExecutor, PendingJob, pending_jobs
from statifier_persistence import (
    AlreadyApplied,
    ChartNotRegistered,
    Decline,
    Declined,
    Discarded,
    Execution,
    Executions,
    ExecutionStatus,
    HistoryPage,
    Page,
    PersistenceError,
    Stepped,
)

from ._errors import ApiError, WebConfigError, invalid, logger, terminal
from ._models import ExecutionDetail, ExecutionSummary, StartRequest, TimerOut, timers_of

KEYED_ID_PREFIX: Final = "idem_"
"""The id of an execution started with an ``Idempotency-Key`` and no id: this prefix and
the first 32 hex digits of the key's SHA-256, so a retried start names the same one."""

Outcome = Literal["stepped", "already_applied"]


@dataclass(frozen=True, slots=True)
class Filters:
    """What a list or a count is narrowed to (None: not narrowed)."""

    status: ExecutionStatus | None = None
    chart: str | None = None
    revision: str | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """One execution of the console's list: its row, where it stands, its timers."""

    execution: ExecutionSummary
    active_states: tuple[str, ...] | None
    """None when the position could not be read (the list still shows the row)."""
    timers: tuple[TimerOut, ...]


def keyed_id(key: str) -> str:
    """The execution id a start with ``Idempotency-Key: key`` and no id gets."""
    return KEYED_ID_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def unhandled(chart: str | None, invoke_types: list[str]) -> ApiError:
    """501: the chart invokes types this server has no handler for, so a step entering an
    invoking state would start nothing (give the server the workers' handlers)."""
    return ApiError(
        501,
        "invoke_handler_missing",
        f"chart {chart!r} invokes {', '.join(invoke_types)}, which this server has no "
        "handler for: run it with the workers' --handler and --invoke-queue options",
        {"invoke_types": invoke_types},
    )


def metadata_filter(text: str | None) -> dict[str, Any] | None:
    """A ``metadata`` filter as a query gives it: a JSON object (422 otherwise), or None."""
    if text is None:
        return None
    try:
        value = parse_json(text)
    except ValueRefused as exc:
        raise invalid(f"metadata is {exc}") from None
    if not isinstance(value, dict):
        raise invalid("metadata must be a JSON object")
    return value


def check_value(value: Any, what: str, limit: int) -> None:
    """A JSON value from a request, as the engine measures it (``statifier.values``)."""
    try:
        measure(value, limit)
    except ValueRefused as exc:
        raise invalid(f"{what}: {exc}") from None


class Service:
    """The operations on ``executions``; its executor must be an ``ObanExecutor`` (the
    pending timers and invocations are its jobs)."""

    def __init__(self, executions: Executions, *, max_value_bytes: int) -> None:
        executor = executions.executor
        if not isinstance(executor, ObanExecutor):
            raise WebConfigError(
                f"the executions run on {executor!r}: statifier_web needs an ObanExecutor"
            )
        self.executions = executions
        self.executor = executor
        self.oban: Oban = executor.config.oban
        self._max_value_bytes = max_value_bytes

    # -- reading -----------------------------------------------------------------------

    async def jobs(self, execution_id: str) -> list[PendingJob]:
        """The execution's pending timers and unfinished invocations."""
        return await pending_jobs(self.oban, execution_id)

    async def detail(self, execution_id: str) -> ExecutionDetail:
        """Everything about one execution (404 if there is none)."""
        execution, state = await self.executions.load(execution_id)
        return ExecutionDetail.build(execution, state, await self.jobs(execution.id))

    async def history(
        self,
        execution_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = 100,
    ) -> HistoryPage:
        """A page of the execution's history entries, oldest first (see
        ``Executions.history``: ``after`` pages forward, ``before`` backward)."""
        return await self.executions.history(execution_id, after=after, before=before, limit=limit)

    async def page(self, filters: Filters, *, limit: int, after: str | None) -> Page:
        """One page of executions by id."""
        return await self.executions.list(
            status=filters.status,
            chart=filters.chart,
            revision=await self._revision(filters.revision),
            metadata=filters.metadata,
            limit=limit,
            after=after,
        )

    async def counts(self, filters: Filters) -> dict[ExecutionStatus, int]:
        """Executions per status, narrowed as ``filters`` say (its status aside)."""
        return await self.executions.counts(
            chart=filters.chart,
            revision=await self._revision(filters.revision),
            metadata=filters.metadata,
        )

    async def rows(self, executions: tuple[Execution, ...]) -> list[Row]:
        """The console's rows of a page: each with its active states and timers."""
        rows = []
        for execution in executions:
            try:
                _, state = await self.executions.load(execution.id)
                active: tuple[str, ...] | None = state.active_leaf_ids()
            except PersistenceError as exc:  # the list shows the row; its page says why
                logger.warning("%s: its position cannot be read: %s", execution.id, exc)
                active = None
            jobs = await self.jobs(execution.id)
            rows.append(Row(ExecutionSummary.of(execution), active, tuple(timers_of(jobs))))
        return rows

    async def chart_names(self) -> list[str]:
        """The names of the registered charts that have a revision not retired."""
        revisions = await self.executions.revisions(limit=self.executions.limits.max_page_size)
        return sorted({r.name for r in revisions if r.name and r.retired_at is None})

    async def _revision(self, text: str | None) -> str | None:
        """The canonical identity of the revision ``text`` names (itself if none does)."""
        if text is None:
            return None
        try:
            return (await self.executions.revision(text)).identity
        except ChartNotRegistered:
            return text

    # -- changing ----------------------------------------------------------------------

    async def start(
        self, request: StartRequest, key: str | None
    ) -> tuple[Outcome, ExecutionDetail]:
        """Start an execution of the newest revision of ``request.chart``.

        With ``key`` the start is idempotent: the same key again answers the execution it
        started (``already_applied``); the id is derived from the key unless given.
        """
        if request.datamodel is not None:
            check_value(request.datamodel, "datamodel", self._max_value_bytes)
        machine = await self.executions.chart(request.chart)
        missing = self.executor.unhandled_invoke_types(machine)
        if missing:
            raise unhandled(machine.name, missing)
        execution_id = request.id if request.id is not None or key is None else keyed_id(key)
        created = await self.executions.create(
            machine,
            execution_id=execution_id,
            metadata=request.metadata,
            datamodel=request.datamodel,
            key=key,
        )
        if isinstance(created, AlreadyApplied):
            if created.execution.chart_name != machine.name:
                raise ApiError(
                    422,
                    "idempotency_key_reused",
                    "this Idempotency-Key started an execution of another chart",
                    {"execution_id": created.execution.id},
                )
            return "already_applied", await self.detail(created.execution.id)
        return "stepped", await self._after(created)

    async def send(
        self, execution_id: str, name: str, data: Any, key: str | None
    ) -> tuple[Outcome, ExecutionDetail]:
        """Step the external event ``name`` with ``data`` into the execution."""
        check_value(data, "data", self._max_value_bytes)
        result = await self.step(execution_id, Event(name=name, data=data), key)
        if isinstance(result, Stepped):
            return "stepped", await self._after(result)
        return "already_applied", await self.detail(execution_id)

    async def step(
        self, execution_id: str, event: Event, key: str | None
    ) -> Stepped | AlreadyApplied:
        """Step ``event`` into the execution (an API event, a BasicHTTP POST): 409 if it is
        terminal, 501 if its chart invokes a type this server cannot run."""

        def unless_unhandled(state: MachineState) -> Event | Decline:
            missing = self.executor.unhandled_invoke_types(state.machine)
            return Decline(", ".join(missing)) if missing else event

        result = await self.executions.step(execution_id, unless_unhandled, key=key)
        match result:
            case Stepped() | AlreadyApplied():
                return result
            case Discarded(execution=execution, status=status):
                raise terminal(execution.id, status)
            case Declined(execution=execution, reason=reason):
                raise unhandled(execution.chart_name, reason.split(", "))

    async def cancel(self, execution_id: str) -> ExecutionDetail:
        """Run the execution's cancel (409 if it is completed or cancelled already)."""
        result = await self.executions.cancel(execution_id)
        if isinstance(result, Discarded):
            raise terminal(result.execution.id, result.status)
        return await self._after(result)

    async def park(self, execution_id: str) -> ExecutionDetail:
        """Park an active execution (it takes no event until unparked)."""
        await self.executions.park(execution_id)
        return await self.detail(execution_id)

    async def unpark(self, execution_id: str) -> ExecutionDetail:
        """Make a parked execution active again."""
        await self.executions.unpark(execution_id)
        return await self.detail(execution_id)

    async def _after(self, stepped: Stepped) -> ExecutionDetail:
        execution = stepped.execution
        return ExecutionDetail.build(execution, stepped.state, await self.jobs(execution.id))
