"""A cancelled send is never delivered, whatever the timing (issue 18, SCXML 6.3).

The execution keeps what it has armed in its row, changed by the step that arms or
cancels; ``Executions.fire`` drives a fired send only while it is armed. Each race of the
issue is played here deterministically: the job's effect was taken before the step that
cancels it (as a worker fetches a job before the cancel commits), or the fire waits for
the row lock the cancelling step holds.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import statifier
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import Event
from statifier_persistence import (
    CANCELLED,
    SUPERSEDED,
    AlreadyApplied,
    CorruptExecution,
    Declined,
    Discarded,
    Executions,
    Limits,
    Stepped,
    UnstorablePosition,
    live_answer,
)

from persistence_support.common import TableExecutor, chart, scalar, unique
from tests.drivers.cancel_races import HOLD as CANCEL_RACE_CHART

HOLD = statifier.compile(CANCEL_RACE_CHART.format(rearmed="3s"))


def hold_of(executor: TableExecutor, execution_id: str, ordinal: int = 1) -> fx.SendDelayed:
    """The delayed send the executor stored under ``ordinal``, as its job holds it."""
    return executor.timers[(execution_id, ordinal)]


async def armed_column(store: AsyncConnectionPool, execution_id: str) -> Any:
    """The row's armed list, as JSON."""
    text = await scalar(
        store, "SELECT armed::text FROM statifier_executions WHERE id = %s", [execution_id]
    )
    return None if text is None else json.loads(text)


async def configuration(executions: Executions, execution_id: str) -> tuple[str, ...]:
    """The active leaves as stored."""
    _, state = await executions.load(execution_id)
    return state.active_leaf_ids()


@pytest.mark.parametrize(
    ("race", "after"),
    [("rearm", ("held",)), ("drop", ("held",)), ("leave", ("waiting",))],
)
async def test_a_send_cancelled_after_its_job_was_fetched_is_declined(
    executions: Executions, executor: TableExecutor, race: str, after: tuple[str, ...]
) -> None:
    """The job was fetched (its effect in hand) before a step cancelled its send: by a
    re-arm, a plain ``<cancel>``, or leaving the state whose onexit cancels it."""
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    fetched = hold_of(executor, execution_id)
    assert isinstance(await executions.step(execution_id, Event(name=race)), Stepped)
    fired = await executions.fire(execution_id, fetched, key="job:1")
    assert isinstance(fired, Declined)
    assert fired.reason == CANCELLED == "cancelled"
    assert fired.execution.step_count == 2  # nothing was stored
    assert await configuration(executions, execution_id) == after


async def test_the_rearmed_send_fires_and_the_cancelled_one_never_does(
    executions: Executions, executor: TableExecutor
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    old = hold_of(executor, execution_id)
    await executions.step(execution_id, Event(name="rearm"))
    new = hold_of(executor, execution_id, ordinal=3)  # 2 is the cancel
    assert (new.send_id, new.delay_ms) == ("hold", 3000)
    assert isinstance(await executions.fire(execution_id, old, key="job:1"), Declined)
    fired = await executions.fire(execution_id, new, key="job:2")
    assert isinstance(fired, Stepped)
    assert fired.execution.status == "completed"
    assert fired.execution.outcome == {"configuration": ["expired"], "donedata": None}


async def test_a_fire_waiting_for_the_row_lock_sees_the_cancel_it_waited_for(
    executions: Executions,
    executor: TableExecutor,
    store: AsyncConnectionPool,
    module_database_url: str,
) -> None:
    """The cancelling step holds the row lock; the fire blocks on it, then sees the
    committed cancel and declines."""
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    fetched = hold_of(executor, execution_id)
    async with await AsyncConnection.connect(module_database_url) as holder:
        async with holder.transaction():
            await executions.step(execution_id, Event(name="rearm"), conn=holder)
            fire = asyncio.create_task(executions.fire(execution_id, fetched, key="job:1"))
            await _wait_for_a_lock_wait(store)
            assert not fire.done()
        fired = await asyncio.wait_for(fire, 10)
    assert isinstance(fired, Declined)
    assert fired.reason == CANCELLED
    assert fired.execution.step_count == 2
    assert await configuration(executions, execution_id) == ("held",)


async def _wait_for_a_lock_wait(store: AsyncConnectionPool) -> None:
    """Until a backend of this database waits for a lock (the fire's ``FOR UPDATE``)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()"
    )
    for _ in range(200):
        if await scalar(store, query) >= 1:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the fire never waited for the row lock")


async def test_a_send_of_a_cancelled_execution_is_discarded(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    fetched = hold_of(executor, execution_id)
    await executions.cancel(execution_id)
    fired = await executions.fire(execution_id, fetched, key="job:1")
    assert isinstance(fired, Discarded)
    assert fired.status == "cancelled"
    assert await armed_column(store, execution_id) == {"sends": {}, "invocations": {}}


async def test_a_send_fires_once_and_a_redelivery_is_already_applied(
    executions: Executions, executor: TableExecutor
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    fetched = hold_of(executor, execution_id)
    assert isinstance(await executions.fire(execution_id, fetched, key="job:1"), Stepped)
    assert isinstance(await executions.fire(execution_id, fetched, key="job:1"), AlreadyApplied)
    again = await executions.fire(execution_id, fetched, key="job:other")
    assert isinstance(again, Discarded)  # the chart expired: its hold fired once


async def test_the_row_says_what_is_armed(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    assert await armed_column(store, execution_id) == {"sends": {"hold": [1]}, "invocations": {}}
    await executions.step(execution_id, Event(name="more"))
    await executions.step(execution_id, Event(name="rearm"))
    assert await armed_column(store, execution_id) == {
        "sends": {"more": [2], "hold": [4]},
        "invocations": {},
    }
    await executions.fire(execution_id, hold_of(executor, execution_id, 2))
    assert await armed_column(store, execution_id) == {"sends": {"hold": [4]}, "invocations": {}}


async def test_armed_sends_are_bounded_and_the_chart_hears_the_refusal(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    many = chart(
        """
        <datamodel><data id="errors" expr="[]"/></datamodel>
        <state id="s">
          <transition event="arm"><send event="tick" delay="1h"/></transition>
          <transition event="tick"/>
          <transition event="error.communication">
            <assign location="errors" expr="errors + [_event.data]"/>
          </transition>
        </state>
        """
    )
    executions = Executions(store, executor=executor, limits=Limits(max_armed_sends=2))
    execution_id = unique()
    await executions.create(many, execution_id=execution_id)
    for _ in range(2):
        stepped = await executions.step(execution_id, Event(name="arm"))
        assert isinstance(stepped, Stepped)
        assert stepped.state.datamodel["errors"] == []
    refused = await executions.step(execution_id, Event(name="arm"))
    assert isinstance(refused, Stepped)
    [error] = refused.state.datamodel["errors"]
    assert "2 sends are armed already" in str(error)
    assert sorted(ordinal for (eid, ordinal) in executor.timers if eid == execution_id) == [1, 2]
    # A fired send makes room again.
    await executions.fire(execution_id, hold_of(executor, execution_id, 1))
    again = await executions.step(execution_id, Event(name="arm"))
    assert isinstance(again, Stepped)
    assert len(again.state.datamodel["errors"]) == 1


async def test_a_row_from_before_armed_lists_drives_its_earlier_sends_until_cancelled(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    """No armed list: a send issued before fires as it always did, unless a ``<cancel>``
    of its send id ran since; what is armed from then on is checked."""
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    await executions.step(execution_id, Event(name="more"))
    await _forget_armed(store, execution_id)
    earlier = hold_of(executor, execution_id, 2)
    assert isinstance(await executions.fire(execution_id, earlier), Stepped)
    assert await armed_column(store, execution_id) == {
        "sends": {},
        "invocations": {},
        "since": 2,
        "cut": [],
    }
    await executions.step(execution_id, Event(name="rearm"))
    assert await armed_column(store, execution_id) == {
        "sends": {"hold": [4]},
        "invocations": {},
        "since": 2,
        "cut": ["hold"],
    }
    assert isinstance(
        await executions.fire(execution_id, hold_of(executor, execution_id)), Declined
    )
    rearmed = hold_of(executor, execution_id, 4)
    await executions.step(execution_id, Event(name="drop"))
    assert isinstance(await executions.fire(execution_id, rearmed), Declined)
    assert await configuration(executions, execution_id) == ("held",)


async def _forget_armed(store: AsyncConnectionPool, execution_id: str) -> None:
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET armed = NULL, position_macrostep = NULL,"
            " position_round = NULL WHERE id = %s",
            [execution_id],
        )


async def test_sends_armed_by_an_older_version_during_an_upgrade_fire_as_before(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    """A rolling upgrade: a version without armed lists stored a later position (and
    armed a send) and left the row's list and counters as they were."""
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    columns = "armed::text, position_macrostep, position_round"
    before = await _columns(store, columns, execution_id)
    await executions.step(execution_id, Event(name="more"))
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET armed = %s::jsonb, position_macrostep = %s,"
            " position_round = %s WHERE id = %s",
            [*before, execution_id],
        )
    fired = await executions.fire(execution_id, hold_of(executor, execution_id, 2))
    assert isinstance(fired, Stepped)


async def _columns(store: AsyncConnectionPool, columns: str, execution_id: str) -> tuple[Any, ...]:
    async with store.connection() as conn:
        cursor = await conn.execute(
            f"SELECT {columns} FROM statifier_executions WHERE id = %s",  # noqa: S608 - the test's own column list
            [execution_id],
        )
        row = await cursor.fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.parametrize(
    "armed",
    [
        "[]",
        '{"sends": {"hold": []}}',
        '{"sends": {"hold": [0]}}',
        '{"sends": {"hold": [true]}}',
        '{"invocations": {"job": -1}}',
        '{"since": "3"}',
        '{"other": 1}',
    ],
)
async def test_an_armed_list_a_step_never_writes_is_refused(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool, armed: str
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET armed = %s::jsonb WHERE id = %s",
            [armed, execution_id],
        )
    with pytest.raises(CorruptExecution, match="armed"):
        await executions.fire(execution_id, hold_of(executor, execution_id))


async def test_an_armed_list_over_the_bound_is_not_transferred(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_executions SET armed = jsonb_build_object('sends',"
            " jsonb_build_object(repeat('x', 9000), jsonb_build_array(1))) WHERE id = %s",
            [execution_id],
        )
    small = Executions(store, executor=executor, limits=Limits(max_position_bytes=8000))
    with pytest.raises(CorruptExecution, match=r"armed list is 90[0-9][0-9] bytes"):
        await small.fire(execution_id, hold_of(executor, execution_id))


HOLD_V2 = chart(
    """
    <state id="card" initial="on_hold">
      <transition event="expired" target="expired"/>
      <state id="on_hold">
        <onexit><cancel sendid="hold"/></onexit>
        <transition event="drop"><cancel sendid="hold"/></transition>
      </state>
    </state>
    <final id="expired"/>
    """,
    name="hold",
)


async def test_a_migrated_execution_keeps_what_it_armed(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    first, second = unique(), unique()
    for execution_id in (first, second):
        await executions.create(HOLD, execution_id=execution_id)
        migrated = await executions.migrate(execution_id, HOLD_V2, state_map={"held": "on_hold"})
        assert migrated.state.active_leaf_ids() == ("on_hold",)
        assert await armed_column(store, execution_id) == {
            "sends": {"hold": [1]},
            "invocations": {},
        }
    fired = await executions.fire(first, hold_of(executor, first))
    assert isinstance(fired, Stepped)
    assert fired.execution.status == "completed"
    await executions.step(second, Event(name="drop"))
    declined = await executions.fire(second, hold_of(executor, second))
    assert isinstance(declined, Declined)
    assert declined.reason == CANCELLED


async def test_an_armed_list_grown_over_the_bound_rolls_the_step_back(
    store: AsyncConnectionPool, executor: TableExecutor
) -> None:
    sender = chart(
        f"""
        <state id="s">
          <transition event="x"><send id="{"x" * 3000}" event="tick" delay="1h"/></transition>
          <transition event="y"><send id="{"y" * 3000}" event="tick" delay="1h"/></transition>
        </state>
        """
    )
    executions = Executions(store, executor=executor, limits=Limits(max_position_bytes=6000))
    execution_id = unique()
    await executions.create(sender, execution_id=execution_id)
    assert isinstance(await executions.step(execution_id, Event(name="x")), Stepped)
    with pytest.raises(UnstorablePosition, match=r"armed list is 60[0-9][0-9] bytes"):
        await executions.step(execution_id, Event(name="y"))
    assert (await executions.get(execution_id)).step_count == 2


REENTERED = chart(
    """
    <datamodel><data id="answer" expr="None"/></datamodel>
    <state id="idle"><transition event="go" target="working"/></state>
    <state id="working">
      <invoke id="job" type="test:job"><param name="n" expr="1"/></invoke>
      <transition event="done.invoke.job" target="answered">
        <assign location="answer" expr="_event.data"/>
      </transition>
      <transition event="leave" target="idle"/>
    </state>
    <state id="answered"/>
    """
)


async def test_an_answer_of_an_earlier_generation_is_declined_by_any_executor(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    """The state was left and entered again: the live invocation has the same invoke id
    and a later generation. The armed list tells them apart (the test executor cannot)."""
    execution_id = unique()
    await executions.create(REENTERED, execution_id=execution_id)
    first = await executions.step(execution_id, Event(name="go"))
    assert isinstance(first, Stepped)
    await executions.step(execution_id, Event(name="leave"))
    second = await executions.step(execution_id, Event(name="go"))
    assert isinstance(second, Stepped)
    assert await armed_column(store, execution_id) == {
        "sends": {},
        "invocations": {"job": second.state.macrostep},
    }
    late = planner.invocation_done("job", "first")
    declined = await executions.step(
        execution_id, live_answer(late, generation=first.state.macrostep)
    )
    assert isinstance(declined, Declined)
    assert declined.reason == SUPERSEDED
    answer = planner.invocation_done("job", "second")
    stepped = await executions.step(
        execution_id, live_answer(answer, generation=second.state.macrostep)
    )
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["answer"] == "second"
    assert await armed_column(store, execution_id) == {"sends": {}, "invocations": {}}
