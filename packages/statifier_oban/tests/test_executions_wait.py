"""``Executions.wait`` and ``follow``: woken by the commit of a change (LISTEN/NOTIFY), with
no polling, including a commit made by another process (a worker process firing a timer);
and only watched executions notify.

The tests here poll only to learn that a waiter is ready (its watch row exists), never to
learn that something happened: what a waiter sees is checked against the commit that woke
it.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest
from oban import Oban
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import (
    ExecutionNotFound,
    Executions,
    HistoryEntry,
    InvalidArgument,
    Stepped,
    Trigger,
    WaitTimeout,
    WaitUnreachable,
)

from oban_support.common import chart, database_fixture, forget_instance, unique, watched
from oban_support.executions_worker import CREATE_TABLES, DELIVERY_PATH
from oban_support.harness import set_due_now
from oban_support.processes import WorkerProcesses, running, scalar, worker_processes_fixture

database = database_fixture()
workers = worker_processes_fixture("oban_support.executions_worker", "timers")

GATE = chart(
    """
    <state id="waiting">
      <onentry><send id="go" event="go" delay="1h"/></onentry>
      <transition event="go" target="done"/>
      <transition event="next" target="second"/>
      <transition event="stop" target="stopped"/>
    </state>
    <state id="second"><transition event="go" target="done"/></state>
    <final id="stopped"/>
    <final id="done"/>
    """,
    name="gate",
)


@pytest.fixture
async def executions(database: str, workers: WorkerProcesses) -> Any:
    """``Executions`` on the module's database, arming timers on the queue of the worker
    processes (none runs unless a test spawns one)."""
    pool = AsyncConnectionPool(database, open=False, min_size=1, max_size=6)
    await pool.open(wait=True)
    client = Oban(pool=pool, name=f"wait_client_{uuid.uuid4().hex[:8]}")  # never started
    config = execution_config(client, timers_queue=workers.queue, delivery=DELIVERY_PATH)
    try:
        yield Executions(pool, executor=ObanExecutor(config))
    finally:
        forget_instance(client)
        await pool.close()


def pool_of(executions: Executions) -> AsyncConnectionPool:
    """The pool the executions run on."""
    assert executions.pool is not None
    return executions.pool


async def test_a_wait_is_woken_by_a_timer_another_process_commits(
    workers: WorkerProcesses, executions: Executions
) -> None:
    pool = pool_of(executions)
    async with pool.connection() as conn:
        await conn.execute(CREATE_TABLES)
    process, node = workers.spawn("a")
    await running(pool, node, process)
    execution_id = unique("gate")
    await executions.create(GATE, execution_id=execution_id)
    waiting = asyncio.create_task(executions.wait(execution_id, state="done", timeout=30))
    await watched(pool_of(executions), execution_id)
    assert not waiting.done()  # the hour-long timer has not fired
    job_id = await scalar(
        pool, "SELECT id FROM oban_jobs WHERE args->>'scope' = %s", [execution_id]
    )
    await set_due_now(pool, job_id)
    execution = await asyncio.wait_for(waiting, 30)
    assert execution.status == "completed"
    assert execution.outcome == {"configuration": ["done"], "donedata": None}
    stepper = await scalar(pool, "SELECT pid FROM exec_raw WHERE execution_id = %s", [execution_id])
    assert stepper == process.pid != os.getpid()  # the worker process committed the step
    fired = (await executions.history(execution_id)).entries[-1]
    assert (fired.kind, fired.trigger, fired.key) == (
        "fired",
        Trigger("timer", job_id=job_id),
        f"job:{job_id}",
    )
    assert (
        await scalar(
            pool, "SELECT count(*) FROM statifier_watches WHERE execution_id = %s", [execution_id]
        )
        == 0
    )  # the waiter dropped its watch


async def test_a_wait_returns_at_once_when_the_execution_is_there(
    executions: Executions,
) -> None:
    execution_id = unique("gate")
    await executions.create(GATE, execution_id=execution_id)
    found = await executions.wait(execution_id, state="waiting", status="active", timeout=1)
    assert found.id == execution_id
    assert (await executions.wait(execution_id, status=("completed", "active"), timeout=1)).id


async def test_a_wait_is_woken_by_a_step_of_another_connection(executions: Executions) -> None:
    execution_id = unique("gate")
    await executions.create(GATE, execution_id=execution_id)
    waiting = asyncio.create_task(executions.wait(execution_id, state="second", timeout=20))
    await watched(pool_of(executions), execution_id)
    stepped = await executions.step(execution_id, Event(name="next"))
    assert isinstance(stepped, Stepped)
    found = await asyncio.wait_for(waiting, 20)
    assert found.history_seq == stepped.execution.history_seq


async def test_a_step_holding_the_row_when_the_wait_starts_is_seen(
    executions: Executions,
) -> None:
    """The step stored its change (and found no watch to notify) before the waiter
    watched; the waiter's first look waits for the row and sees the commit."""
    execution_id = unique("gate")
    await executions.create(GATE, execution_id=execution_id)
    async with pool_of(executions).connection() as conn, conn.transaction():
        await executions.step(execution_id, Event(name="next"), conn=conn)
        waiting = asyncio.create_task(executions.wait(execution_id, state="second", timeout=20))
        await watched(pool_of(executions), execution_id)
        assert not waiting.done()
    found = await asyncio.wait_for(waiting, 20)
    assert found.step_count == 2


async def test_a_wait_times_out_and_an_ended_execution_is_unreachable(
    executions: Executions,
) -> None:
    execution_id = unique("gate")
    await executions.create(GATE, execution_id=execution_id)
    with pytest.raises(WaitTimeout) as timed_out:
        await executions.wait(execution_id, state="done", timeout=0.3)
    assert timed_out.value.execution.status == "active"
    assert "did not reach state 'done' within 0.3 s" in str(timed_out.value)
    waiting = asyncio.create_task(executions.wait(execution_id, state="done", timeout=20))
    await watched(pool_of(executions), execution_id)
    await executions.step(execution_id, Event(name="stop"))
    with pytest.raises(WaitUnreachable, match="is completed and will never reach state 'done'"):
        await asyncio.wait_for(waiting, 20)
    stopped = await executions.wait(execution_id, state="stopped", timeout=1)
    assert stopped.status == "completed"  # ended states count, from its outcome
    with pytest.raises(ExecutionNotFound):
        await executions.wait(unique("none"), status="completed", timeout=1)
    with pytest.raises(InvalidArgument):
        await executions.wait(execution_id, timeout=1)
    with pytest.raises(InvalidArgument):
        await executions.wait(execution_id, status="done", timeout=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await executions.wait(execution_id, status="active", timeout=0)


async def test_only_watched_executions_notify(executions: Executions, database: str) -> None:
    quiet, watched_id = unique("gate"), unique("gate")
    await executions.create(GATE, execution_id=quiet)
    await executions.create(GATE, execution_id=watched_id)
    async with await AsyncConnection.connect(database, autocommit=True) as listener:
        await listener.execute("LISTEN statifier_executions")
        waiting = asyncio.create_task(executions.wait(watched_id, state="second", timeout=20))
        await watched(pool_of(executions), watched_id)
        await executions.step(quiet, Event(name="next"))
        await executions.step(watched_id, Event(name="next"))
        await asyncio.wait_for(waiting, 20)
        async for notify in listener.notifies(timeout=10, stop_after=1):
            assert notify.payload == f"public {watched_id}"  # the quiet step sent nothing


async def test_follow_yields_entries_as_they_commit_and_ends_with_the_execution(
    executions: Executions,
) -> None:
    execution_id = unique("gate")
    await executions.create(GATE, execution_id=execution_id)
    seen: list[HistoryEntry] = []

    async def follow() -> None:
        async for entry in executions.follow(execution_id, after=0, timeout=20):
            seen.append(entry)

    following = asyncio.create_task(follow())
    await watched(pool_of(executions), execution_id)
    await executions.step(execution_id, Event(name="next"))
    await executions.step(execution_id, Event(name="go"))
    await asyncio.wait_for(following, 20)  # ends: the execution completed
    assert [(e.seq, e.kind) for e in seen] == [(1, "created"), (2, "event"), (3, "event")]
    assert seen[-1].status == "completed"
    later: list[HistoryEntry] = [
        entry async for entry in executions.follow(execution_id, after=1, timeout=5)
    ]
    assert [e.seq for e in later] == [2, 3]  # a completed execution's follow ends at once
