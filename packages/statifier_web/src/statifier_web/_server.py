"""Serving the app with uvicorn: on loopback unless told otherwise, under a base path if
asked, until SIGINT or SIGTERM.

An app that runs ``open`` (no token) is served on a loopback address only: anyone who can
reach a public address could otherwise cancel executions.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable
from typing import Final

import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from ._errors import WebConfigError

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8000


def is_loopback(host: str) -> bool:
    """Whether ``host`` names a loopback address (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_base_path(base_path: str) -> str:
    """``""`` or ``/a/path`` without a trailing slash; ``WebConfigError`` otherwise."""
    if base_path in ("", "/"):
        return ""
    if not base_path.startswith("/") or base_path.endswith("/") or "//" in base_path:
        raise WebConfigError(f"a base path is like /statifier, not {base_path!r}")
    return base_path


def mounted(app: FastAPI, base_path: str) -> ASGIApp:
    """``app`` under ``base_path`` (``/`` then sends a browser there)."""
    base_path = check_base_path(base_path)
    if not base_path:
        return app

    async def to_base(request: Request) -> RedirectResponse:
        return RedirectResponse(base_path + "/", status_code=303)

    return Starlette(routes=[Route("/", to_base), Mount(base_path, app)])


async def serve(
    app: FastAPI,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    base_path: str = "",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``app`` (from ``create_app``) until SIGINT or SIGTERM.

    ``on_ready`` is called with the console's URL once the server listens. Raises
    ``WebConfigError`` for an ``open`` app on an address that is not loopback.
    """
    settings = app.state.settings
    if settings.open and not is_loopback(host):
        raise WebConfigError(
            f"an open app (no token) is served on loopback only, not on {host!r}: "
            "give tokens to serve it there"
        )
    config = uvicorn.Config(
        mounted(app, base_path),
        host=host,
        port=port,
        log_level="info",
        server_header=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started and on_ready is not None:
        on_ready(console_url(server, check_base_path(base_path)))
    await task


def console_url(server: uvicorn.Server, base_path: str) -> str:
    """The console's URL on the address ``server`` listens on."""
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{base_path}/console/"
