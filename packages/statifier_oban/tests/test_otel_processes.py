"""One trace from a caller's API calls through a timer fired by another worker process to
the execution's final step.

The test process runs statifier_web's real ASGI app (service ``api``; called through
httpx's ``ASGITransport``): a caller (service ``client``) starts an execution and sends it
an event, each request with the ``traceparent`` of the caller's span; the step arms a
timer. A real worker process (``oban_support.otel_worker``, service ``worker``, spans
written to a file) fires it into the execution, whose final state it reaches. Both
processes' spans together make one tree, compared as ``tests.spans.tree`` prints it.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from oban import Oban
from opentelemetry import propagate, trace
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions
from statifier_web import WebSettings, create_app

from oban_support.common import chart, database_fixture, forget_instance, unique, wait_until
from oban_support.harness import Servers, servers_fixture
from oban_support.processes import WorkerProcesses, running, worker_processes_fixture
from tests.spans import SPANS_FILE_ENV, providers, read_spans, traced, tree

database = database_fixture()
servers = servers_fixture()
workers = worker_processes_fixture("oban_support.otel_worker", "otel")

TOKEN = "otel-test-token-0123456789"  # noqa: S105 - a test token

HOLD = chart(
    """
    <state id="waiting"><transition event="authorize" target="holding"/></state>
    <state id="holding">
      <onentry><send id="hold" event="hold.expired" delay="300ms"/></onentry>
      <transition event="hold.expired" target="expired"/>
    </state>
    <final id="expired"/>
    """,
    name="card_hold",
)


async def test_a_request_a_timer_and_another_process_make_one_trace(
    servers: Servers, workers: WorkerProcesses, tmp_path: Path
) -> None:
    spans_file = tmp_path / "worker-spans.jsonl"
    workers.env[SPANS_FILE_ENV] = str(spans_file)
    pool = await servers.pool(max_size=4)
    client = Oban(pool=pool, name=unique("otel_client"))
    try:
        store = Executions(
            pool, executor=ObanExecutor(execution_config(client, timers_queue=workers.queue))
        )
        await store.register(HOLD)
        app = create_app(store, WebSettings(tokens=(TOKEN,)))
        with traced("api") as tracing:
            tracer = trace.get_tracer(
                "client", tracer_provider=providers("client", tracing.exporter)
            )
            with tracer.start_as_current_span("checkout") as request:
                headers = {"Authorization": f"Bearer {TOKEN}"}
                propagate.inject(headers)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://api.test", headers=headers
            ) as api:
                started = await api.post("/api/executions", json={"chart": "card_hold"})
                assert started.status_code == 201, started.text
                execution_id = started.json()["execution"]["id"]
                sent = await api.post(
                    f"/api/executions/{execution_id}/events", json={"name": "authorize"}
                )
                assert sent.status_code == 200, sent.text
        process, node = workers.spawn("w1")
        await running(pool, node, process)

        async def expired() -> bool:
            return (await store.get(execution_id)).status == "completed"

        await wait_until(expired, timeout=30, what="the hold fired by the worker process")
        await wait_until(
            lambda: any(s.name == "FireTimer:hold.expired" for s in read_spans(spans_file)),
            what="the worker's FireTimer span",
        )
    finally:
        forget_instance(client)
    spans = tracing.spans() + read_spans(spans_file)
    caller = format(request.get_span_context().span_id, "016x")
    assert {span.trace_id for span in spans} == {
        format(request.get_span_context().trace_id, "032x")
    }
    assert tree(spans, attributes=["statifier.execution.status"]) == (
        "checkout (INTERNAL) [client]\n"
        "  Create:card_hold (CLIENT) [api] statifier.execution.status=active\n"
        "  Step:card_hold (CLIENT) [api] statifier.execution.status=active\n"
        "    ScheduleTimer:hold.expired (PRODUCER) [api]\n"
        "      FireTimer:hold.expired (CONSUMER) [worker]\n"
        "        Fire:card_hold (CLIENT) [worker] statifier.execution.status=completed"
    )
    (fire,) = [span for span in spans if span.name == "Fire:card_hold"]
    assert fire.attributes["statifier.states"] == []
    assert fire.attributes["statifier.execution.id"] == execution_id
    assert caller in {span.parent_id for span in spans}
