"""A worker that dies after a delivery but before its batched ack: the timer is redelivered.

Acks are written in batches when the producer next wakes up (``statifier_oban.store._acks``), so a
process can die with outcomes it has not written yet. Those jobs stay ``executing`` and
oban's lifeline rescues them: the delivery runs again (at-least-once; deliveries are
idempotent), and the job completes once.
"""

from __future__ import annotations

import os
import uuid

from statifier_oban.timers import _schedule

from oban_support.common import database_fixture, execute, job_row, wait_until
from oban_support.crash_before_ack import CRASH_ENV, CREATE_TABLE, CrashAfterDelivery
from oban_support.harness import Servers, send_delayed, servers_fixture
from oban_support.processes import WorkerProcesses, running, worker_processes_fixture

database = database_fixture()
servers = servers_fixture()
workers = worker_processes_fixture("oban_support.crash_before_ack", "crash")


async def test_a_crash_before_the_ack_flush_redelivers_the_timer(
    servers: Servers, database: str, workers: WorkerProcesses
) -> None:
    CrashAfterDelivery.conninfo = database
    client = await servers.build(workers.queue)  # never started: schedules only
    await execute(client.pool, CREATE_TABLE)
    scope = f"crash_{uuid.uuid4().hex[:8]}"
    workers.env = {**workers.env, CRASH_ENV: "1"}
    worker, node = workers.spawn("crashing")
    await running(client.pool, node, worker)

    config = client.config(delivery=CrashAfterDelivery)
    job = await _schedule.schedule(config, scope, send_delayed(delay_ms=200))
    await wait_until(lambda: worker.poll() is not None, timeout=10, interval=0.05)
    assert worker.returncode == -9, workers.log("crashing")

    unacked = await job_row(client.pool, job.job_id)
    assert unacked.state == "executing"
    assert unacked.attempt == 1

    # A node of this test process whose lifeline rescues jobs left executing for 1 s.
    await servers.start(workers.queue, lifeline={"interval": 0.3, "rescue_after": 1})

    async def completed() -> bool:
        return (await job_row(client.pool, job.job_id)).state == "completed"

    await wait_until(completed, timeout=10)
    done = await job_row(client.pool, job.job_id)
    assert done.attempt == 2
    assert done.meta.get("rescued") == 1
    async with client.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT pid, attempt FROM crash_deliveries WHERE scope = %s ORDER BY attempt", [scope]
        )
        deliveries = await cursor.fetchall()
    assert [attempt for _, attempt in deliveries] == [1, 2]
    assert deliveries[0][0] == worker.pid
    assert deliveries[1][0] == os.getpid()
