"""Requests continue their callers' traces (ADR 30): the W3C ``traceparent``,
``tracestate`` and ``baggage`` headers of an API call make the caller's span the parent
of the spans its work starts, over real HTTP (a real uvicorn on loopback) against real
PostgreSQL, with the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry.context import attach, detach
from starlette.types import ASGIApp, Receive, Scope, Send
from statifier_web import WebSettings, create_app
from statifier_web._tracing import trace_headers

from tests.spans import Traced, providers, traced, tree
from web_support.rig import TOKEN, WebRig

PARENT = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
"""A caller's ``traceparent``: trace ``aaa...``, span ``bbb...``, sampled."""


def caller(tracing: Traced, name: str = "checkout") -> tuple[dict[str, str], str]:
    """The headers a traced caller sends (a span of service ``client``, ended before the
    request so nothing but the headers can carry it), and the span's id."""
    tracer = trace.get_tracer("client", tracer_provider=providers("client", tracing.exporter))
    headers: dict[str, str] = {}
    token = attach(baggage.set_baggage("tenant", "t-17"))
    try:
        with tracer.start_as_current_span(name) as span:
            propagate.inject(headers)
    finally:
        detach(token)
    return headers, format(span.get_span_context().span_id, "016x")


async def carried_context(web: WebRig, execution_id: str) -> Any:
    """The trace context the timer job of ``execution_id`` carries in its meta."""
    assert web.executions.pool is not None
    async with web.executions.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT meta->'trace_context' FROM oban_jobs WHERE args->>'scope' = %s",
            [execution_id],
        )
        [(carried,)] = await cursor.fetchall()
    return carried


async def test_an_api_call_continues_the_callers_trace(web: WebRig) -> None:
    with traced("web") as tracing:
        headers, caller_id = caller(tracing)
        assert set(headers) == {"traceparent", "baggage"}
        started = await web.client.post(
            "/api/executions", json={"chart": "card", "id": "card_t"}, headers=headers
        )
        sent = await web.client.post(
            "/api/executions/card_t/events", json={"name": "capture.requested"}, headers=headers
        )
        cancelled = await web.client.post("/api/executions/card_t/cancel", headers=headers)
        untraced = await web.client.post("/api/executions", json={"chart": "card", "id": "card_u"})
    assert [r.status_code for r in (started, sent, cancelled, untraced)] == [201, 200, 200, 201]
    spans = tracing.spans()
    assert tree(spans, attributes=["statifier.execution.id"]) == (
        "checkout (INTERNAL) [client]\n"
        "  Create:card (CLIENT) [web] statifier.execution.id=card_t\n"
        "    ScheduleTimer:authorization.expired (PRODUCER) [web]\n"
        "  Step:card (CLIENT) [web] statifier.execution.id=card_t\n"
        "    CancelTimer:hold (INTERNAL) [web]\n"
        "  Cancel:card (CLIENT) [web] statifier.execution.id=card_t\n"
        "Create:card (CLIENT) [web] statifier.execution.id=card_u\n"
        "  ScheduleTimer:authorization.expired (PRODUCER) [web]"
    )
    [caller_span] = tracing.named("checkout")
    assert caller_span.span_id == caller_id
    [own] = [s for s in spans if s.attributes.get("statifier.execution.id") == "card_u"]
    assert {s.trace_id for s in spans} == {caller_span.trace_id, own.trace_id}
    assert own.trace_id != caller_span.trace_id
    # The timer armed in the caller's trace carries it (and its baggage) to the worker.
    carried = await carried_context(web, "card_t")
    assert carried["traceparent"].split("-")[1] == caller_span.trace_id
    assert carried["baggage"] == "tenant=t-17"


@pytest.mark.parametrize(
    ("headers", "continued"),
    [
        ({"traceparent": PARENT}, True),
        ({"traceparent": PARENT, "tracestate": "vendor=1"}, True),
        ({"traceparent": "00-" + "0" * 32 + "-" + "b" * 16 + "-01"}, False),  # invalid id
        ({"traceparent": "not a trace context"}, False),
        ({"traceparent": PARENT, "tracestate": "v=" + "x" * 1022}, True),
        ({"traceparent": PARENT, "tracestate": "v=" + "x" * 1023}, False),  # over the bound
        ({"tracestate": "vendor=1"}, False),
    ],
)
async def test_only_a_valid_trace_context_is_continued(
    web: WebRig, headers: dict[str, str], continued: bool
) -> None:
    with traced("web") as tracing:
        started = await web.client.post("/api/executions", json={"chart": "card"}, headers=headers)
    assert started.status_code == 201, started.text
    [create] = tracing.named("Create:card")
    assert (create.trace_id == "a" * 32) is continued
    assert create.parent_id == ("b" * 16 if continued else None)


def test_the_trace_headers_of_a_request() -> None:
    def raw(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
        return [(name.encode(), value.encode()) for name, value in pairs]

    assert trace_headers(raw(("traceparent", PARENT), ("accept", "*/*"))) == {"traceparent": PARENT}
    both = raw(("traceparent", PARENT), ("tracestate", "a=1"), ("tracestate", "b=2"))
    assert trace_headers(both) == {"traceparent": PARENT, "tracestate": "a=1,b=2"}
    assert trace_headers(raw(("traceparent", PARENT), ("traceparent", PARENT))) is None
    assert trace_headers(raw(("tracestate", "a=1"), ("baggage", "k=v"))) is None
    assert trace_headers([]) is None


def server_span(app: ASGIApp, tracing: Traced) -> ASGIApp:
    """``app`` behind a server instrumentation of the host's: each request runs in a span
    of service ``host`` made from its ``traceparent``, as ``opentelemetry-instrumentation-asgi``
    makes one."""
    tracer = trace.get_tracer("host", tracer_provider=providers("host", tracing.exporter))

    async def instrumented(scope: Scope, receive: Receive, send: Send) -> None:
        headers = {name.decode(): value.decode() for name, value in scope["headers"]}
        context = propagate.extract(headers)
        with tracer.start_as_current_span(
            f"{scope['method']} {scope['path']}", context=context, kind=trace.SpanKind.SERVER
        ):
            await app(scope, receive, send)

    return instrumented


@contextlib.asynccontextmanager
async def client_of(app: ASGIApp) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client calling ``app`` in this process (no server)."""
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://web.test",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as client:
        yield client


async def test_a_request_already_in_a_server_span_stays_in_it(web: WebRig) -> None:
    app: Any = create_app(web.executions, WebSettings(tokens=(TOKEN,)))
    with traced("web") as tracing:
        async with client_of(server_span(app, tracing)) as client:
            started = await client.post(
                "/api/executions", json={"chart": "card"}, headers={"traceparent": PARENT}
            )
    assert started.status_code == 201, started.text
    assert tree(tracing.spans()) == (
        "POST /api/executions (SERVER) [host]\n"
        "  Create:card (CLIENT) [web]\n"
        "    ScheduleTimer:authorization.expired (PRODUCER) [web]"
    )
    [server] = tracing.named("POST /api/executions")
    assert server.parent_id == "b" * 16
    assert tracing.named("Create:card")[0].parent_id == server.span_id
