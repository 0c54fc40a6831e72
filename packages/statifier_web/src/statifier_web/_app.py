"""``create_app``: the ASGI application, the API and the console on one ``Executions``.

Routes: ``/health`` (no token), ``/api/...`` (bearer token; ``/api/openapi.json`` is the
OpenAPI document), ``/console/...`` (a login session), ``/basichttp/...`` (the BasicHTTP
locations of the executions, their capability the credential: ``_basichttp``), and ``/``
sends a browser to the console. Mount it anywhere (``Mount("/statifier", app)``): every
link it makes follows the mount. A change sent by a browser from another origin is refused
where the browser would send the credential by itself, and an open app answers loopback
names only (``_origin``). With tracing on (ADR 30), a request carrying W3C
``traceparent`` headers continues its caller's trace (``_tracing``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from statifier_oban import StatifierObanError
from statifier_persistence import Executions, PersistenceError

from ._api import api_router
from ._auth import Gate
from ._basichttp import ROUTE, BasicHTTPRoute
from ._body import TOO_LARGE_SCOPE_KEY, BodyLimit, too_large
from ._changes import ChangeFeed, NotifyFeed, PollingFeed
from ._console import Console
from ._diagrams import Diagrams
from ._errors import ApiError, api_error, logger
from ._models import Health
from ._origin import LoopbackHost, SameOrigin
from ._service import Service
from ._settings import WebSettings
from ._tracing import ContinueTrace

HEALTH_TIMEOUT_S: Final = 5.0
"""How long ``/health`` waits for the database."""

API_DESCRIPTION = """Durable SCXML executions over HTTP: start executions of registered
charts, send them events, read, list, count, cancel, park and unpark them.

Every route but `/health` needs `Authorization: Bearer TOKEN`. A start or an event with
an `Idempotency-Key` header is applied at most once: the same key again answers
`already_applied`. Errors are `{"error": {"code", "message", ...}}` with the status that
fits: 404 (unknown execution or chart), 409 (terminal, parked, exists), 413 (body too
large), 422 (bad input)."""


def _json_error(error: ApiError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def _on_api_error(request: Request, exc: Exception) -> JSONResponse:
    return _json_error(api_error(exc))


async def _on_invalid_request(request: Request, exc: Exception) -> JSONResponse:
    limit = request.scope.get(TOO_LARGE_SCOPE_KEY)
    if isinstance(limit, int):
        return _json_error(too_large(limit))
    problems: list[dict[str, Any]] = []
    if isinstance(exc, RequestValidationError):
        problems = [
            {"location": [str(part) for part in error["loc"]], "message": error["msg"]}
            for error in exc.errors()[:20]
        ]
    return _json_error(
        ApiError(422, "invalid_request", "the request is not valid", {"problems": problems})
    )


async def _on_http_error(request: Request, exc: Exception) -> JSONResponse:
    limit = request.scope.get(TOO_LARGE_SCOPE_KEY)
    if isinstance(limit, int):  # FastAPI answers a failed body read 400: it was too large
        return _json_error(too_large(limit))
    return _json_error(api_error(exc))


class _Headers:
    """Adds the headers every answer carries (``nosniff``; ``no-store`` on the API)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the headers to the answer's start."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {name.lower() for name, _ in headers}
                if b"x-content-type-options" not in names:
                    headers.append((b"x-content-type-options", b"nosniff"))
                if b"cache-control" not in names:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, sending)


async def _database_answers(executions: Executions) -> str:
    """``ok`` if a connection of the pool runs ``SELECT 1`` within the time bound."""
    pool = executions.pool
    if pool is None:
        return "no pool"
    try:
        async with asyncio.timeout(HEALTH_TIMEOUT_S), pool.connection() as conn:
            await conn.execute("SELECT 1")
    except (TimeoutError, psycopg.Error) as exc:  # the pool's own errors are psycopg's
        logger.warning("health: the database did not answer: %s", exc)
        return "unreachable"
    return "ok"


def default_feed(executions: Executions, settings: WebSettings) -> ChangeFeed:
    """``NotifyFeed`` when the executions write history (what it follows), else a
    ``PollingFeed`` every ``poll_interval_s``."""
    if executions.history_settings.enabled:
        return NotifyFeed(executions)
    return PollingFeed(executions, settings.poll_interval_s)


def create_app(
    executions: Executions, settings: WebSettings, *, feed: ChangeFeed | None = None
) -> FastAPI:
    """The API and the console over ``executions`` (whose executor is an
    ``ObanExecutor``), as ``settings`` say. ``feed`` tells the console's live pages when
    an execution changed (default: ``default_feed``)."""
    from . import __version__

    service = Service(executions, max_value_bytes=settings.max_body_bytes)
    gate = Gate(settings)
    app = FastAPI(
        title="statifier",
        version=__version__,
        description=API_DESCRIPTION,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.service = service
    app.state.settings = settings

    @app.get(
        "/health",
        response_model=Health,
        tags=["health"],
        summary="The server answers, and so does its database (503 if not)",
        responses={503: {"model": Health}},
    )
    async def health() -> JSONResponse:
        database = await _database_answers(executions)
        body = Health(status="ok" if database == "ok" else "unavailable", database=database)
        return JSONResponse(body.model_dump(), status_code=200 if database == "ok" else 503)

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> RedirectResponse:
        return RedirectResponse(str(request.url_for("console:executions")), status_code=303)

    app.include_router(api_router(app, service, gate, settings.page_size))
    inbound = BasicHTTPRoute(service, settings)
    app.add_route(ROUTE, inbound.receive, methods=["POST"], name="basichttp")
    console = Console(
        service,
        gate,
        settings,
        feed if feed is not None else default_feed(executions, settings),
        Diagrams(settings.diagram_timeout_s),
    )
    app.mount("/console", console.app(), name="console")
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(PersistenceError, _on_api_error)
    app.add_exception_handler(StatifierObanError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_invalid_request)
    app.add_exception_handler(HTTPException, _on_http_error)
    app.add_middleware(_Headers)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(ContinueTrace)
    # Outermost, so that a refused request reaches nothing. A browser sends the console's
    # session cookie by itself, and, to an open app, the one credential it has: being on
    # loopback. A bearer token or a BasicHTTP capability it never sends on its own.
    exempt = ("/basichttp/",) if settings.open else ("/basichttp/", "/api/")
    app.add_middleware(SameOrigin, exempt=exempt)
    if settings.open:
        app.add_middleware(LoopbackHost)
    return app
