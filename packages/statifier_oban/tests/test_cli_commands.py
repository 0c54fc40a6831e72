"""``statifier-oban pending`` and ``statifier-oban worker`` against a real PostgreSQL.

``pending`` runs in-process (through ``cli.main`` in a thread: it runs its own event
loop). ``worker`` runs as a subprocess, as it would in production: it imports a host
module from its working directory, fires a due timer through that module's delivery,
and stops gracefully on SIGTERM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import click
import psycopg
import pytest
from oban import Oban
from statifier.core.effects import Cancel, SendDelayed
from statifier_oban import Config
from statifier_oban._names import TIMER_WORKER
from statifier_oban.cli import _main as cli
from statifier_oban.cli import _worker
from statifier_oban.timers import _schedule

from oban_support.processes import Lines
from oban_support.worker_process import wait_for_job

UNREACHABLE = "postgresql://nobody@/x?host=/nonexistent-statifier-socket-dir&password=hunter2"

HOST_MODULE = '''
"""A host module for the worker test: its delivery records every fired timer."""

import os

import psycopg
from statifier_oban import Delivered

print("cli_worker_host imported", flush=True)


class RecordingDelivery:
    """Writes (scope, event, pid) into worker_deliveries, then answers Delivered."""

    def deliver(self, scope, effect):
        with psycopg.connect(os.environ["WORKER_TEST_URL"], autocommit=True) as conn:
            conn.execute(
                "INSERT INTO worker_deliveries VALUES (%s, %s, %s)",
                (scope, effect.event, os.getpid()),
            )
        return Delivered()
'''


def send_delayed(ordinal: int, delay_ms: int, send_id: str = "hold") -> SendDelayed:
    """A schedulable delayed send to the session itself."""
    return SendDelayed(
        event="authorization.expired",
        target=None,
        type=None,
        data=None,
        send_id=send_id,
        delay_ms=delay_ms,
        c_index=0,
        owner=("onentry", 1, 0),
        ordinal=ordinal,
        id_from_author=True,
        caller_context=None,
        macrostep=0,
        microstep=0,
        round=0,
    )


def scope(kind: str) -> str:
    """A scope no other test uses."""
    return f"{kind}_{uuid.uuid4().hex[:10]}"


# -- pending -----------------------------------------------------------------------------------


async def test_pending_prints_a_count_per_scope(
    oban_client: Oban, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = Config(oban=oban_client, timers_queue="timers")
    two, cancelled, none = scope("two"), scope("cancelled"), scope("none")
    await _schedule.schedule(config, two, send_delayed(1, 60_000))
    await _schedule.schedule(config, two, send_delayed(2, 60_000, send_id="reminder"))
    await _schedule.schedule(config, cancelled, send_delayed(1, 60_000))
    cancel = Cancel(
        send_id="hold",
        c_index=1,
        owner=("onexit", 1, 0),
        ordinal=2,
        caller_context=None,
        macrostep=1,
        microstep=1,
        round=0,
    )
    assert await _schedule.cancel_timers(config, cancelled, cancel) == 1

    code = await asyncio.to_thread(
        cli.main, ["pending", "--database-url", database_url, two, cancelled, none, two]
    )

    out, err = capsys.readouterr()
    assert code == 0, err
    assert out == f"{two}\t2\n{cancelled}\t0\n{none}\t0\n"
    assert err == ""


def test_pending_on_an_unreachable_database_is_one_line_and_status_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["pending", "--database-url", UNREACHABLE, "some_scope"]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("statifier-oban pending: error: cannot connect to ")
    assert err.count("\n") == 1
    assert "hunter2" not in err


def test_pending_without_the_schema_says_to_install_it(
    make_database: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_database("template0")

    assert cli.main(["pending", "--database-url", url, "some_scope"]) == 1

    err = capsys.readouterr().err
    assert "lacks oban_jobs" in err
    assert "statifier-oban install" in err
    assert err.count("\n") == 1


def test_pending_needs_a_scope(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["pending", "--database-url", UNREACHABLE]) == 2
    assert "SCOPE" in capsys.readouterr().err


# -- worker ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loop_args", "loop"),
    [([], "uvloop"), (["--loop", "asyncio"], "asyncio")],
    ids=["default-loop", "asyncio-loop"],
)
async def test_worker_fires_a_due_timer_through_a_host_module_and_stops_on_sigterm(
    oban_client: Oban, database_url: str, tmp_path: Path, loop_args: list[str], loop: str
) -> None:
    (tmp_path / "cli_worker_host.py").write_text(textwrap.dedent(HOST_MODULE))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE worker_deliveries (scope text, event text, pid integer)")
    config = Config(
        oban=oban_client, timers_queue="timers", delivery="cli_worker_host:RecordingDelivery"
    )
    due = scope("due")
    job = await _schedule.schedule(config, due, send_delayed(1, 0))
    later = await _schedule.schedule(config, scope("later"), send_delayed(1, 3_600_000))

    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [
            sys.executable,
            "-m",
            "statifier_oban.cli",
            "worker",
            "--database-url",
            database_url,
            "--queue",
            "timers=5",
            "--module",
            "cli_worker_host",
            "--path",
            ".",
            "--log-level",
            "WARNING",
            *loop_args,
        ],
        cwd=tmp_path,  # the host module is found through the working directory (--path .)
        env={**os.environ, "WORKER_TEST_URL": database_url},
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = Lines(process)
        lines.wait_for("cli_worker_host imported")
        running = lines.wait_for("statifier-oban worker: running queues timers=5")
        assert f"node {os.uname().nodename}.{process.pid}, loop {loop};" in running

        state = await asyncio.to_thread(wait_for_job, database_url, job.job_id, {"completed"})
        assert state == "completed"
        with psycopg.connect(database_url) as conn:
            delivered = conn.execute("SELECT scope, event, pid FROM worker_deliveries").fetchall()
            row = conn.execute(
                "SELECT attempt, attempted_by[1] FROM oban_jobs WHERE id = %s AND worker = %s",
                [job.job_id, TIMER_WORKER],
            ).fetchone()
        assert delivered == [(due, "authorization.expired", process.pid)]
        assert row == (1, f"{os.uname().nodename}.{process.pid}")

        process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert code == 0
    rest = lines.rest()
    assert "statifier-oban worker: SIGTERM received, stopping" in rest
    assert rest[-1] == "statifier-oban worker: stopped"
    # The timer that is not due yet stays pending for the next worker.
    assert wait_for_job(database_url, later.job_id, {"scheduled"}, timeout=1) == "scheduled"


def test_worker_with_a_module_that_does_not_import_is_status_1(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["worker", "--database-url", database_url, "--queue", "timers=1"]
    assert cli.main([*args, "--module", "no_such_host_module_xyz"]) == 1

    err = capsys.readouterr().err
    assert err.startswith(
        "statifier-oban worker: error: --module no_such_host_module_xyz: cannot import "
        "'no_such_host_module_xyz': ModuleNotFoundError"
    )
    assert err.count("\n") == 1


def test_worker_on_an_unreachable_database_is_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["worker", "--database-url", UNREACHABLE, "--queue", "timers=1"]) == 1

    err = capsys.readouterr().err
    assert err.startswith("statifier-oban worker: error: cannot connect to ")
    assert err.count("\n") == 1
    assert "hunter2" not in err


@pytest.mark.parametrize("queue_option", ["timers", "timers=0", "=3", "timers=x"])
def test_worker_queue_options_are_checked(
    queue_option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["worker", "--database-url", UNREACHABLE, "--queue", queue_option]) == 2
    assert "NAME=LIMIT" in capsys.readouterr().err


def test_the_commands_are_listed_after_install(capsys: pytest.CaptureFixture[str]) -> None:
    names = cli.statifier_oban.list_commands(click.Context(cli.statifier_oban))
    assert names == ["install", "pending", "worker", "demo", "db", "executions", "web"]
    assert cli.main(["--help"]) == 0
    help_text = capsys.readouterr().out
    for name in names:
        assert f"  {name}  " in help_text


def test_worker_leaves_the_current_directory_off_the_import_path(tmp_path: Path) -> None:
    # ``python -m`` puts the working directory first on sys.path; the worker must take it off.
    (tmp_path / "cwd_host_module_xyz.py").write_text("print('cwd_host_module_xyz imported')\n")
    result = subprocess.run(  # noqa: S603 - our interpreter and CLI, fixed arguments
        [
            sys.executable,
            "-m",
            "statifier_oban.cli",
            "worker",
            "--database-url",
            UNREACHABLE,
            "--queue",
            "timers=1",
            "--module",
            "cwd_host_module_xyz",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "imported" not in result.stdout
    # The error names the way to put it on the path.
    assert result.stderr == (
        "statifier-oban worker: error: --module cwd_host_module_xyz: cannot import "
        "'cwd_host_module_xyz': 'cwd_host_module_xyz' is in the working directory, which is "
        "not on the import path: add --path . (or set PYTHONPATH)\n"
    )


def worker_params(args: list[str]) -> dict[str, Any]:
    """What ``worker`` parses ``args`` into, without running it."""
    with _worker.worker.make_context("worker", args) as ctx:
        return dict(ctx.params)


def test_worker_rescue_and_shutdown_flags_have_second_scale_defaults() -> None:
    params = worker_params(["--database-url", UNREACHABLE, "--queue", "timers=1"])
    assert (params["rescue_after"], params["rescue_interval"]) == (10.0, 2.0)
    assert (params["shutdown_grace"], params["stuck_after"]) == (10.0, 3600.0)
    assert params["paths"] == ()
    options = _worker.WorkerOptions()
    # A crashed worker's jobs are back within rescue_after + rescue_interval (+ a heartbeat).
    assert options.rescue_after + options.rescue_interval + options.heartbeat < 30
    assert options.heartbeat == 2.0

    flags = ["--rescue-after", "4", "--rescue-interval", "0.5", "--stuck-after", "900"]
    grace = ["--shutdown-grace", "25"]
    given = worker_params(["--database-url", UNREACHABLE, "--queue", "timers=1", *flags, *grace])
    assert (given["rescue_after"], given["rescue_interval"]) == (4.0, 0.5)
    assert (given["stuck_after"], given["shutdown_grace"]) == (900.0, 25.0)

    # The durations every other command reads; a bare number stays seconds (0.1.0's form).
    durations = ["--rescue-after", "1m 30s", "--rescue-interval", "500ms", "--stuck-after", "2h"]
    given = worker_params(
        [
            "--database-url",
            UNREACHABLE,
            "--queue",
            "timers=1",
            *durations,
            "--shutdown-grace",
            "1.5s",
        ]
    )
    assert (given["rescue_after"], given["rescue_interval"]) == (90.0, 0.5)
    assert (given["stuck_after"], given["shutdown_grace"]) == (7200.0, 1.5)
    longest = worker_params(
        ["--database-url", UNREACHABLE, "--queue", "t=1", "--stuck-after", "115d"]
    )
    assert longest["stuck_after"] == 9_936_000.0  # 116d is past the bound (10^7 s)


def test_worker_help_shows_its_defaults_as_durations(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["worker", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    for flag, default in [
        ("--rescue-after", "10s"),
        ("--rescue-interval", "2s"),
        ("--stuck-after", "1h"),
        ("--shutdown-grace", "10s"),
        ("--otel-interval", "30s"),
    ]:
        option = shown[shown.index(flag + " DURATION") :]
        assert option[: option.index("]") + 1].endswith(f"default: {default}]"), flag


def test_worker_options_read_their_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", UNREACHABLE)
    monkeypatch.setenv("STATIFIER_OBAN_QUEUES", "timers=2 invoke=3")
    monkeypatch.setenv("STATIFIER_OBAN_RESCUE_AFTER", "4")
    monkeypatch.setenv("STATIFIER_OBAN_PREFIX", "tenant_a")
    params = worker_params([])
    assert params["database_url"] == UNREACHABLE
    assert params["queues"] == (("timers", 2), ("invoke", 3))
    assert params["rescue_after"] == 4.0
    assert params["prefix"] == "tenant_a"


@pytest.mark.parametrize("flag", ["--rescue-after", "--rescue-interval", "--shutdown-grace"])
@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "0ms", "-5s", "116d", "inf"])
def test_worker_seconds_flags_are_checked(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["worker", "--database-url", UNREACHABLE, "--queue", "timers=1", flag, value]
    assert cli.main(args) == 2
    assert "expected a positive duration" in capsys.readouterr().err


def test_pending_piped_into_a_reader_that_stops_early_ends_quietly(database_url: str) -> None:
    # `statifier-oban pending ... | head -1`: more output than the pipe holds, the reader
    # closes it after one line, and the command ends without a traceback (status 141).
    scopes = [f"scope_{n:05d}_padding_to_fill_the_pipe" for n in range(6_000)]
    argv = [sys.executable, "-m", "statifier_oban.cli", "pending", "--database-url", database_url]
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        [*argv, *scopes], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    assert process.stdout.readline() == f"{scopes[0]}\t0\n".encode()
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert err == b""
    assert process.returncode == 141
