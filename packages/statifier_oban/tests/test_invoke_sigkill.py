"""A worker killed between a child's ``done`` and its parent's step: the parent hears
``done`` once.

Twelve parent executions each invoke a child chart (``<invoke type="scxml">``) that
finishes on a timer 100 ms later; its ``done`` is a message in the parent's mailbox with
the job that delivers it. Worker process A (``oban_support.answer_worker``, lifeline
rescuing after 2 s) runs everything, and stops for good in four parents' deliveries
*before* their step (the ``done`` waits, committed, in the mailbox) and in four *after*
it (the parent's step committed, oban never hears of it). Then A gets SIGKILL, and B
starts. Every parent must end ``completed`` having run its ``<finalize>`` once, with one
applied step key; the rows of committed deliveries show each "after" job applied once by
A and answered ``AlreadyApplied`` when delivered again, and each "before" job applied
only by B.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from typing import Any

import statifier
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions

from oban_support.answer_worker import CREATE_TABLES
from oban_support.common import NS, database_fixture, forget_instance, wait_until
from oban_support.processes import WorkerProcesses, running, scalar, worker_processes_fixture

MESSAGE_WORKER = "statifier_oban.executions.MessageWorker"
PARENTS = 12
PLAN = {0: "before", 1: "before", 2: "before", 3: "before"} | {
    4: "after",
    5: "after",
    6: "after",
    7: "after",
}

PARENT = statifier.compile(
    f"""<scxml {NS} initial="waiting">
      <datamodel><data id="heard" expr="0"/><data id="answer" expr="None"/></datamodel>
      <state id="waiting">
        <invoke id="kid" type="scxml">
          <content>
            <scxml {NS} initial="working">
              <state id="working">
                <onentry><send event="finish" delay="100ms"/></onentry>
                <transition event="finish" target="end"/>
              </state>
              <final id="end"><donedata><param name="n" expr="42"/></donedata></final>
            </scxml>
          </content>
          <finalize><assign location="heard" expr="heard + 1"/></finalize>
        </invoke>
        <transition event="done.invoke.kid" target="answered">
          <assign location="answer" expr="_event.data['n']"/>
        </transition>
      </state>
      <final id="answered"/>
    </scxml>""",
    name="answered_parent",
)

database = database_fixture()
workers = worker_processes_fixture("oban_support.answer_worker", "answers")


async def test_a_worker_killed_between_a_childs_done_and_the_parents_step(
    workers: WorkerProcesses, database: str
) -> None:
    pool = AsyncConnectionPool(database, open=False, min_size=2, max_size=8)
    await pool.open()
    client = Oban(pool=pool, name=f"answer_client_{uuid.uuid4().hex[:8]}")  # never started
    try:
        async with pool.connection() as conn:
            await conn.execute(CREATE_TABLES)
        executions = Executions(
            pool, executor=ObanExecutor(execution_config(client, timers_queue=workers.queue))
        )
        await _run(workers, pool, executions)
    finally:
        forget_instance(client)
        await pool.close()


async def _run(workers: WorkerProcesses, pool: AsyncConnectionPool, executions: Executions) -> None:
    process_a, node_a = workers.spawn("a")
    await running(pool, node_a, process_a)
    ids = [f"parent_{n:02d}_{uuid.uuid4().hex[:6]}" for n in range(PARENTS)]
    async with pool.connection() as conn:
        for n, mode in PLAN.items():
            await conn.execute(
                "INSERT INTO answer_plan (execution_id, mode) VALUES (%s, %s)", [ids[n], mode]
            )
    await asyncio.gather(*(executions.create(PARENT, execution_id=i) for i in ids))

    marks = "SELECT count(*) FROM answer_marks"
    await wait_until(
        lambda: _at_least(pool, marks, len(PLAN)), timeout=20, what="A stopping as planned"
    )
    # The "before" ones: the child finished (its done is a message), the parent not stepped.
    for n, mode in PLAN.items():
        parent = await executions.get(ids[n])
        assert parent.status == ("active" if mode == "before" else "completed"), (n, mode)
    os.kill(process_a.pid, signal.SIGKILL)
    assert process_a.wait(timeout=10) == -signal.SIGKILL
    process_b, node_b = workers.spawn("b")
    await running(pool, node_b, process_b)

    async def all_settled() -> bool:
        # The "after" parents completed under A; what B still owes them is the second
        # delivery of their done, so the jobs settling is the event to wait for too.
        done = await scalar(
            pool,
            "SELECT count(*) FROM statifier_executions WHERE id = ANY(%s) AND status = 'completed'",
            [ids],
        )
        unsettled = await scalar(
            pool,
            "SELECT count(*) FROM oban_jobs WHERE worker = %s AND state <> 'completed'",
            [MESSAGE_WORKER],
        )
        return int(done) == PARENTS and int(unsettled) == 0

    try:
        await wait_until(all_settled, timeout=30, interval=0.2, what="every parent answered")
    except AssertionError:
        raise AssertionError(f"not every parent answered; B said:\n{workers.log('b')}") from None
    await _check(pool, executions, ids, process_a.pid, process_b.pid)


async def _check(
    pool: AsyncConnectionPool, executions: Executions, ids: list[str], pid_a: int, pid_b: int
) -> None:
    for n, execution_id in enumerate(ids):
        parent, state = await executions.load(execution_id)
        assert parent.status == "completed", execution_id
        assert (state.datamodel["heard"], state.datamodel["answer"]) == (1, 42), execution_id
        keys = await scalar(
            pool, "SELECT count(*) FROM statifier_step_keys WHERE execution_id = %s", [execution_id]
        )
        assert keys == 1, execution_id  # the one delivery of the done that applied
        async with pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT outcome, pid FROM answer_raw WHERE execution_id = %s ORDER BY id",
                [execution_id],
            )
            raw = await cursor.fetchall()
        # Exactly once: one delivery applied the done, every other one (a rescue of a job
        # whose step had committed) found it applied.
        outcomes = [outcome for outcome, _ in raw]
        assert outcomes.count("applied") == 1, (execution_id, raw)
        assert set(outcomes) <= {"applied", "already_applied"}, (execution_id, raw)
        mode = PLAN.get(n)
        if mode == "after":  # applied by A before it stopped, delivered again by B
            assert raw[0] == ("applied", pid_a), (execution_id, raw)
            assert ("already_applied", pid_b) in raw, (execution_id, raw)
        elif mode == "before":  # A stopped before stepping: only B applied it
            assert raw == [("applied", pid_b)], (execution_id, raw)
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT state::text, count(*), sum((meta->>'rescued')::int) FILTER"
            " (WHERE meta ? 'rescued') FROM oban_jobs WHERE worker = %s GROUP BY 1",
            [MESSAGE_WORKER],
        )
        jobs: dict[str, Any] = {
            state: (count, rescued) for state, count, rescued in await cursor.fetchall()
        }
    assert set(jobs) == {"completed"}  # one per done, none left behind
    count, rescued = jobs["completed"]
    assert count == PARENTS
    assert rescued >= len(PLAN)


async def _at_least(pool: AsyncConnectionPool, query: str, count: int) -> bool:
    return int(await scalar(pool, query)) >= count
