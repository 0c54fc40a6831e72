"""``statifier-oban worker`` under a crash and a stop, as real processes (issue 13).

A host module (written to a temporary folder, imported with ``--path`` and ``--module``)
delivers timers slowly on their first run, so a worker is holding them when it dies:

* SIGKILL, default flags: the next worker rescues the dead worker's executing jobs within
  seconds (oban 0.7.0 alone: 300 s, and only once the dead leader's lease has expired);
* SIGTERM with a short grace: the stopping worker puts back the jobs it cut short
  (``available``, the interrupted attempt not spent) instead of leaving them ``executing``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from oban import Oban
from statifier_oban import Config
from statifier_oban.timers import _schedule

from oban_support.harness import send_delayed
from oban_support.worker_process import (
    WorkerProcesses,
    wait_for_job,
    worker_processes_fixture,
)

worker_processes = worker_processes_fixture()

HOST_MODULE = '''
"""Delivers a timer after 60 s the first time it runs, at once after that."""

import asyncio
import os

import psycopg
from statifier_oban import Delivered


class SlowFirstRun:
    async def deliver(self, scope, effect):
        url = os.environ["OPS_TEST_URL"]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            cursor = await conn.execute(
                "INSERT INTO ops_runs (scope, ordinal, pid) VALUES (%s, %s, %s) "
                "RETURNING (SELECT count(*) FROM ops_runs WHERE scope = %s AND ordinal = %s)",
                (scope, effect.ordinal, os.getpid(), scope, effect.ordinal),
            )
            (earlier,) = await cursor.fetchone()
        if earlier == 0:
            await asyncio.sleep(60)
        return Delivered()
'''

TIMERS = 4
"""Timers held by the worker when it is killed or stopped."""


def host_folder(tmp_path: Path, url: str) -> Path:
    """A folder holding the host module; creates the table it writes to."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "ops_host.py").write_text(textwrap.dedent(HOST_MODULE))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE ops_runs (scope text, ordinal int, pid int)")
    return folder


def worker_args(url: str, queue: str, *extra: str) -> list[str]:
    """``worker`` options running ``queue`` with the host module."""
    return [
        "--database-url",
        url,
        "--queue",
        f"{queue}=10",
        "--path",
        ".",
        "--module",
        "ops_host",
        "--log-level",
        "WARNING",
        *extra,
    ]


def held(url: str, queue: str) -> tuple[int, int]:
    """How many jobs of ``queue`` are executing, and how many first runs the host module
    has recorded (a job is ``executing`` from its fetch, before its handler runs)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM oban_jobs WHERE queue = %s AND state = 'executing'),"
            " (SELECT count(*) FROM ops_runs)",
            [queue],
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def schedule_due(client: Oban, queue: str) -> list[int]:
    """``TIMERS`` timers of one scope, due now, delivered by the host module."""
    config = Config(oban=client, timers_queue=queue, delivery="ops_host:SlowFirstRun")
    scope = f"ops_{uuid.uuid4().hex[:8]}"
    jobs = [
        await _schedule.schedule(
            config, scope, send_delayed(ordinal=n, send_id=f"t{n}", delay_ms=0)
        )
        for n in range(1, TIMERS + 1)
    ]
    return [job.job_id for job in jobs]


async def wait_executing(url: str, queue: str, count: int) -> None:
    """Poll until ``count`` jobs of ``queue`` are executing, each inside its slow first
    run: killed before its handler recorded that run, a job's next run would be slow too."""
    deadline = time.monotonic() + 20
    while min(held(url, queue)) < count:
        assert time.monotonic() < deadline, "the worker never held the timers"
        await asyncio.sleep(0.05)


async def test_a_sigkilled_worker_s_timers_run_again_within_seconds_with_default_flags(
    oban_client: Oban, database_url: str, tmp_path: Path, worker_processes: WorkerProcesses
) -> None:
    folder = host_folder(tmp_path, database_url)
    queue = f"ops_{uuid.uuid4().hex[:6]}"
    env = {"OPS_TEST_URL": database_url}
    first, _ = worker_processes.start(*worker_args(database_url, queue), cwd=folder, env=env)
    job_ids = await schedule_due(oban_client, queue)
    await wait_executing(database_url, queue, TIMERS)

    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=10)
    killed = time.monotonic()
    worker_processes.start(*worker_args(database_url, queue), cwd=folder, env=env)
    for job_id in job_ids:
        state = await asyncio.to_thread(wait_for_job, database_url, job_id, {"completed"}, 40)
        assert state == "completed"
    recovered_s = time.monotonic() - killed

    # Default flags: rescue after 10 s of silence, looked for every 2 s, heartbeat 2 s.
    assert recovered_s < 30, recovered_s
    with psycopg.connect(database_url) as conn:
        rescued = conn.execute(
            "SELECT count(*) FROM oban_jobs WHERE id = ANY(%s) AND (meta->>'rescued')::int = 1",
            [job_ids],
        ).fetchone()
        runs = conn.execute("SELECT count(*) FROM ops_runs").fetchone()
    assert rescued == (TIMERS,)
    assert runs == (2 * TIMERS,)  # each timer ran twice: at least once, duplicates on rows
    print(f"\nrecovered {TIMERS} timers {recovered_s:.1f} s after SIGKILL")


async def test_a_stopping_worker_puts_back_the_jobs_its_grace_period_cut_short(
    oban_client: Oban, database_url: str, tmp_path: Path, worker_processes: WorkerProcesses
) -> None:
    folder = host_folder(tmp_path, database_url)
    queue = f"ops_{uuid.uuid4().hex[:6]}"
    env = {"OPS_TEST_URL": database_url}
    args = worker_args(database_url, queue, "--shutdown-grace", "0.5")
    process, lines = worker_processes.start(*args, cwd=folder, env=env)
    job_ids = await schedule_due(oban_client, queue)
    await wait_executing(database_url, queue, TIMERS)

    process.send_signal(signal.SIGTERM)
    code = await asyncio.to_thread(process.wait, 20)
    assert code == 0
    rest = lines.rest()
    assert any(f"put back {TIMERS} jobs cut short by the stop" in line for line in rest), rest

    with psycopg.connect(database_url) as conn:
        rows: list[Any] = conn.execute(
            "SELECT state::text, attempt, (meta->>'returned')::int FROM oban_jobs "
            "WHERE id = ANY(%s)",
            [job_ids],
        ).fetchall()
    assert rows == [("available", 0, 1)] * TIMERS


def test_a_started_worker_puts_its_startup_heap_out_of_the_collectors_reach() -> None:
    from statifier_oban.cli._worker import freeze_startup_heap

    before = gc.get_freeze_count()
    thresholds = gc.get_threshold()
    held = [object() for _ in range(3)] + [{"startup": True}]
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() >= before + len(held)
        assert not any(o is held[-1] for o in gc.get_objects())  # frozen: not collected
        assert gc.get_threshold() == (10_000, *thresholds[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
