"""Bounded request bodies: an ASGI middleware that answers 413 past ``max_bytes``.

A declared ``Content-Length`` over the bound is refused before anything is read; a body
without one (chunked) is counted as it arrives and refused as soon as it passes the bound,
so no handler ever holds more than ``max_bytes`` of it.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import ApiError

TOO_LARGE_SCOPE_KEY = "statifier_web.body_too_large"
"""Set in the request's scope (to the bound) once its body passed the bound: a framework
that turns the reading error into an answer of its own (FastAPI: a 400) is answered 413
by the app's error handler instead."""


class _TooLarge(Exception):
    """The body passed the bound while a handler was reading it."""


def too_large(max_bytes: int) -> ApiError:
    """413 for a body over ``max_bytes``."""
    return ApiError(
        413,
        "request_too_large",
        f"the request body is over the {max_bytes} byte limit",
        {"limit": max_bytes},
    )


class BodyLimit:
    """Refuses request bodies over ``max_bytes`` with a typed 413 answer."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on with a counting ``receive``; 413 past the bound."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await _refuse(send, self.max_bytes)
            return
        seen = 0
        started = False

        async def counting() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    scope[TOO_LARGE_SCOPE_KEY] = self.max_bytes
                    raise _TooLarge
            return message

        async def watching(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting, watching)
        except _TooLarge:
            if started:  # the handler answered before it read all of it: nothing to add
                raise
            await _refuse(send, self.max_bytes)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, max_bytes: int) -> None:
    body = json.dumps(too_large(max_bytes).body()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
