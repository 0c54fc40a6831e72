"""statifier_web: an HTTP API and a web console for durable executions.

``create_app(executions, settings)`` is an ASGI application (FastAPI, on Starlette) over
an ``Executions`` of ``statifier_persistence`` whose executor is
``statifier_oban.executions.ObanExecutor``: the JSON API under ``/api`` (bearer tokens,
an OpenAPI document at ``/api/openapi.json``), the console under ``/console`` (a login
session, CSRF-checked forms, live updates) and ``/health``. It reaches executions only
through that ``Executions``, as any service of yours would. ``WebSettings`` holds the
tokens and the bounds; ``ChangeFeed`` is the seam through which the console hears that an
execution changed. ``statifier-oban web`` serves it with uvicorn (ADR 29).

Modules with a leading underscore are private.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._app import create_app
from ._changes import ChangeFeed, NotifyFeed, PollingFeed
from ._errors import ApiError, WebConfigError, WebError
from ._server import DEFAULT_HOST, DEFAULT_PORT, is_loopback, serve
from ._settings import (
    MAX_TOKEN_LENGTH,
    MIN_TOKEN_LENGTH,
    SESSION_SECRET_ENV,
    TOKENS_ENV,
    WebSettings,
    tokens_from_environment,
    tokens_from_file,
)

try:
    __version__ = _metadata.version("statifier-web")
    """The installed distribution's version (the one in ``pyproject.toml``)."""
except _metadata.PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0+unknown"

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_TOKEN_LENGTH",
    "MIN_TOKEN_LENGTH",
    "SESSION_SECRET_ENV",
    "TOKENS_ENV",
    "ApiError",
    "ChangeFeed",
    "NotifyFeed",
    "PollingFeed",
    "WebConfigError",
    "WebError",
    "WebSettings",
    "__version__",
    "create_app",
    "is_loopback",
    "serve",
    "tokens_from_environment",
    "tokens_from_file",
]
