"""A traced durable execution: a request, the hold it arms, and the hold firing, one trace.

Run from the repository root::

    uv run python examples/traced_execution.py

``statifier_oban.otel.instrument`` traces through an OpenTelemetry SDK tracer provider (its
spans kept in memory here; an exporter would send them to a collector). A request handler
continues the caller's trace from its ``traceparent`` header and creates a card
authorization, whose hold (seven days in the chart, 300 ms here) is a timer job. The job
carries the trace context; when this process, running the timers queue, fires it, the
firing is a child of the request's span. The example prints the trace as a tree. It starts
a throwaway PostgreSQL of its own and removes it at the end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import statifier
from oban import Oban
from opentelemetry import propagate
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from psycopg_pool import AsyncConnectionPool
from statifier import instrumentation
from statifier_oban import otel
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config, use
from statifier_oban.schema import install
from statifier_persistence import Executions

SOURCE = Path(__file__).with_name("card_authorization.scxml").read_text()
machine = statifier.compile(SOURCE.replace('delay="7d"', 'delay="300ms"'))


async def main(url: str) -> None:
    """The story, on the PostgreSQL database at ``url``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.instrument(provider)  # from here on, statifier is traced (None: the global provider)
    try:
        await traced_story(url, provider)
    finally:
        otel.uninstrument()
    spans = [otel.SpanRecord.of(span) for span in exporter.get_finished_spans()]
    print(otel.span_tree(spans, attributes=["statifier.execution.status"]))


async def traced_story(url: str, provider: TracerProvider) -> None:
    """A request creates a card; its hold fires in this process's timers queue."""
    await install(url)
    async with AsyncConnectionPool(url, open=False) as pool:
        oban = Oban(pool=pool, queues={"timers": 10})
        executions = Executions(
            pool, executor=ObanExecutor(execution_config(oban, timers_queue="timers"))
        )
        use(executions)
        await oban.start()

        # The caller: its span, and the header it sends with its request.
        with provider.get_tracer("client").start_as_current_span(
            "POST /cards", kind=SpanKind.CLIENT
        ):
            headers: dict[str, str] = {}
            propagate.inject(headers)

        # The request handler: continue the caller's trace, create the card.
        with instrumentation.continued(headers):
            await executions.create(machine, execution_id="card_c")

        while (await executions.get("card_c")).status == "active":
            await asyncio.sleep(0.05)  # the hold fires: a step in a job of the timers queue
        await oban.stop()


if __name__ == "__main__":
    server = EmbeddedPostgres.start()  # a throwaway PostgreSQL; or the URL of your own
    try:
        asyncio.run(main(server.url))
    finally:
        server.stop()
