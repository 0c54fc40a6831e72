"""A worker process killed with SIGKILL mid-stream loses no timer, and delivers each at least once.

1,000 timers (50 scopes x 20, due 1-3 s out) run on worker process A. Once some but not all
have been delivered, A gets SIGKILL: whatever it was executing, and whatever it delivered but
had not acknowledged yet, stays ``executing``. Worker process B (a new Oban name) rescues
those jobs through oban's lifeline (``rescue_after`` 2 s) and finishes the stream. Every
timer must end delivered (recorded once in the deduplicated table) and its job
``completed``; redeliveries (at-least-once) show in the raw table and are reported.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier_oban._names import TIMER_WORKER
from statifier_oban.timers import _schedule

from oban_support.common import database_fixture, wait_until
from oban_support.harness import Servers, send_delayed, servers_fixture
from oban_support.processes import WorkerProcesses, running, scalar, worker_processes_fixture
from oban_support.sigkill import CREATE_TABLES, RecordingDelivery

WORKER_MODULE = "oban_support.sigkill"
SCOPES = 50
PER_SCOPE = 20
TOTAL = SCOPES * PER_SCOPE
KILL_AFTER = 250  # deliveries seen before A is killed
DEADLINE_S = 60.0


database = database_fixture()
servers = servers_fixture()
workers = worker_processes_fixture(WORKER_MODULE, "timers")


async def test_a_sigkilled_worker_loses_no_timer_and_each_is_delivered_at_least_once(
    servers: Servers, workers: WorkerProcesses, database: str, record_property: Any
) -> None:
    pool = await servers.pool(max_size=4)
    async with pool.connection() as conn:
        await conn.execute(CREATE_TABLES)
    client = await servers.build(workers.queue, pool=pool)  # never started: schedules only
    config = client.config(delivery=RecordingDelivery)
    assert config.delivery == "oban_support.sigkill:RecordingDelivery"

    spawned = time.monotonic()
    process_a, node_a = workers.spawn("a")
    await running(pool, node_a, process_a)
    a_ready_s = time.monotonic() - spawned

    # 1,000 timers, due 1.0-3.0 s from now, interleaved across the scopes.
    scopes = [f"sk_{uuid.uuid4().hex[:8]}_{n:02d}" for n in range(SCOPES)]
    started = time.monotonic()
    async with await AsyncConnection.connect(database, autocommit=True) as conn:
        for s, scope in enumerate(scopes):
            effects = [
                send_delayed(
                    ordinal=k + 1,
                    send_id=f"t{k}",
                    delay_ms=1000 + 2 * (k * SCOPES + s),
                    data={"k": k},
                )
                for k in range(PER_SCOPE)
            ]
            jobs = await _schedule.schedule_many(config, scope, effects, conn=conn)
            assert [job.conflict for job in jobs] == [False] * PER_SCOPE
    schedule_s = time.monotonic() - started

    delivered = "SELECT count(*) FROM sigkill_delivered"
    executing = (
        "SELECT count(*) FROM oban_jobs WHERE worker = %s AND queue = %s AND state = 'executing'"
    )

    async def mid_stream() -> bool:
        # Kill while A holds jobs: on a busy machine a poll can fall between two batches.
        return await _at_least(pool, delivered, KILL_AFTER) and bool(
            await scalar(pool, executing, [TIMER_WORKER, workers.queue])
        )

    await wait_until(mid_stream, timeout=20, interval=0.01, what="A delivering")
    os.kill(process_a.pid, signal.SIGKILL)
    assert process_a.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.monotonic()
    at_kill = await scalar(pool, delivered)
    raw_at_kill = await scalar(pool, "SELECT count(*) FROM sigkill_raw")
    stranded = await scalar(pool, executing, [TIMER_WORKER, workers.queue])
    assert 0 < at_kill < TOTAL, at_kill
    assert stranded > 0  # the kill left jobs behind for the rescue

    process_b, node_b = workers.spawn("b")
    await running(pool, node_b, process_b)
    b_ready_s = time.monotonic() - killed_at
    await wait_until(
        lambda: _all_completed(pool, workers.queue),
        timeout=DEADLINE_S,
        interval=0.1,
        what="every timer job completed",
    )
    recovered_s = time.monotonic() - killed_at

    async with pool.connection() as conn:
        recorded = await (
            await conn.execute("SELECT scope, ordinal FROM sigkill_delivered")
        ).fetchall()
        per_timer = await (
            await conn.execute(
                "SELECT scope, ordinal, count(*), count(DISTINCT pid) FROM sigkill_raw "
                "GROUP BY scope, ordinal"
            )
        ).fetchall()
        states: dict[str, int] = dict(
            await (
                await conn.execute(
                    "SELECT state::text, count(*) FROM oban_jobs "
                    "WHERE worker = %s AND queue = %s GROUP BY 1",
                    [TIMER_WORKER, workers.queue],
                )
            ).fetchall()
        )
        rescued = await (
            await conn.execute(
                "SELECT count(*) FROM oban_jobs WHERE worker = %s AND queue = %s "
                "AND (meta->>'rescued')::int >= 1",
                [TIMER_WORKER, workers.queue],
            )
        ).fetchone()
        by_pid: dict[int, int] = dict(
            await (
                await conn.execute("SELECT pid, count(*) FROM sigkill_raw GROUP BY pid")
            ).fetchall()
        )

    expected = {(scope, k + 1) for scope in scopes for k in range(PER_SCOPE)}
    assert len(recorded) == TOTAL
    assert set(recorded) == expected  # every timer delivered, and recorded exactly once
    assert states == {"completed": TOTAL}
    assert {(scope, ordinal) for scope, ordinal, _, _ in per_timer} == expected
    raw_total = sum(count for _, _, count, _ in per_timer)
    duplicates = raw_total - TOTAL
    redelivered = sum(1 for _, _, count, _ in per_timer if count > 1)
    assert duplicates >= 0
    assert rescued is not None
    assert rescued[0] >= stranded
    assert set(by_pid) <= {process_a.pid, process_b.pid}
    assert by_pid.get(process_b.pid, 0) >= TOTAL - at_kill  # B finished the stream

    figures = {
        "a_ready_s": round(a_ready_s, 2),
        "schedule_s": round(schedule_s, 2),
        "delivered_at_kill": at_kill,
        "raw_at_kill": raw_at_kill,
        "executing_at_kill": stranded,
        "rescued_jobs": rescued[0] if rescued else None,
        "raw_deliveries": raw_total,
        "duplicate_deliveries": duplicates,
        "timers_redelivered": redelivered,
        "b_ready_s": round(b_ready_s, 2),
        "recovery_s": round(recovered_s, 2),
    }
    for key, value in figures.items():
        record_property(key, value)
    print(f"\nsigkill figures: {figures}")


async def _at_least(pool: AsyncConnectionPool, query: str, count: int) -> bool:
    return int(await scalar(pool, query)) >= count


async def _all_completed(pool: AsyncConnectionPool, queue: str) -> bool:
    done = await scalar(
        pool,
        "SELECT count(*) FROM oban_jobs WHERE worker = %s AND queue = %s AND state = 'completed'",
        [TIMER_WORKER, queue],
    )
    return int(done) == TOTAL
