"""Which requests the app takes by where they come from (ADR 29's amendment).

An open app (no token) has one credential: being reached on loopback. Every page the
operator's browser has open shares it, so two ASGI middlewares keep other sites out.

``LoopbackHost`` (open apps only) answers a request only when its ``Host`` names a
loopback address: ``localhost``, ``127.0.0.0/8`` or ``[::1]``, with any port or none (a
proxy on the same host may forward its own). A page whose DNS name was rebound to
127.0.0.1 reaches the socket, but its browser still sends that name: 400.

``SameOrigin`` refuses (403) a request that may change something (any method but GET,
HEAD and OPTIONS) sent by a browser from another origin: a plain cross-site form needs
no CORS preflight, and would otherwise cancel an execution. Browsers say where a request
comes from in ``Sec-Fetch-Site``; when it is there, only ``same-origin`` and ``none`` (the
user asked for it) pass. A browser that does not send it sends ``Origin`` with every
POST, which must then be the origin the request was sent to (``Host``). A request with
neither comes from no browser (curl, a script), which could send any header it liked:
it passes. ``create_app`` applies it wherever a browser sends the credential by itself:
everything but ``/basichttp`` in an open app, the console (its session cookie) in an app
with tokens. A bearer token or a BasicHTTP capability is never sent by a browser on its
own, so routes guarded by one are left alone.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from statifier.values import clip

from ._errors import ApiError, logger

SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing, and so are taken from any origin."""

TRUSTED_FETCH_SITES: Final = frozenset({"same-origin", "none"})
"""``Sec-Fetch-Site`` values of a request the app's own pages (or the user) made."""

_SHOWN_CHARS: Final = 200
"""Characters of a refused request's header or path a log line shows."""


def loopback_host(host: str | None) -> bool:
    """Whether a ``Host`` header names a loopback address (``localhost``, 127.0.0.0/8,
    ``[::1]``), with a port or without."""
    if not host:
        return False
    if host.startswith("["):
        literal, bracket, rest = host[1:].partition("]")
        if not bracket or not _port_or_nothing(rest):
            return False
        try:
            return ipaddress.IPv6Address(literal).is_loopback
        except ValueError:
            return False
    name, colon, port = host.partition(":")
    if colon and not _port_or_nothing(":" + port):
        return False
    if name.lower() == "localhost":
        return True
    try:
        return ipaddress.IPv4Address(name).is_loopback
    except ValueError:
        return False


def _port_or_nothing(text: str) -> bool:
    if not text:
        return True
    port = text.removeprefix(":")
    return port != text and 0 < len(port) <= 5 and port.isascii() and port.isdigit()


def cross_origin(headers: Headers) -> str | None:
    """Why a request that may change something comes from another origin (the header
    that says so), or None when it does not (see the module docstring)."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return None if site.lower() in TRUSTED_FETCH_SITES else f"Sec-Fetch-Site: {site}"
    origin = headers.get("origin")
    if origin is None:
        return None
    host = headers.get("host", "").lower()
    if host and origin.lower() in (f"http://{host}", f"https://{host}"):
        return None
    return f"Origin: {origin}"


async def _refuse(scope: Scope, receive: Receive, send: Send, error: ApiError) -> None:
    response = JSONResponse(
        error.body(),
        status_code=error.status,
        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"},
    )
    await response(scope, receive, send)


class LoopbackHost:
    """Answers requests for a loopback name only (400 otherwise): for an open app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a request for a loopback name on; refuse any other."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host")
        if loopback_host(host):
            await self.app(scope, receive, send)
            return
        shown = clip(repr(host), _SHOWN_CHARS)
        # Said in the log as well: behind a proxy that forwards the public name, every
        # request is refused, and the operator must learn why.
        logger.warning(
            "refused a request for host %s: an app without a token answers loopback names "
            "only (a proxy must send Host: 127.0.0.1:PORT)",
            shown,
        )
        message = (
            f"this server answers requests for localhost, 127.0.0.1 or [::1] only, not {shown}"
        )
        await _refuse(scope, receive, send, ApiError(400, "host_not_allowed", message))


class SameOrigin:
    """Refuses (403) a request that may change something, sent by a browser from another
    origin; paths under the ``exempt`` prefixes (relative to the app) are left alone."""

    def __init__(self, app: ASGIApp, exempt: Iterable[str] = ()) -> None:
        self.app = app
        self.exempt = tuple(exempt)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on unless it is a change from another origin."""
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        path = _app_path(scope)
        reason = None if path.startswith(self.exempt) else cross_origin(Headers(scope=scope))
        if reason is None:
            await self.app(scope, receive, send)
            return
        logger.warning(
            "refused %s %s from another origin (%s)",
            scope["method"],
            clip(repr(path), _SHOWN_CHARS),  # decoded: it may hold a line break
            clip(repr(reason), _SHOWN_CHARS),
        )
        message = "a change sent from another site's page is refused: use this server's own pages"
        await _refuse(scope, receive, send, ApiError(403, "cross_origin", message))


def _app_path(scope: Scope) -> str:
    """The request's path under the app (a mount's prefix, its ``root_path``, taken off)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path
