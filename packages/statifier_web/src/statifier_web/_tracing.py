"""A request continues its caller's trace: an ASGI middleware reading the W3C
``traceparent``, ``tracestate`` and ``baggage`` headers (ADR 30).

When tracing is on (``statifier_oban.otel.instrument()``, or ``statifier-oban web
--otel``), the spans a request's work starts (``Create``, ``Step``, ``Cancel``...) are
children of the caller's span, and the timers and invocations that work arms carry the
caller's trace on to the workers that run them. The headers are read through
``statifier.instrumentation.continued``, which hands them to the installed propagator.

A request that already runs inside a span (a server instrumentation of the host's, such
as ``opentelemetry-instrumentation-asgi``, made it from the same headers) is left in it:
that span is the caller's child already. When tracing is off the middleware costs one
attribute read per request and reads no header.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send
from statifier import instrumentation

TRACE_HEADERS: Final = (b"traceparent", b"tracestate", b"baggage")
"""The request headers a caller's trace context is read from (W3C Trace Context and
Baggage; ASGI gives header names in lower case)."""


def trace_headers(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str] | None:
    """The caller's trace context among a request's ``headers`` (None: there is none).

    A repeated ``tracestate`` or ``baggage`` is one list, its values joined with commas
    (RFC 9110 list headers, as W3C Trace Context says); a repeated ``traceparent`` is
    ambiguous, so no trace is continued.
    """
    found: dict[str, list[str]] = {}
    for name, value in headers:
        if name in TRACE_HEADERS:
            found.setdefault(name.decode("latin-1"), []).append(value.decode("latin-1"))
    parents = found.get("traceparent")
    if parents is None or len(parents) != 1:
        return None
    return {name: ",".join(values) for name, values in found.items()}


class ContinueTrace:
    """Makes the caller's trace context current while a request is handled (see the
    module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, inside the caller's trace context when it has one."""
        tracer = instrumentation.current
        if tracer is None or scope["type"] != "http" or tracer.ids() is not None:
            await self.app(scope, receive, send)
            return
        carrier = trace_headers(scope["headers"])
        if carrier is None:
            await self.app(scope, receive, send)
            return
        with tracer.continued(carrier):
            await self.app(scope, receive, send)
