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
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from oban import Oban
from statifier.core.effects import Cancel, SendDelayed
from statifier_oban import Config, _timer, cli
from statifier_oban._names import TIMER_WORKER

from oban_support.processes import Lines

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
    await _timer.schedule(config, two, send_delayed(1, 60_000))
    await _timer.schedule(config, two, send_delayed(2, 60_000, send_id="reminder"))
    await _timer.schedule(config, cancelled, send_delayed(1, 60_000))
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
    assert await _timer.cancel_timers(config, cancelled, cancel) == 1

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
    with pytest.raises(SystemExit) as exit_:
        cli.main(["pending", "--database-url", UNREACHABLE])
    assert exit_.value.code == 2
    assert "SCOPE" in capsys.readouterr().err


# -- worker ------------------------------------------------------------------------------------


def wait_for_job(url: str, job_id: int, states: set[str], timeout: float = 20.0) -> str:
    """Poll job ``job_id`` until its state is in ``states``; return it."""
    deadline = time.monotonic() + timeout
    state = "?"
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT state::text FROM oban_jobs WHERE id = %s", [job_id]
            ).fetchone()
        state = row[0] if row else "missing"
        if state in states:
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} stayed {state}")


async def test_worker_fires_a_due_timer_through_a_host_module_and_stops_on_sigterm(
    oban_client: Oban, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "cli_worker_host.py").write_text(textwrap.dedent(HOST_MODULE))
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE worker_deliveries (scope text, event text, pid integer)")
    config = Config(
        oban=oban_client, timers_queue="timers", delivery="cli_worker_host:RecordingDelivery"
    )
    due = scope("due")
    job = await _timer.schedule(config, due, send_delayed(1, 0))
    later = await _timer.schedule(config, scope("later"), send_delayed(1, 3_600_000))

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
            "--log-level",
            "WARNING",
        ],
        cwd=tmp_path,  # the host module is found through the working directory
        env={**os.environ, "WORKER_TEST_URL": database_url},
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = Lines(process)
        lines.wait_for("cli_worker_host imported")
        running = lines.wait_for("statifier-oban worker: running queues timers=5")
        assert f"node {os.uname().nodename}.{process.pid}" in running

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
    assert err.startswith("statifier-oban worker: error: cannot import module 'no_such_host_module")
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
    with pytest.raises(SystemExit) as exit_:
        cli.main(["worker", "--database-url", UNREACHABLE, "--queue", queue_option])
    assert exit_.value.code == 2
    assert "NAME=LIMIT" in capsys.readouterr().err


def test_the_new_commands_are_registered_next_to_install() -> None:
    assert list(cli.commands)[:1] == ["install"]
    assert {"install", "demo", "worker", "pending"} <= set(cli.commands)
    help_text = cli.build_parser().format_help()
    for name in ("install", "demo", "worker", "pending"):
        assert name in help_text
