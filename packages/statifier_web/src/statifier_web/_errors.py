"""The errors of statifier_web, and the HTTP answer each error of the library gets.

``WebError`` is the base of everything this package raises. ``WebConfigError`` is a
setting refused at construction (no token, a short token, a bad bound). ``ApiError`` is
an answer to a request that failed: an HTTP status, a stable ``code`` a client can
branch on, a message for a person and the context (the execution id, its status).
:func:`api_error` maps what ``Executions`` raises onto those answers, once, for the JSON
API and the console alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from statifier_oban import StatifierObanError
from statifier_persistence import (
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    CorruptExecution,
    ExecutionExists,
    ExecutionNotFound,
    IdentityMismatch,
    InvalidArgument,
    InvalidTransition,
    NeedsMigration,
    NotConnected,
    NotInstalled,
    PersistenceError,
    PositionTooLarge,
    StoreError,
    UnstorablePosition,
)

logger = logging.getLogger("statifier_web")

_HTTP_CODES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}


class WebError(Exception):
    """Base class of every error statifier_web raises."""


class WebConfigError(WebError, ValueError):
    """A setting of the app or the server is refused (the message says which and why)."""


class ApiError(WebError):
    """A request failed: ``status`` (HTTP), ``code`` (stable, for clients), ``message`` and
    ``context`` (JSON values: the execution id, its status...)."""

    def __init__(
        self, status: int, code: str, message: str, context: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.context = dict(context or {})

    def body(self) -> dict[str, Any]:
        """The JSON body of the answer: ``{"error": {"code", "message", ...context}}``."""
        return {"error": {"code": self.code, "message": self.message, **self.context}}


def not_found(execution_id: str) -> ApiError:
    """404 for an execution id nothing answers to."""
    return ApiError(
        404, "execution_not_found", f"no execution {execution_id!r}", {"execution_id": execution_id}
    )


def terminal(execution_id: str, status: str) -> ApiError:
    """409: the execution is terminal and takes no event (SCXML 6.2) nor cancel."""
    return ApiError(
        409,
        "execution_terminal",
        f"execution {execution_id!r} is {status}",
        {"execution_id": execution_id, "status": status},
    )


def invalid(message: str, **context: Any) -> ApiError:
    """422 for input that is well-formed but not acceptable."""
    return ApiError(422, "invalid_argument", message, context)


def api_error(exc: Exception) -> ApiError:  # noqa: C901 - one case per kind of error
    """The answer a request gets for what the library raised (an unknown kind: 500).

    Server-side faults (a corrupt row, the database unreachable) are logged here with
    their traceback; their answers say what failed without the details.
    """
    match exc:
        case ApiError():
            return exc
        case HTTPException():  # the framework's own: no route, bad method, garbled form
            code = _HTTP_CODES.get(exc.status_code, "http_error")
            return ApiError(exc.status_code, code, str(exc.detail))
        case ExecutionNotFound():
            return not_found(exc.execution_id)
        case NeedsMigration():
            execution_id = exc.execution.id
            return ApiError(
                409,
                "execution_parked",
                f"execution {execution_id!r} is parked (needs_migration): unpark it first",
                {"execution_id": execution_id, "status": exc.execution.status},
            )
        case InvalidTransition():
            return ApiError(
                409,
                "invalid_transition",
                str(exc),
                {"execution_id": exc.execution_id, "status": exc.status},
            )
        case ExecutionExists():
            return ApiError(409, "execution_exists", str(exc), {"execution_id": exc.execution_id})
        case ChartNotRegistered():
            return ApiError(404, "chart_not_registered", str(exc), {"chart": exc.identity})
        case ChartRetired():
            return ApiError(409, "chart_retired", str(exc), {"chart": exc.identity})
        case InvalidArgument() | PositionTooLarge() | UnstorablePosition():
            return invalid(str(exc))
        case NotInstalled():
            logger.error("the schema is not installed", exc_info=exc)
            return ApiError(503, "schema_not_installed", str(exc))
        case NotConnected() | StoreError() | StatifierObanError():
            logger.error("the store failed", exc_info=exc)
            return ApiError(503, "store_unavailable", "the database did not answer: try again")
        case CorruptExecution() | IdentityMismatch() | ChartUnusable() | PersistenceError():
            logger.error("an execution cannot be used", exc_info=exc)
            return ApiError(500, "execution_unusable", str(exc))
    logger.error("unexpected error", exc_info=exc)
    return ApiError(500, "internal_error", "the server failed; its log has the details")
