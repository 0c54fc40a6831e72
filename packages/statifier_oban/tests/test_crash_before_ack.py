"""A worker that dies after a delivery but before its batched ack: the timer is redelivered.

Acks are written in batches when the producer next wakes up (``statifier_oban._acks``), so a
process can die with outcomes it has not written yet. Those jobs stay ``executing`` and
oban's lifeline rescues them: the delivery runs again (at-least-once; deliveries are
idempotent), and the job completes once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from statifier_oban import _timer

TESTS_DIR = str(Path(__file__).resolve().parent)
if TESTS_DIR not in sys.path:  # see support_harness: makes support_* importable
    sys.path.append(TESTS_DIR)

from support_common import database_fixture, execute, job_row, wait_until  # noqa: E402
from support_crash_before_ack import (  # noqa: E402
    CRASH_ENV,
    CREATE_TABLE,
    CrashAfterDelivery,
)
from support_harness import Servers, send_delayed, servers_fixture  # noqa: E402

WORKER_SCRIPT = str(Path(TESTS_DIR) / "support_crash_before_ack.py")

database = database_fixture()
servers = servers_fixture()


@pytest.fixture
def queue() -> str:
    """A queue of this test's own."""
    return f"crash_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def worker(database: str, queue: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The worker process (killed at teardown if it is still alive)."""
    name = f"crash_{uuid.uuid4().hex[:8]}"
    with (tmp_path / "worker.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, WORKER_SCRIPT, database, name, f"{name}.node", queue],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, CRASH_ENV: "1"},
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


async def test_a_crash_before_the_ack_flush_redelivers_the_timer(
    servers: Servers, database: str, queue: str, worker: subprocess.Popen[bytes]
) -> None:
    CrashAfterDelivery.conninfo = database
    client = await servers.build(queue)  # never started: schedules only
    await execute(client.pool, CREATE_TABLE)
    scope = f"crash_{uuid.uuid4().hex[:8]}"

    async def worker_running() -> bool:
        assert worker.poll() is None, "the worker exited before the timer was due"
        async with client.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT count(*) FROM oban_producers WHERE queue = %s", [queue]
            )
            row = await cursor.fetchone()
        return bool(row and row[0])

    await wait_until(worker_running, timeout=20, interval=0.05)
    config = client.config(delivery=CrashAfterDelivery)
    job = await _timer.schedule(config, scope, send_delayed(delay_ms=200))
    await wait_until(lambda: worker.poll() is not None, timeout=10, interval=0.05)
    assert worker.returncode == -9

    unacked = await job_row(client.pool, job.job_id)
    assert unacked.state == "executing" and unacked.attempt == 1

    # A node whose lifeline rescues jobs left executing for 1 s.
    await servers.start(queue, lifeline={"interval": 0.3, "rescue_after": 1})

    async def completed() -> bool:
        return (await job_row(client.pool, job.job_id)).state == "completed"

    await wait_until(completed, timeout=10)
    done = await job_row(client.pool, job.job_id)
    assert done.attempt == 2 and done.meta.get("rescued") == 1
    async with client.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT pid, attempt FROM crash_deliveries WHERE scope = %s ORDER BY attempt", [scope]
        )
        deliveries = await cursor.fetchall()
    assert [attempt for _, attempt in deliveries] == [1, 2]
    assert deliveries[0][0] == worker.pid and deliveries[1][0] == os.getpid()
