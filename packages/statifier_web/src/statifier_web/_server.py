"""Serving the app with uvicorn: on loopback unless told otherwise, under a base path if
asked, until SIGINT or SIGTERM.

An app that runs ``open`` (no token) is served on a loopback address only: anyone who can
reach a public address could otherwise cancel executions.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Final

import uvicorn
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from ._errors import WebConfigError

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)

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

    ``on_ready`` is called with the app's URL (``site_url``) once the server listens. Raises
    ``WebConfigError`` for an ``open`` app on an address that is not loopback, and for an
    address it cannot listen on (taken, not this machine's).
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
        # Warnings and errors only: ``on_ready`` says where it serves (uvicorn's own line
        # would print port 0 as given), and an access log is the proxy's job.
        log_level="warning",
        access_log=False,
        server_header=False,
        lifespan="off",
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[_listening(host, port)]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    if server.started and on_ready is not None:
        on_ready(site_url(server, check_base_path(base_path)))
    await task


def _listening(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (uvicorn would exit the process on a failure)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        raise WebConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


class _Server(uvicorn.Server):
    """uvicorn's server, stopping gracefully on SIGINT or SIGTERM (a second SIGINT forces
    it) and then returning: a stop asked for ends the process with status 0, as the
    worker's does, instead of uvicorn raising the signal again once it stopped."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Install the stop handlers for the run (main thread only), then restore."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def site_url(server: uvicorn.Server, base_path: str) -> str:
    """The app's URL on the address ``server`` listens on (its console is under
    ``/console/``, its API under ``/api/``)."""
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{base_path}"
