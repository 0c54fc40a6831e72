"""The JSON API under ``/api``: executions started, stepped, read, listed, counted,
cancelled, parked and unparked, and its OpenAPI document. Every route needs a bearer
token.

Execution ids go in the path as they are (an id holding ``/`` is matched whole).
``Idempotency-Key`` on a start or an event is the step's key: the same key again is
answered ``already_applied`` and drives nothing.

(No ``from __future__ import annotations`` here: FastAPI reads the routes' annotations,
and some name values of the enclosing function, such as the largest page size.)
"""

from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from statifier_persistence import MAX_KEY_LENGTH

from ._auth import Gate
from ._models import (
    ErrorOut,
    EventRequest,
    ExecutionDetail,
    ExecutionPage,
    ExecutionSummary,
    HistoryOut,
    StartRequest,
    Status,
    StatusCounts,
    StepAnswer,
)
from ._service import Filters, Service, metadata_filter
from ._urls import execution_path

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "No valid bearer token"},
    404: {"model": ErrorOut, "description": "No such execution (or chart)"},
    409: {"model": ErrorOut, "description": "The execution is terminal, parked, or exists"},
    413: {"model": ErrorOut, "description": "The request body is too large"},
    422: {"model": ErrorOut, "description": "The input is not acceptable"},
    501: {"model": ErrorOut, "description": "The chart invokes a type this server cannot run"},
    503: {"model": ErrorOut, "description": "The database did not answer"},
}

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=MAX_KEY_LENGTH,
        pattern=r"^\S+$",
        description="Applied at most once: the same key again drives nothing",
    ),
]

_bearer_scheme = HTTPBearer(auto_error=False, description="A token from the server's settings")


def api_router(app: FastAPI, service: Service, gate: Gate, page_size: int) -> APIRouter:
    """The API's routes on ``service``, guarded by ``gate``."""

    def caller(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer_scheme)],
    ) -> str:
        return gate.bearer(request)

    router = APIRouter(prefix="/api", dependencies=[Depends(caller)], responses=_ERRORS)

    @router.get("/openapi.json", include_in_schema=False)
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    _changing_routes(router, service)
    _reading_routes(router, service, page_size)
    return router


def _changing_routes(router: APIRouter, service: Service) -> None:
    """Start, events, cancel, park, unpark."""

    @router.post(
        "/executions",
        status_code=201,
        response_model=StepAnswer,
        summary="Start an execution of a registered chart",
        responses={200: {"model": StepAnswer, "description": "A retried start (same key)"}},
    )
    async def start(
        body: StartRequest, request: Request, response: Response, key: IdempotencyKey = None
    ) -> StepAnswer:
        outcome, detail = await service.start(body, key)
        if outcome == "already_applied":
            response.status_code = 200
        response.headers["Location"] = str(
            request.url_for("get_execution", execution_id=execution_path(detail.id))
        )
        return StepAnswer(outcome=outcome, execution=detail)

    @router.post(
        "/executions/{execution_id:path}/events",
        response_model=StepAnswer,
        summary="Send an external event to an execution",
    )
    async def send_event(
        execution_id: str, body: EventRequest, key: IdempotencyKey = None
    ) -> StepAnswer:
        outcome, detail = await service.send(execution_id, body.name, body.data, key)
        return StepAnswer(outcome=outcome, execution=detail)

    @router.post(
        "/executions/{execution_id:path}/cancel",
        response_model=ExecutionDetail,
        summary="Cancel an execution (its onexit runs, its invocations stop)",
    )
    async def cancel(execution_id: str) -> ExecutionDetail:
        return await service.cancel(execution_id)

    @router.post(
        "/executions/{execution_id:path}/park",
        response_model=ExecutionDetail,
        summary="Park an active execution: it takes no event until unparked",
    )
    async def park(execution_id: str) -> ExecutionDetail:
        return await service.park(execution_id)

    @router.post(
        "/executions/{execution_id:path}/unpark",
        response_model=ExecutionDetail,
        summary="Make a parked execution active again",
    )
    async def unpark(execution_id: str) -> ExecutionDetail:
        return await service.unpark(execution_id)


def _reading_routes(router: APIRouter, service: Service, page_size: int) -> None:
    """List, counts, history, one execution."""
    max_page = service.executions.limits.max_page_size
    max_history = service.executions.history_settings.max_page_size

    @router.get("/executions", response_model=ExecutionPage, summary="List executions")
    async def list_executions(
        status: Status | None = None,
        chart: Annotated[str | None, Query(description="The chart's name")] = None,
        revision: Annotated[str | None, Query(description="A chart revision's identity")] = None,
        metadata: Annotated[
            str | None, Query(description="A JSON object the metadata must contain")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=max_page)] = page_size,
        after: Annotated[str | None, Query(description="The page after this id")] = None,
    ) -> ExecutionPage:
        filters = Filters(status, chart, revision, metadata_filter(metadata))
        page = await service.page(filters, limit=limit, after=after)
        return ExecutionPage(
            executions=[ExecutionSummary.of(e) for e in page.executions], after=page.after
        )

    @router.get("/counts", response_model=StatusCounts, summary="Count executions by status")
    async def counts(
        chart: str | None = None, revision: str | None = None, metadata: str | None = None
    ) -> StatusCounts:
        found = await service.counts(Filters(None, chart, revision, metadata_filter(metadata)))
        return StatusCounts(counts=found, total=sum(found.values()))

    @router.get(
        "/executions/{execution_id:path}/history",
        response_model=HistoryOut,
        summary="An execution's history: one entry per change, oldest first",
    )
    async def history(
        execution_id: str,
        after: Annotated[int | None, Query(ge=0, description="Entries after this seq")] = None,
        before: Annotated[
            int | None, Query(ge=1, description="The last entries before this seq")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=max_history)] = 100,
    ) -> HistoryOut:
        page = await service.history(execution_id, after=after, before=before, limit=limit)
        return HistoryOut(entries=[entry.to_json() for entry in page.entries], after=page.after)

    @router.get(
        "/executions/{execution_id:path}",
        response_model=ExecutionDetail,
        name="get_execution",
        summary="One execution: status, configuration, datamodel, timers, invocations",
    )
    async def get_execution(execution_id: str) -> ExecutionDetail:
        return await service.detail(execution_id)
