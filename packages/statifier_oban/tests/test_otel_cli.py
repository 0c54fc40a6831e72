"""Tracing and logs of the command lines: ``--traceparent`` continues a caller's trace into
the jobs a command arms, ``--otel`` says in one line what to install when the SDK or an
exporter is missing, and ``--log-format json`` prints one object per line with the trace
and span ids of the job a worker ran.

The commands run in-process (``cli.main`` in a thread: it runs its own event loop) on the
package's fresh database, or, for the worker's log lines, as a real process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import statifier
import statifier_oban
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier import instrumentation
from statifier.cli import _commands, kit
from statifier_oban.cli import _main as cli
from statifier_oban.workers import TIMER_WORKER

from oban_support.cli import executions_on, run_cli
from oban_support.common import job_rows, wait_until
from oban_support.processes import Lines

UNREACHABLE = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=1"

HOLD = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="cli_hold" initial="waiting">
  <state id="waiting"><transition event="authorize" target="holding"/></state>
  <state id="holding">
    <onentry><send id="hold" event="hold.expired" delayexpr="hold"/></onentry>
    <transition event="hold.expired" target="expired"/>
  </state>
  <final id="expired"/>
  <datamodel><data id="hold" expr="'1h'"/></datamodel>
</scxml>"""
)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


async def test_send_with_a_traceparent_carries_the_callers_trace_into_its_timer(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BAGGAGE", "tenant=t-17")  # OpenTelemetry's environment carrier
    executions = await executions_on(pool, oban_client)
    execution_id = f"card_{uuid.uuid4().hex[:10]}"
    await executions.create(HOLD, execution_id=execution_id)
    status = await run_cli(
        "executions", "send", "--database-url", database_url, execution_id, "authorize",
        "--traceparent", TRACEPARENT, "--tracestate", "vendor=1",
    )  # fmt: skip
    assert status == 0
    assert instrumentation.current is None  # the command's tracing ends with it
    (row,) = await job_rows(
        pool, "worker = %s AND args->>'scope' = %s", [TIMER_WORKER, execution_id]
    )
    carried = row.meta["trace_context"]
    assert carried["traceparent"].split("-")[1] == TRACE_ID
    assert carried["traceparent"].endswith("-01")
    assert carried["tracestate"] == "vendor=1"
    assert carried["baggage"] == "tenant=t-17"


async def test_start_continues_the_trace_of_the_traceparent_in_its_environment(
    pool: AsyncConnectionPool,
    oban_client: Oban,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    executions = await executions_on(pool, oban_client)
    await executions.register(HOLD)
    execution_id = f"card_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("TRACEPARENT", TRACEPARENT)
    status = await run_cli(
        "executions", "start", "--database-url", database_url, "cli_hold",
        "--id", execution_id, "--event", "authorize",
    )  # fmt: skip
    assert status == 0
    (row,) = await job_rows(
        pool, "worker = %s AND args->>'scope' = %s", [TIMER_WORKER, execution_id]
    )
    assert row.meta["trace_context"]["traceparent"].split("-")[1] == TRACE_ID
    monkeypatch.delenv("TRACEPARENT")
    other = f"card_{uuid.uuid4().hex[:10]}"
    status = await run_cli(
        "executions", "start", "--database-url", database_url, "cli_hold",
        "--id", other, "--event", "authorize",
    )  # fmt: skip
    assert status == 0
    (row,) = await job_rows(pool, "worker = %s AND args->>'scope' = %s", [TIMER_WORKER, other])
    assert "trace_context" not in row.meta


def test_otel_without_the_sdk_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("opentelemetry.sdk.trace", "opentelemetry.sdk.metrics", "opentelemetry.sdk"):
        monkeypatch.setitem(sys.modules, name, None)
    worker = ["worker", "--database-url", UNREACHABLE, "--queue", "timers=1", "--otel"]
    assert cli.main(worker) == 1
    assert capsys.readouterr().err == (
        "statifier-oban worker: error: --otel exports spans and metrics through the "
        "OpenTelemetry SDK and an exporter: pip install 'statifier-oban[otel]' "
        "opentelemetry-sdk opentelemetry-exporter-otlp\n"
    )
    send = ["executions", "send", "--database-url", UNREACHABLE, "id", "go", "--otel"]
    assert cli.main(send) == 1
    assert "pip install 'statifier-oban[otel]' opentelemetry-sdk" in capsys.readouterr().err
    assert instrumentation.current is None


def test_an_exporter_that_is_not_installed_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    worker = ["worker", "--database-url", UNREACHABLE, "--queue", "timers=1", "--otel"]
    assert cli.main(worker) == 1
    assert capsys.readouterr().err == (
        "statifier-oban worker: error: OTEL_TRACES_EXPORTER=zipkin: no such exporter is "
        "installed: pip install opentelemetry-exporter-zipkin\n"
    )


def test_a_traceparent_without_the_api_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    for name in [name for name in sys.modules if name.startswith("statifier_oban.otel")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(statifier_oban, "otel", raising=False)
    send = ["executions", "send", "--database-url", UNREACHABLE, "id", "go"]
    assert cli.main([*send, "--traceparent", TRACEPARENT]) == 1
    assert capsys.readouterr().err == (
        "statifier-oban executions send: error: tracing needs OpenTelemetry's API: "
        "pip install 'statifier-oban[otel]'\n"
    )


async def test_a_worker_logs_json_lines_with_the_ids_of_the_job_it_ran(
    pool: AsyncConnectionPool, oban_client: Oban, database_url: str, tmp_path: Path
) -> None:
    executions = await executions_on(pool, oban_client)
    execution_id = f"card_{uuid.uuid4().hex[:10]}"
    await executions.create(HOLD, execution_id=execution_id, datamodel={"hold": "200ms"})
    await executions.step(execution_id, statifier.Event(name="authorize"))
    environment = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
    }
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-m", "statifier_oban.cli", "worker", "--database-url", database_url,
         "--queue", "timers=2", "--otel", "--log-format", "json"],
        cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    lines = Lines(process)
    try:
        lines.wait_for("running queues timers=2")

        async def expired() -> bool:
            return (await executions.get(execution_id)).status == "completed"

        await wait_until(expired, timeout=20, what="the hold expiring")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert process.stderr is not None
        logged = [json.loads(line) for line in process.stderr.read().splitlines()]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    (fired,) = [line for line in logged if line.get("event") == "statifier_oban.timer.fired"]
    assert fired["scope"] == execution_id
    assert fired["send_id"] == "hold"
    assert fired["logger"] == "statifier_oban.worker"
    assert fired["level"] == "INFO"
    assert len(fired["trace_id"]) == 32
    assert len(fired["span_id"]) == 16
    assert fired["message"].startswith("statifier_oban.timer.fired scope=")


def every_command(group: click.Group) -> Iterator[click.Command]:
    """Every command under ``group`` (lazy ones imported)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        if isinstance(command, click.Group):
            yield from every_command(command)
        else:
            yield command


def test_every_command_takes_log_format() -> None:
    for group in (_commands.statifier, cli.statifier_oban):
        for command in every_command(group):
            option = next(p for p in command.params if p.name == "log_format")
            assert isinstance(option, click.Option)
            assert option.envvar == kit.LOG_FORMAT_ENV
