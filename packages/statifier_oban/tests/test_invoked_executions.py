"""``<invoke type="scxml">`` children as durable executions, on real oban jobs.

Each test runs the execution rig (``oban_support.executions``: a server-mode Oban running
a timers and an invoke queue in this process, ``Executions`` installed for the workers).
Timers are timer jobs, every message between a parent and a child is a ``MessageWorker``
job; the checks read the rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
import statifier
from statifier_oban import executions as execution_jobs
from statifier_persistence import Executions

from oban_support.common import NS, TERMINAL, database_fixture, wait_until
from oban_support.executions import Rig, running_rig
from oban_support.harness import Servers, servers_fixture

database = database_fixture()
servers = servers_fixture()

TIMER_WORKER = "statifier_oban.workers.TimerWorker"
MESSAGE_WORKER = "statifier_oban.executions.MessageWorker"


def level(n: int, depth: int) -> str:
    """A chart that invokes the next level inline down to ``depth``; each level arms an
    hour-long timer and waits."""
    inner = ""
    if n < depth:
        inner = f'<invoke id="down" type="scxml"><content>{level(n + 1, depth)}</content></invoke>'
    return f"""<scxml {NS} initial="work" name="level{n}">
      <state id="work">
        <onentry><send id="hold" event="expired" delay="1h"/></onentry>
        {inner}
        <transition event="expired" target="late"/>
      </state>
      <final id="late"/>
    </scxml>"""


@pytest_asyncio.fixture
async def rig(servers: Servers) -> AsyncIterator[Rig]:
    """A running rig."""
    async with running_rig(servers) as world:
        yield world


async def tree_of(executions: Executions, top: str) -> list[str]:
    """The ids of the top, its child and its grandchild (each the only child)."""
    ids = [top]
    for _ in range(2):
        page = await executions.list(parent=ids[-1])
        assert len(page.executions) == 1
        ids.append(page.executions[0].id)
    return ids


async def jobs_of(rig: Rig, scopes: list[str]) -> list[tuple[str, str, str]]:
    """``(scope, worker, state)`` of every job of these scopes."""
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT args->>'scope', worker, state::text FROM oban_jobs"
            " WHERE args->>'scope' = ANY(%s) ORDER BY id",
            [scopes],
        )
        return [tuple(row) for row in await cursor.fetchall()]


async def test_a_tree_of_three_cancelled_from_the_top(rig: Rig) -> None:
    executions = rig.executions
    top = "tree_top_" + rig.config.timers_queue
    await executions.create(statifier.compile(level(0, 2)), execution_id=top)
    ids = await tree_of(executions, top)
    await executions.cancel(top)

    async def all_cancelled() -> bool:
        statuses = [(await executions.get(i)).status for i in ids]
        return statuses == ["cancelled"] * 3

    await wait_until(all_cancelled, timeout=10, what="the tree cancelled")

    async def settled() -> bool:
        # A cancel message job whose step committed is still ``executing`` until its
        # (batched) ack: only a terminal state says the job is done.
        return all(state in TERMINAL for *_, state in await jobs_of(rig, ids))

    await wait_until(settled, what="the cancels delivered")
    jobs = await jobs_of(rig, ids)
    # Each level's hour-long timer job was cancelled with it; the cancel of the child and
    # of the grandchild was each a message job that ran.
    assert sorted(jobs) == sorted(
        [
            (ids[0], TIMER_WORKER, "cancelled"),
            (ids[1], TIMER_WORKER, "cancelled"),
            (ids[2], TIMER_WORKER, "cancelled"),
            (ids[1], MESSAGE_WORKER, "completed"),
            (ids[2], MESSAGE_WORKER, "completed"),
        ]
    )
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM statifier_messages WHERE execution_id = ANY(%s)", [ids]
        )
        assert await cursor.fetchone() == (0,)


async def test_a_parked_child_takes_its_cancel_once_unparked(rig: Rig) -> None:
    executions = rig.executions
    execution_jobs.use(executions, parked_snooze_s=1)
    top = "parked_top_" + rig.config.timers_queue
    await executions.create(statifier.compile(level(0, 1)), execution_id=top)
    _, child = await tree_of_two(executions, top)
    await executions.park(child)
    await executions.cancel(top)

    async def snoozed() -> bool:
        jobs = await jobs_of(rig, [child])
        return (child, MESSAGE_WORKER, "scheduled") in jobs

    await wait_until(snoozed, what="the cancel snoozing while the child is parked")
    assert (await executions.get(child)).status == "needs_migration"
    await executions.unpark(child)

    async def cancelled() -> bool:
        return (await executions.get(child)).status == "cancelled"

    await wait_until(cancelled, timeout=10, what="the child cancelled once unparked")


async def tree_of_two(executions: Executions, top: str) -> list[str]:
    """The ids of the top and its only child."""
    (child,) = (await executions.list(parent=top)).executions
    return [top, child.id]
