"""Three worker processes, 300 durable executions, one worker SIGKILLed mid-run: every timer
is applied exactly once.

Each execution runs a counter chart: every fired timer increments ``count`` and arms the
next timer (``armed`` counts them) until ``limit`` (3 to 7) is reached. Worker processes A,
B and C (``oban_support.executions_worker``: what ``statifier-oban worker`` runs for
executions, each its own oban name, lifeline rescuing after 2 s) step them. Once about a
third of the timers are applied, A gets SIGKILL (whatever it was stepping, and whatever it
had stepped but not acknowledged, stays ``executing``) and D starts. Every execution must
end ``completed`` with ``count == armed == limit``, one applied step key per timer job,
and every timer job ``completed``. Raw deliveries (``exec_raw``: one row per delivery whose
step transaction committed) show oban's redeliveries beside zero duplicate effects.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_oban.workers import TIMER_WORKER
from statifier_persistence import Executions

from oban_support.common import TERMINAL, chart, database_fixture, forget_instance, wait_until
from oban_support.executions_worker import CREATE_TABLES, DELIVERY_PATH
from oban_support.processes import WorkerProcesses, running, scalar, worker_processes_fixture

WORKER_MODULE = "oban_support.executions_worker"
EXECUTIONS = 300
KILL_AT = 0.35  # the share of timers applied when A is killed
DEADLINE_S = 45.0

COUNTER = chart(
    """
    <datamodel>
      <data id="count" expr="0"/><data id="armed" expr="0"/><data id="limit" expr="3"/>
    </datamodel>
    <state id="counting">
      <onentry>
        <assign location="armed" expr="armed + 1"/>
        <send id="tick" event="tick" delay="150ms"/>
      </onentry>
      <transition event="tick" cond="count + 1 &lt; limit" target="counting">
        <assign location="count" expr="count + 1"/>
      </transition>
      <transition event="tick" target="done">
        <assign location="count" expr="count + 1"/>
      </transition>
    </state>
    <final id="done"/>
    """,
    name="counter",
)


def limit_of(n: int) -> int:
    """How many timers execution ``n`` runs."""
    return 3 + n % 5


TOTAL = sum(limit_of(n) for n in range(EXECUTIONS))

database = database_fixture()
workers = worker_processes_fixture(WORKER_MODULE, "timers")


async def test_killing_a_worker_loses_no_timer_and_applies_none_twice(
    workers: WorkerProcesses, database: str, record_property: Any
) -> None:
    pool = AsyncConnectionPool(database, open=False, min_size=2, max_size=12)
    await pool.open()
    client = Oban(pool=pool, name=f"exec_client_{uuid.uuid4().hex[:8]}")  # never started
    try:
        async with pool.connection() as conn:
            await conn.execute(CREATE_TABLES)
        config = execution_config(client, timers_queue=workers.queue, delivery=DELIVERY_PATH)
        executions = Executions(pool, executor=ObanExecutor(config))
        figures = await _run(workers, pool, executions)
    finally:
        forget_instance(client)
        await pool.close()
    for key, value in figures.items():
        record_property(key, value)
    print(f"\nexecutions sigkill figures: {figures}")


async def _run(
    workers: WorkerProcesses, pool: AsyncConnectionPool, executions: Executions
) -> dict[str, Any]:
    started = time.monotonic()
    spawned = [workers.spawn(label) for label in ("a", "b", "c")]
    for process, node in spawned:
        await running(pool, node, process)
    node_a = spawned[0][1]
    ready_s = time.monotonic() - started

    ids = [f"counter_{n:03d}_{uuid.uuid4().hex[:6]}" for n in range(EXECUTIONS)]
    semaphore = asyncio.Semaphore(8)

    async def create(n: int) -> None:
        async with semaphore:
            await executions.create(COUNTER, execution_id=ids[n], datamodel={"limit": limit_of(n)})

    created_at = time.monotonic()
    await asyncio.gather(*(create(n) for n in range(EXECUTIONS)))
    create_s = time.monotonic() - created_at

    applied = "SELECT count(*) FROM statifier_step_keys"
    await wait_until(
        lambda: _at_least(pool, applied, int(TOTAL * KILL_AT)), timeout=30, what="steps applied"
    )
    process_a = workers.processes["a"]
    os.kill(process_a.pid, signal.SIGKILL)
    assert process_a.wait(timeout=10) == -signal.SIGKILL
    killed_at = time.monotonic()
    applied_at_kill = await scalar(pool, applied)
    stranded = await scalar(
        pool,
        "SELECT count(*) FROM oban_jobs WHERE worker = %s AND state = 'executing'"
        " AND %s = ANY(attempted_by)",
        [TIMER_WORKER, node_a],
    )
    process_d, node_d = workers.spawn("d")
    await running(pool, node_d, process_d)

    async def all_settled() -> bool:
        # An execution completes when its last step commits; that step's job is acked
        # later (in a batch), and a job of A's whose step had committed is still waiting
        # for its rescue and second delivery. The checks read every timer job and every
        # delivery, so they wait for the jobs to settle too.
        done = await scalar(
            pool, "SELECT count(*) FROM statifier_executions WHERE status = 'completed'"
        )
        unsettled = await scalar(
            pool,
            "SELECT count(*) FROM oban_jobs WHERE worker = %s AND state::text <> ALL(%s)",
            [TIMER_WORKER, list(TERMINAL)],
        )
        return int(done) == EXECUTIONS and int(unsettled) == 0

    try:
        await wait_until(all_settled, timeout=DEADLINE_S, interval=0.2, what="every execution")
    except AssertionError:
        raise AssertionError(
            "not every execution completed with its timer jobs settled;"
            f" worker d said:\n{workers.log('d')}"
        ) from None
    recovered_s = time.monotonic() - killed_at
    return await _check(pool, executions, ids, stranded) | {
        "workers_ready_s": round(ready_s, 2),
        "create_s": round(create_s, 2),
        "applied_at_kill": applied_at_kill,
        "executing_at_kill": stranded,
        "recovery_s": round(recovered_s, 2),
        "total_s": round(time.monotonic() - started, 2),
    }


async def _check(
    pool: AsyncConnectionPool, executions: Executions, ids: list[str], stranded: int
) -> dict[str, Any]:
    for n, execution_id in enumerate(ids):
        execution, state = await executions.load(execution_id)
        limit = limit_of(n)
        assert execution.status == "completed", execution_id
        assert (state.datamodel["count"], state.datamodel["armed"]) == (limit, limit), execution_id
        assert execution.step_count == 1 + limit, execution_id
    async with pool.connection() as conn:
        jobs: dict[str, int] = dict(
            await (
                await conn.execute(
                    "SELECT state::text, count(*) FROM oban_jobs WHERE worker = %s GROUP BY 1",
                    [TIMER_WORKER],
                )
            ).fetchall()
        )
        keys_match = await (
            await conn.execute(
                "SELECT count(*) FROM statifier_step_keys k JOIN oban_jobs j"
                " ON k.key = 'job:' || j.id AND (j.args->>'scope') = k.execution_id"
            )
        ).fetchone()
        outcomes: dict[str, int] = dict(
            await (
                await conn.execute("SELECT outcome, count(*) FROM exec_raw GROUP BY 1")
            ).fetchall()
        )
        per_job = await (
            await conn.execute("SELECT job_id, count(*) FROM exec_raw GROUP BY job_id")
        ).fetchall()
        rescued = await (
            await conn.execute(
                "SELECT count(*) FROM oban_jobs WHERE worker = %s AND (meta->>'rescued')::int >= 1",
                [TIMER_WORKER],
            )
        ).fetchone()
        by_pid = await (await conn.execute("SELECT count(DISTINCT pid) FROM exec_raw")).fetchone()
    assert jobs == {"completed": TOTAL}  # every timer fired; none lost, none left behind
    assert keys_match == (TOTAL,)  # one applied step per timer job, keyed by that job
    assert outcomes.get("applied") == TOTAL  # exactly once
    raw = sum(count for _, count in per_job)
    duplicates = outcomes.get("already_applied", 0)
    assert raw == TOTAL + duplicates
    assert rescued is not None
    assert rescued[0] >= stranded
    assert by_pid is not None
    assert by_pid[0] >= 3
    return {
        "executions": EXECUTIONS,
        "timers": TOTAL,
        "raw_deliveries": raw,
        "duplicate_deliveries": duplicates,
        "duplicate_effects": outcomes.get("applied", 0) - TOTAL,
        "rescued_jobs": rescued[0],
    }


async def _at_least(pool: AsyncConnectionPool, query: str, count: int) -> bool:
    return int(await scalar(pool, query)) >= count
