"""Group commit (ADR 32): keyed steps of different executions that arrive together share
one transaction, and each is answered exactly as if it had run alone.

"One transaction" is read from PostgreSQL itself: every row a transaction writes carries
its id (``xmin``), so rows stored together share one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier_persistence import (
    AlreadyApplied,
    Declined,
    Discarded,
    ExecutionNotFound,
    Executions,
    FanOutKey,
    Stepped,
    Trigger,
    triggered_by,
)

from persistence_support.common import (
    BatchingTableExecutor,
    FanOutTableExecutor,
    InjectedFailure,
    TableExecutor,
    blocked_by,
    chart,
    effect_rows,
    unique,
)

COUNTER = chart(
    """
    <datamodel><data id="count" expr="0"/></datamodel>
    <state id="counting">
      <onentry><send id="tick" event="tick" delay="1h"/></onentry>
      <transition event="work" type="internal">
        <assign location="count" expr="count + 1"/>
        <send id="ping" event="pong" delay="1h"/>
      </transition>
      <transition event="flip" type="internal">
        <send id="flipped" event="back" delay="1h"/>
        <cancel sendid="flipped"/>
      </transition>
    </state>
    """,
    name="group_counter",
)


async def xmins(store: AsyncConnectionPool, table: str, ids: Sequence[str]) -> set[str]:
    """The transactions that last wrote the executions' rows of ``table`` (history: the
    newest entry of each)."""
    queries = {
        "executions": "SELECT xmin::text FROM statifier_executions WHERE id = ANY(%s)",
        "history": "SELECT DISTINCT ON (execution_id) xmin::text FROM statifier_history"
        " WHERE execution_id = ANY(%s) ORDER BY execution_id, seq DESC",
    }
    async with store.connection() as conn:
        rows = await (await conn.execute(queries[table], [list(ids)])).fetchall()
    assert len(rows) == len(ids)
    return {row[0] for row in rows}


async def created(executions: Executions, count: int) -> list[str]:
    """``count`` new executions of the counter."""
    ids = [unique("grp") for _ in range(count)]
    for execution_id in ids:
        await executions.create(COUNTER, execution_id=execution_id)
    return ids


async def test_keyed_steps_that_arrive_together_share_one_transaction(
    store: AsyncConnectionPool,
) -> None:
    executor = BatchingTableExecutor()
    executions = Executions(store, executor=executor)  # on by default
    ids = await created(executions, 5)
    executor.stored.clear()
    results = await asyncio.gather(
        *(executions.step(i, Event(name="work"), key=f"job:{n}") for n, i in enumerate(ids))
    )
    for execution_id, result in zip(ids, results, strict=True):
        assert isinstance(result, Stepped)
        assert result.execution.id == execution_id
        assert result.state.datamodel["count"] == 1
        assert result.execution.step_count == 2
        assert result.entry is not None
        assert result.entry.key is not None
    assert len(await xmins(store, "executions", ids)) == 1
    assert await xmins(store, "history", ids) == await xmins(store, "executions", ids)
    assert executor.stored == [5]  # every step's timer in one statement
    for execution_id in ids:
        rows = await effect_rows(store, execution_id)
        assert [row[1] for row in rows] == ["tick", "ping"]


async def test_without_group_commit_each_step_is_a_transaction_of_its_own(
    store: AsyncConnectionPool,
) -> None:
    executions = Executions(store, executor=BatchingTableExecutor(), group_commit=False)
    ids = await created(executions, 4)
    results = await asyncio.gather(
        *(executions.step(i, Event(name="work"), key=f"job:{n}") for n, i in enumerate(ids))
    )
    assert all(isinstance(result, Stepped) for result in results)
    assert len(await xmins(store, "executions", ids)) == 4


async def test_keyless_steps_run_alone(executions: Executions, store: AsyncConnectionPool) -> None:
    ids = await created(executions, 3)
    results = await asyncio.gather(*(executions.step(i, Event(name="work")) for i in ids))
    assert all(isinstance(result, Stepped) for result in results)
    assert len(await xmins(store, "executions", ids)) == 3


async def test_each_step_of_a_group_records_its_own_trigger(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    ids = await created(executions, 3)

    async def step(n: int, execution_id: str) -> Any:
        with triggered_by(Trigger("timer", job_id=100 + n)):
            return await executions.step(execution_id, Event(name="work"), key=f"job:{100 + n}")

    results = await asyncio.gather(*(step(n, i) for n, i in enumerate(ids)))
    assert len(await xmins(store, "executions", ids)) == 1
    for n, (execution_id, result) in enumerate(zip(ids, results, strict=True)):
        assert isinstance(result, Stepped)
        assert result.entry is not None
        assert result.entry.trigger == Trigger("timer", job_id=100 + n)
        page = await executions.history(execution_id)
        assert page.entries[-1].trigger == Trigger("timer", job_id=100 + n)
        assert page.entries[-1].key == f"job:{100 + n}"


class FailingFor(TableExecutor):
    """Fails (after writing) the ``schedule`` of one execution only."""

    def __init__(self, execution_id: str) -> None:
        super().__init__()
        self.failing = execution_id

    async def schedule(self, conn: Any, execution_id: str, effect: Any) -> None:
        await super().schedule(conn, execution_id, effect)
        if execution_id == self.failing and effect.send_id == "ping":
            raise InjectedFailure("the step's timer write failed")


async def test_a_step_that_fails_in_a_group_fails_alone_and_the_others_are_stored(
    store: AsyncConnectionPool, caplog: pytest.LogCaptureFixture
) -> None:
    first = Executions(store, executor=TableExecutor())
    ids = await created(first, 4)
    executor = FailingFor(ids[2])
    executions = Executions(store, executor=executor)
    results = await asyncio.gather(
        *(executions.step(i, Event(name="work"), key=f"job:{n}") for n, i in enumerate(ids)),
        return_exceptions=True,
    )
    assert isinstance(results[2], InjectedFailure)
    for n in (0, 1, 3):
        assert isinstance(results[n], Stepped)
        assert [row[1] for row in await effect_rows(store, ids[n])] == ["tick", "ping"]
    assert [row[1] for row in await effect_rows(store, ids[2])] == ["tick"]  # rolled back
    assert (await executions.get(ids[2])).step_count == 1
    # The group rolled back and every step ran again alone (a step's own failure is not
    # the group's: nothing is logged for it).
    assert len(await xmins(store, "executions", [ids[0], ids[1], ids[3]])) == 3
    assert "group commit" not in caplog.text


async def test_answers_without_a_change_leave_the_rest_of_the_group_to_commit(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    applied, finished, first, second = await created(executions, 4)
    assert isinstance(await executions.step(applied, Event(name="work"), key="job:a"), Stepped)
    await executions.cancel(finished)
    results = await asyncio.gather(
        executions.step(applied, Event(name="work"), key="job:a"),
        executions.step(finished, Event(name="work"), key="job:b"),
        executions.step("grp_missing", Event(name="work"), key="job:c"),
        executions.step(first, Event(name="work"), key="job:d"),
        executions.step(second, Event(name="work"), key="job:e"),
        return_exceptions=True,
    )
    assert isinstance(results[0], AlreadyApplied)
    assert isinstance(results[1], Discarded)
    assert results[1].status == "cancelled"
    assert isinstance(results[2], ExecutionNotFound)
    assert isinstance(results[3], Stepped)
    assert isinstance(results[4], Stepped)
    assert len(await xmins(store, "executions", [first, second])) == 1
    _, state = await executions.load(applied)
    assert state.datamodel["count"] == 1


async def test_a_send_cancelled_since_is_declined_in_a_group_and_the_others_commit(
    store: AsyncConnectionPool,
) -> None:
    executor = TableExecutor()
    executions = Executions(store, executor=executor)
    cancelled, first, second = await created(executions, 3)
    await executions.step(cancelled, Event(name="work"))
    ping = executor.timers[(cancelled, 2)]
    tick = executor.timers[(cancelled, 1)]
    assert ping.send_id == "ping"
    assert tick.send_id == "tick"
    # Fire the tick (it disarms it), then fire it again: no longer armed.
    assert isinstance(await executions.fire(cancelled, tick, key="job:t1"), Stepped)
    results = await asyncio.gather(
        executions.fire(cancelled, tick, key="job:t2"),
        executions.step(first, Event(name="work"), key="job:f"),
        executions.step(second, Event(name="work"), key="job:s"),
    )
    assert isinstance(results[0], Declined)
    assert results[0].reason == "cancelled"
    assert isinstance(results[1], Stepped)
    assert isinstance(results[2], Stepped)
    assert len(await xmins(store, "executions", [first, second])) == 1


async def test_the_same_execution_twice_in_one_turn_is_stepped_twice(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    [execution_id] = await created(executions, 1)
    results = await asyncio.gather(
        executions.step(execution_id, Event(name="work"), key="job:1"),
        executions.step(execution_id, Event(name="work"), key="job:2"),
    )
    assert all(isinstance(result, Stepped) for result in results)
    counts = sorted(
        result.state.datamodel["count"] for result in results if isinstance(result, Stepped)
    )
    assert counts == [1, 2]
    assert (await executions.get(execution_id)).step_count == 3


async def test_a_key_applied_while_the_group_waited_for_its_locks_is_already_applied(
    executions: Executions, store: AsyncConnectionPool, module_database_url: str
) -> None:
    raced, other = await created(executions, 2)
    async with await AsyncConnection.connect(module_database_url) as holder:
        async with holder.transaction():
            first = await executions.step(raced, Event(name="work"), key="job:race", conn=holder)
            assert isinstance(first, Stepped)
            group = asyncio.gather(
                executions.step(raced, Event(name="work"), key="job:race"),
                executions.step(other, Event(name="work"), key="job:other"),
            )
            await blocked_by(store, holder.info.backend_pid)
            assert not group.done()  # the group waits for the row the holder locked
        results = await asyncio.wait_for(group, 10)
    assert isinstance(results[0], AlreadyApplied)
    assert isinstance(results[1], Stepped)
    _, state = await executions.load(raced)
    assert state.datamodel["count"] == 1


async def test_a_caller_that_gives_up_before_its_turn_leaves_the_others_be(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    gone, first, second = await created(executions, 3)
    tasks = [
        asyncio.create_task(executions.step(i, Event(name="work"), key=f"job:{n}"))
        for n, i in enumerate((gone, first, second))
    ]
    await asyncio.sleep(0)  # every step has joined the group; its transaction has not begun
    tasks[0].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks[0]
    results = await asyncio.gather(*tasks[1:])
    assert all(isinstance(result, Stepped) for result in results)
    assert len(await xmins(store, "executions", [first, second])) == 1
    assert (await executions.get(gone)).step_count == 1


async def test_a_timer_armed_then_cancelled_in_one_drive_is_cancelled_when_batched(
    store: AsyncConnectionPool,
) -> None:
    executor = BatchingTableExecutor()
    executions = Executions(store, executor=executor)
    [execution_id] = await created(executions, 1)
    assert isinstance(await executions.step(execution_id, Event(name="flip"), key="k"), Stepped)
    rows = await effect_rows(store, execution_id)
    assert [(kind, send_id, cancelled) for kind, send_id, _, _, cancelled in rows] == [
        ("schedule", "tick", False),
        ("schedule", "flipped", True),  # stored before the cancel ran, so it saw it
        ("cancel", "flipped", False),
    ]


async def test_a_failed_batch_of_timers_rolls_the_step_back(store: AsyncConnectionPool) -> None:
    executor = BatchingTableExecutor()
    executions = Executions(store, executor=executor)
    [execution_id] = await created(executions, 1)
    executor.fail.add("schedule")
    with pytest.raises(InjectedFailure):
        await executions.step(execution_id, Event(name="work"), key="job:1")
    assert [row[1] for row in await effect_rows(store, execution_id)] == ["tick"]
    assert (await executions.get(execution_id)).step_count == 1


async def test_a_refused_timer_of_a_batch_is_heard_by_the_chart(store: AsyncConnectionPool) -> None:
    executor = BatchingTableExecutor()
    executions = Executions(store, executor=executor)
    [execution_id] = await created(executions, 1)
    executor.refuse.add("schedule")
    result = await executions.step(execution_id, Event(name="work"), key="job:1")
    assert isinstance(result, Stepped)
    raised = [e for e in result.effects if isinstance(e, fx.ErrorRaised)]
    assert [(e.name, e.sendid) for e in raised] == [("error.communication", "ping")]
    assert "schedule refused" in raised[0].message
    assert [row[1] for row in await effect_rows(store, execution_id)] == ["tick"]


FAN_CHILD = chart(
    """
    <state id="waiting"><transition event="go" target="done"/></state>
    <final id="done"/>
    """,
    name="group_fan_child",
)

FAN_PARENT = chart(
    """
    <state id="mapping"><invoke id="map" type="test:job"/></state>
    """,
    name="group_fan_parent",
)


async def test_fan_out_children_finishing_in_a_group_never_wait_for_their_parents_row(
    store: AsyncConnectionPool, module_database_url: str
) -> None:
    """The stall of grouped fan-out children (ADR 32): a group counting two children of
    one fan-out updates the fan-out's row twice, and PostgreSQL checks the second update's
    reference to the parent (``FOR KEY SHARE`` of its row: the row it updates was written
    by its own transaction). A child start holds the parent's row from its locked read
    until it locks the fan-out row, which the group holds: under ``FOR UPDATE`` the two
    deadlocked, the start's job failed and oban ran it again about 17 s later. Here a step of
    the parent holds its row while the group runs: the group must commit without waiting
    for it."""
    executions = Executions(store, executor=FanOutTableExecutor())
    await executions.register(FAN_CHILD)
    created = await executions.create(FAN_PARENT, execution_id=unique("parent"))
    (invoke,) = [e for e in created.effects if isinstance(e, fx.Invoke)]
    key = FanOutKey(created.execution.id, invoke.invoke_id, invoke.macrostep)
    children = [
        (await executions.start_child(key, index, 3, chart="group_fan_child")).execution_id
        for index in range(3)
    ]
    async with await AsyncConnection.connect(module_database_url) as holder:
        async with holder.transaction():
            await executions.step(key.parent_id, Event(name="aside"), conn=holder)
            group = asyncio.ensure_future(
                asyncio.gather(
                    *(executions.step(c, Event(name="go"), key=f"go:{c}") for c in children[:2])
                )
            )
            blocked = asyncio.ensure_future(blocked_by(store, holder.info.backend_pid))
            first: set[asyncio.Future[Any]] = {group, blocked}
            await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
            blocked.cancel()
            waited = not group.done()
        results = await asyncio.wait_for(group, 10)  # whatever waited goes on once it commits
    assert not waited, "the group waited for the lock a step of the parent held"
    assert all(isinstance(result, Stepped) for result in results)
    assert len(await xmins(store, "executions", children[:2])) == 1  # one group
    query = "SELECT finished, state FROM statifier_fan_outs WHERE parent_id = %s"
    async with store.connection() as conn:
        assert await (await conn.execute(query, [key.parent_id])).fetchone() == (2, "open")
