"""One transaction per step: rollbacks leave nothing, steps on one execution serialize, and
what storage hands back is checked (identity, bounds) before anything is driven."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core import planner, position
from statifier.core.events import Event
from statifier_persistence import (
    AlreadyApplied,
    CorruptExecution,
    Executions,
    IdentityMismatch,
    InvalidArgument,
    Limits,
    PositionTooLarge,
    StalePosition,
    Stepped,
)

from persistence_support.common import (
    InjectedFailure,
    TableExecutor,
    blocked_by,
    chart,
    effect_rows,
    scalar,
    unique,
)

COUNTER = chart(
    """
    <datamodel><data id="count" expr="0"/><data id="blob" expr="''"/></datamodel>
    <state id="counting">
      <onentry><send id="tick" event="tick" delay="1h"/></onentry>
      <transition event="tick" target="counting">
        <assign location="count" expr="count + 1"/>
      </transition>
      <transition event="grow" type="internal">
        <assign location="blob" expr="blob + 'x' * 2000"/>
      </transition>
      <transition event="work" type="internal">
        <assign location="count" expr="count + 1"/>
        <send id="ping" event="pong" delay="1h"/>
        <cancel sendid="never"/>
      </transition>
    </state>
    """,
    name="counter",
)

OTHER = chart('<state id="elsewhere"/>', name="other")


def tick(execution_id: str, executor: TableExecutor) -> Event:
    """The tick timer's event (the first one armed)."""
    return planner.sent_event(execution_id, executor.timers[(execution_id, 1)])


async def count_of(executions: Executions, execution_id: str) -> int:
    """The chart's counter as stored."""
    _, state = await executions.load(execution_id)
    value: int = state.datamodel["count"]
    return value


async def test_a_failed_durable_write_rolls_the_whole_step_back(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    before = await effect_rows(store, execution_id)
    executor.fail.add("cancel")  # the step's second durable effect fails after writing
    with pytest.raises(InjectedFailure):
        await executions.step(execution_id, Event(name="work"), key="job:1")
    assert await effect_rows(store, execution_id) == before  # no timer row from the step
    assert await count_of(executions, execution_id) == 0
    assert (await executions.get(execution_id)).step_count == 1
    assert (
        await scalar(
            store,
            "SELECT count(*) FROM statifier_step_keys WHERE execution_id = %s",
            [execution_id],
        )
        == 0
    )
    # The same key applies once the failure is gone: nothing of the failed try remains.
    executor.fail.clear()
    assert isinstance(await executions.step(execution_id, Event(name="work"), key="job:1"), Stepped)
    assert await count_of(executions, execution_id) == 1
    assert [row[0] for row in await effect_rows(store, execution_id)] == [
        "schedule",
        "schedule",
        "cancel",
    ]


async def test_a_rollback_of_the_callers_transaction_undoes_the_step(
    executions: Executions, store: AsyncConnectionPool, module_database_url: str
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    before = await effect_rows(store, execution_id)

    class Abort(Exception):
        pass

    async with await AsyncConnection.connect(module_database_url) as conn:
        # The whole transaction is the subject: the step in it, then the abort that ends it.
        with pytest.raises(Abort):  # noqa: PT012 - see above
            async with conn.transaction():
                stepped = await executions.step(
                    execution_id, Event(name="work"), key="k1", conn=conn
                )
                assert isinstance(stepped, Stepped)
                assert stepped.execution.step_count == 2
                raise Abort
    assert await effect_rows(store, execution_id) == before
    assert await count_of(executions, execution_id) == 0
    assert isinstance(await executions.step(execution_id, Event(name="work"), key="k1"), Stepped)


async def test_a_step_commits_with_the_callers_transaction(
    executions: Executions, store: AsyncConnectionPool, module_database_url: str
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    async with await AsyncConnection.connect(module_database_url) as conn, conn.transaction():
        await executions.step(execution_id, Event(name="work"), conn=conn)
        await conn.execute(
            "INSERT INTO test_outbox (execution_id, target, event) VALUES (%s, 'app', 'x')",
            [execution_id],
        )
    assert await count_of(executions, execution_id) == 1
    assert (
        await scalar(
            store, "SELECT count(*) FROM test_outbox WHERE execution_id = %s", [execution_id]
        )
        == 1
    )


async def test_concurrent_steps_on_one_execution_serialize(
    executions: Executions, store: AsyncConnectionPool, module_database_url: str
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    async with await AsyncConnection.connect(module_database_url) as holder:
        async with holder.transaction():
            first = await executions.step(execution_id, Event(name="work"), conn=holder)
            assert isinstance(first, Stepped)
            # A second step (its own connection) must wait for the row lock.
            second = asyncio.create_task(executions.step(execution_id, Event(name="work")))
            await blocked_by(store, holder.info.backend_pid)  # fails if it never waits
            assert not second.done()
        result = await asyncio.wait_for(second, 10)
    assert isinstance(result, Stepped)
    assert result.execution.step_count == 3  # it saw the first step's commit
    assert result.state.datamodel["count"] == 2


async def test_a_key_applied_while_a_step_waited_for_the_lock_is_already_applied(
    executions: Executions, store: AsyncConnectionPool, module_database_url: str
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    async with await AsyncConnection.connect(module_database_url) as holder:
        async with holder.transaction():
            first = await executions.step(
                execution_id, Event(name="work"), key="job:race", conn=holder
            )
            assert isinstance(first, Stepped)
            # Waits for the lock; its key check reads a snapshot from before the commit.
            second = asyncio.create_task(
                executions.step(execution_id, Event(name="work"), key="job:race")
            )
            await blocked_by(store, holder.info.backend_pid)
            assert not second.done()
        result = await asyncio.wait_for(second, 10)
    assert isinstance(result, AlreadyApplied)
    assert await count_of(executions, execution_id) == 1
    assert (await executions.get(execution_id)).step_count == 2


async def test_a_key_applied_by_another_transaction_mid_step_rolls_this_one_back(
    store: AsyncConnectionPool, module_database_url: str
) -> None:
    class Racing(TableExecutor):
        """Commits the step's key from another connection while the step runs."""

        async def schedule(self, conn: Any, execution_id: str, effect: Any) -> None:
            await super().schedule(conn, execution_id, effect)
            if effect.send_id == "ping":
                async with await AsyncConnection.connect(module_database_url) as other:
                    # No foreign-key check: it would wait for the row this step locked.
                    await other.execute("SET session_replication_role = replica")
                    await other.execute(
                        "INSERT INTO statifier_step_keys (execution_id, key, step_count)"
                        " VALUES (%s, 'job:raced', 99)",
                        [execution_id],
                    )
                    await other.commit()

    executions = Executions(store, executor=Racing())
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    result = await executions.step(execution_id, Event(name="work"), key="job:raced")
    assert isinstance(result, AlreadyApplied)
    assert await count_of(executions, execution_id) == 0  # the raced step rolled back
    assert [row[1] for row in await effect_rows(store, execution_id)] == ["tick"]


async def test_many_concurrent_steps_apply_each_once(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    results = await asyncio.gather(
        *(executions.step(execution_id, Event(name="work"), key=f"k{n}") for n in range(12)),
        *(executions.step(execution_id, Event(name="work"), key=f"k{n}") for n in range(12)),
    )
    assert sum(isinstance(r, Stepped) for r in results) == 12
    assert await count_of(executions, execution_id) == 12
    assert (await executions.get(execution_id)).step_count == 13


async def test_a_position_of_another_chart_is_an_identity_mismatch(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    other = await executions.create(OTHER, execution_id=unique())
    foreign = position.dumps(other.state)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET position = %s WHERE id = %s", [foreign, execution_id]
        )
    with pytest.raises(IdentityMismatch) as raised:
        await executions.step(execution_id, Event(name="work"))
    assert raised.value.expected == COUNTER.identity
    assert raised.value.found == OTHER.identity
    assert (await executions.get(execution_id)).step_count == 1


async def test_a_tampered_registry_source_is_an_identity_mismatch(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    tampered = chart('<state id="s"><transition event="go" target="t"/></state><state id="t"/>')
    execution_id = unique()
    await executions.create(tampered, execution_id=execution_id)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_charts SET source = convert_to(replace(convert_from(source, 'UTF8'),"
            " 'target=\"t\"', 'target=\"s\"'), 'UTF8') WHERE identity = %s",
            [tampered.identity],
        )
    fresh = Executions(store, executor=executor)  # an empty cache: compiles from the registry
    with pytest.raises(IdentityMismatch) as raised:
        await fresh.step(execution_id, Event(name="go"))
    assert raised.value.expected == tampered.identity
    assert raised.value.found != tampered.identity


async def test_a_position_of_another_execution_is_refused(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    first, second = unique(), unique()
    await executions.create(COUNTER, execution_id=first)
    await executions.create(COUNTER, execution_id=second)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET position ="
            " (SELECT position FROM statifier_executions WHERE id = %s) WHERE id = %s",
            [second, first],
        )
    with pytest.raises(CorruptExecution, match="belongs to"):
        await executions.step(first, Event(name="work"))


async def test_stored_values_over_the_bounds_are_not_used(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    strict = Executions(
        store, executor=executor, limits=Limits(max_position_bytes=200, max_metadata_bytes=64)
    )
    with pytest.raises(CorruptExecution, match="over the 200 limit"):
        await strict.step(execution_id, Event(name="work"))
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET metadata = jsonb_build_object('k', repeat('x', 100))"
            " WHERE id = %s",
            [execution_id],
        )
    with pytest.raises(CorruptExecution, match="metadata"):
        await strict.get(execution_id)
    with pytest.raises(CorruptExecution, match="metadata"):
        await strict.list(chart="counter")


async def test_a_position_grown_over_the_bound_rolls_the_step_back(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    small = Executions(store, executor=executor, limits=Limits(max_position_bytes=6000))
    await small.create(COUNTER, execution_id=execution_id)
    assert isinstance(await small.step(execution_id, Event(name="grow")), Stepped)
    with pytest.raises(PositionTooLarge) as raised:  # noqa: PT012 - within five steps, one refused
        for _ in range(5):
            await small.step(execution_id, Event(name="grow"), key=None)
    assert raised.value.limit == 6000
    execution, state = await small.load(execution_id)
    assert len(state.datamodel["blob"]) < 6000
    assert execution.step_count == 1 + len(state.datamodel["blob"]) // 2000


async def test_positions_written_with_a_key_load_only_with_that_key(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    keyed = Executions(store, executor=executor, position_key=b"k" * 32)
    execution_id = unique()
    await keyed.create(COUNTER, execution_id=execution_id)
    assert isinstance(await keyed.step(execution_id, Event(name="work")), Stepped)
    for other in (None, b"x" * 32):
        stranger = Executions(store, executor=executor, position_key=other)
        with pytest.raises(CorruptExecution, match=r"key|digest"):
            await stranger.step(execution_id, Event(name="work"))
    with pytest.raises(InvalidArgument):
        Executions(store, executor=executor, position_key=b"short")


async def test_an_older_keyed_position_of_the_same_execution_is_refused_as_stale(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    """The digest proves a key holder wrote the blob, not when: an earlier position of the
    same execution written back over the current one is refused (issue 18)."""
    keyed = Executions(store, executor=executor, position_key=b"k" * 32)
    execution_id = unique()
    created = await keyed.create(COUNTER, execution_id=execution_id)
    old = await position_of(store, execution_id)
    stepped = await keyed.step(execution_id, Event(name="work"))
    assert isinstance(stepped, Stepped)
    await _write_position(store, execution_id, old)
    with pytest.raises(StalePosition) as raised:
        await keyed.step(execution_id, Event(name="work"))
    counters = (created.state.macrostep, created.state.round)
    assert raised.value.stored == counters
    assert raised.value.recorded == (stepped.state.macrostep, stepped.state.round)
    assert raised.value.recorded > counters
    with pytest.raises(StalePosition):
        await keyed.load(execution_id)
    assert isinstance(raised.value, CorruptExecution)
    assert await position_of(store, execution_id) == old  # nothing was stored


async def test_a_position_one_round_behind_its_row_is_stale(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    """A fired ``#_internal`` send takes no new macrostep, only rounds: the round counts."""
    internal = chart(
        """
        <state id="s">
          <onentry><send event="inner" target="#_internal" delay="1s"/></onentry>
          <transition event="inner" target="t"/>
        </state>
        <state id="t"/>
        """
    )
    execution_id = unique()
    created = await executions.create(internal, execution_id=execution_id)
    old = await position_of(store, execution_id)
    [delayed] = executor.timers.values()
    fired = await executions.fire(execution_id, delayed)
    assert isinstance(fired, Stepped)
    assert fired.state.macrostep == created.state.macrostep
    await _write_position(store, execution_id, old)
    with pytest.raises(StalePosition):
        await executions.load(execution_id)


async def test_a_finished_execution_with_a_running_position_is_corrupt(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    """``cancel`` runs the chart's exit without a new macrostep: a cancelled row whose
    position was put back to the running one is refused by its status."""
    execution_id = unique()
    await executions.create(COUNTER, execution_id=execution_id)
    running = await position_of(store, execution_id)
    await executions.cancel(execution_id)
    await _write_position(store, execution_id, running)
    with pytest.raises(CorruptExecution, match="cancelled, but its position runs"):
        await executions.load(execution_id)


async def position_of(store: AsyncConnectionPool, execution_id: str) -> bytes:
    """The stored position's bytes."""
    blob: bytes = await scalar(
        store, "SELECT position FROM statifier_executions WHERE id = %s", [execution_id]
    )
    return blob


async def _write_position(store: AsyncConnectionPool, execution_id: str, blob: bytes) -> None:
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET position = %s WHERE id = %s", [blob, execution_id]
        )
