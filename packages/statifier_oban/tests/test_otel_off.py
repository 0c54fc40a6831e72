"""Tracing off (statifier_oban.otel never instrumented): nothing is emitted, nothing of
OpenTelemetry is imported, and no job carries a trace context.

The import check runs in a fresh interpreter (this one has imported the SDK for other
tests): it imports every statifier package a worker imports, drives a live session
through timers and a cancel, and lists the ``opentelemetry`` modules loaded; then it sets
the SDK's global tracer provider with an in-memory exporter and drives again: not one
span may reach it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from statifier import instrumentation
from statifier.core.events import Event
from statifier_oban.workers import TIMER_WORKER

from oban_support.common import chart, database_fixture, job_rows, wait_until
from oban_support.executions import running_rig
from oban_support.harness import Servers, servers_fixture
from oban_support.processes import subprocess_env

database = database_fixture()
servers = servers_fixture()

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    import statifier, statifier_persistence, statifier_oban
    import statifier_oban.workers, statifier_oban.executions, statifier_oban.children
    import statifier_oban.cli, statifier.cli.kit, statifier.logs
    from statifier.runtime.session import Session

    CHART = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" name="off" initial="a">'
        '<state id="a"><onentry><send id="t" event="tick" delay="10ms"/></onentry>'
        '<transition event="tick" target="b"/></state>'
        '<state id="b"><transition event="go" target="a"/></state></scxml>'
    )

    async def drive():
        session = await Session.start(CHART)
        for _ in range(3):
            while not session.snapshot().is_active("b"):
                await asyncio.sleep(0.005)
            session.send_event("go")
        await session.cancel_and_wait()

    asyncio.run(drive())
    print("loaded:", sorted(m for m in sys.modules if m.startswith("opentelemetry")))
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    asyncio.run(drive())
    print("spans:", len(exporter.get_finished_spans()))
    """
)


def test_off_imports_nothing_of_opentelemetry_and_emits_nothing(
    pytestconfig: pytest.Config,
) -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script, no shell
        [sys.executable, "-c", SCRIPT],
        env=subprocess_env(pytestconfig),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["loaded: []", "spans: 0"]


HOLD = chart(
    """
    <state id="holding">
      <onentry><send id="hold" event="expire" delay="20ms"/></onentry>
      <transition event="expire" target="done"/>
    </state>
    <final id="done"/>
    """,
    name="off_hold",
)


async def test_off_no_job_carries_a_trace_context(servers: Servers) -> None:
    assert instrumentation.current is None
    async with running_rig(servers) as rig:
        created = await rig.executions.create(HOLD)
        execution_id = created.execution.id

        async def done() -> bool:
            return (await rig.executions.get(execution_id)).status == "completed"

        await wait_until(done, what="the hold fired")
        rows = await job_rows(
            rig.server.pool, "worker = %s AND args->>'scope' = %s", [TIMER_WORKER, execution_id]
        )
    assert len(rows) == 1
    assert "trace_context" not in rows[0].meta
    assert Event(name="x")  # the engine's values are untouched by the seam
