"""create and step on real PostgreSQL: the initial drive, liveness per status, keys, parking.

Every test runs on the module's database with its own execution ids; durable effects are
``test_effects`` rows written by ``TableExecutor`` in the step's own transaction.
"""

from __future__ import annotations

import pytest
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import Event
from statifier_persistence import (
    AlreadyApplied,
    Discarded,
    ExecutionExists,
    ExecutionNotFound,
    Executions,
    InvalidArgument,
    InvalidTransition,
    NeedsMigration,
    Stepped,
)

from persistence_support.common import TableExecutor, chart, effect_rows, scalar, unique

HOLD = chart(
    """
    <datamodel><data id="expirations" expr="0"/></datamodel>
    <state id="authorized">
      <onentry><send id="hold" event="authorization.expired" delay="7d"/></onentry>
      <onexit><cancel sendid="hold"/></onexit>
      <transition event="authorization.expired" target="authorized">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
      <transition event="capture" target="captured"/>
      <transition event="fail" target="failing"/>
    </state>
    <state id="failing">
      <transition cond="True" target="failing2"/>
    </state>
    <state id="failing2">
      <transition cond="True" target="failing"/>
    </state>
    <final id="captured"/>
    """,
    name="hold",
)


def expired(execution_id: str, ordinal: int, executor: TableExecutor) -> Event:
    """The event the timer of ``ordinal`` fires, as the planner builds it."""
    return planner.sent_event(execution_id, executor.timers[(execution_id, ordinal)])


async def test_create_runs_the_initial_drive_and_schedules_its_timer_in_the_same_transaction(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    created = await executions.create(HOLD, execution_id=execution_id, metadata={"card": "A"})
    assert isinstance(created, Stepped)
    execution = created.execution
    assert (execution.id, execution.status, execution.step_count) == (execution_id, "active", 1)
    assert execution.chart_identity == HOLD.identity
    assert (execution.chart_name, execution.metadata) == ("hold", {"card": "A"})
    assert created.state.session_id == execution_id
    assert created.state.active_leaf_ids() == ("authorized",)
    assert [type(e) for e in created.effects if isinstance(e, fx.SendDelayed)] == [fx.SendDelayed]
    assert await effect_rows(store, execution_id) == [("schedule", "hold", 1, None, False)]
    assert await executions.get(execution_id) == execution
    loaded, state = await executions.load(execution_id)
    assert loaded == execution
    assert state.active_leaf_ids() == ("authorized",)
    assert state.datamodel["expirations"] == 0


async def test_a_taken_id_is_refused_and_nothing_is_written(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    with pytest.raises(ExecutionExists):
        await executions.create(HOLD, execution_id=execution_id)
    assert len(await effect_rows(store, execution_id)) == 1
    assert (await executions.get(execution_id)).step_count == 1


async def test_a_keyed_create_retried_is_already_applied_and_drives_nothing_again(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    first = await executions.create(HOLD, execution_id=execution_id, key="req-7")
    again = await executions.create(HOLD, execution_id=execution_id, key="req-7")
    assert isinstance(first, Stepped)
    assert isinstance(again, AlreadyApplied)
    assert (again.key, again.execution) == ("req-7", first.execution)
    assert len(await effect_rows(store, execution_id)) == 1
    # The create's key is the execution's first step key: a step with it is a replay too.
    assert isinstance(await executions.step(execution_id, Event(name="capture"), key="req-7"),
                      AlreadyApplied)  # fmt: skip
    # Another key for a taken id is a conflict, not a retry.
    with pytest.raises(ExecutionExists):
        await executions.create(HOLD, execution_id=execution_id, key="req-8")
    with pytest.raises(ExecutionExists):
        await executions.create(HOLD, execution_id=execution_id)


async def test_a_keyed_create_needs_an_id_and_a_valid_key(executions: Executions) -> None:
    with pytest.raises(InvalidArgument, match="needs an execution_id"):
        await executions.create(HOLD, key="req-1")
    with pytest.raises(InvalidArgument):
        await executions.create(HOLD, execution_id=unique(), key="has space")


async def test_an_event_is_driven_stored_and_counted(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    stepped = await executions.step(execution_id, expired(execution_id, 1, executor))
    assert isinstance(stepped, Stepped)
    assert stepped.execution.step_count == 2
    assert stepped.state.datamodel["expirations"] == 1
    # Re-entering the state cancelled the old hold and armed a new one (ordinal 3: the
    # cancel took ordinal 2).
    assert await effect_rows(store, execution_id) == [
        ("schedule", "hold", 1, None, True),
        ("cancel", "hold", 2, None, False),
        ("schedule", "hold", 3, None, False),
    ]
    _, state = await executions.load(execution_id)
    assert state.datamodel["expirations"] == 1


async def test_the_same_key_again_is_already_applied_and_drives_nothing(
    executions: Executions, executor: TableExecutor, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    event = expired(execution_id, 1, executor)
    first = await executions.step(execution_id, event, key="job:41")
    again = await executions.step(execution_id, event, key="job:41")
    assert isinstance(first, Stepped)
    assert isinstance(again, AlreadyApplied)
    assert again.key == "job:41"
    assert again.execution == first.execution
    _, state = await executions.load(execution_id)
    assert state.datamodel["expirations"] == 1
    assert len(await effect_rows(store, execution_id)) == 3
    keys = await scalar(
        store, "SELECT count(*) FROM statifier_step_keys WHERE execution_id = %s", [execution_id]
    )
    assert keys == 1
    # Another key is another step.
    assert isinstance(await executions.step(execution_id, event, key="job:42"), Stepped)


async def test_keys_are_per_execution(executions: Executions, executor: TableExecutor) -> None:
    first, second = unique(), unique()
    for execution_id in (first, second):
        await executions.create(HOLD, execution_id=execution_id)
        stepped = await executions.step(
            execution_id, expired(execution_id, 1, executor), key="same-key"
        )
        assert isinstance(stepped, Stepped)


@pytest.mark.parametrize(
    "key",
    ["", "x" * 201, "has space", "tab\there", "nul\x00", 42, b"bytes"],
    ids=["empty", "too-long", "space", "tab", "nul", "int", "bytes"],
)
async def test_keys_are_bounded(executions: Executions, key: object) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    with pytest.raises(InvalidArgument):
        await executions.step(execution_id, Event(name="capture"), key=key)  # type: ignore[arg-type]
    assert (await executions.get(execution_id)).step_count == 1


async def test_a_key_of_the_longest_length_is_applied(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    assert isinstance(
        await executions.step(execution_id, Event(name="capture"), key="k" * 200), Stepped
    )


async def test_an_unknown_execution_raises_not_found(executions: Executions) -> None:
    with pytest.raises(ExecutionNotFound) as raised:
        await executions.step("no_such_execution", Event(name="capture"), key="job:1")
    assert raised.value.execution_id == "no_such_execution"
    with pytest.raises(ExecutionNotFound):
        await executions.get("no_such_execution")
    with pytest.raises(ExecutionNotFound):
        await executions.cancel("no_such_execution")


async def test_a_completed_execution_discards_events(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    captured = await executions.step(execution_id, Event(name="capture"))
    assert isinstance(captured, Stepped)
    assert captured.execution.status == "completed"
    assert captured.execution.outcome == {"configuration": ["captured"], "donedata": None}
    assert (await executions.get(execution_id)).outcome == captured.execution.outcome
    answer = await executions.step(execution_id, Event(name="capture"), key="late")
    assert isinstance(answer, Discarded)
    assert answer.status == "completed"
    assert answer.execution.step_count == 2
    assert (
        await scalar(
            store,
            "SELECT count(*) FROM statifier_step_keys WHERE execution_id = %s",
            [execution_id],
        )
        == 0
    )


async def test_a_cancelled_execution_discards_events(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    cancelled = await executions.cancel(execution_id)
    assert isinstance(cancelled, Stepped)
    assert cancelled.execution.status == "cancelled"
    answer = await executions.step(execution_id, Event(name="capture"))
    assert isinstance(answer, Discarded)
    assert answer.status == "cancelled"


async def test_a_runaway_chart_fails_and_then_discards_events(executions: Executions) -> None:
    small = Executions(
        executions.pool,
        executor=TableExecutor(),
        limits=executions.limits.__class__(max_macrostep_rounds=50),
    )
    execution_id = unique()
    await small.create(HOLD, execution_id=execution_id)
    failed = await small.step(execution_id, Event(name="fail"))
    assert isinstance(failed, Stepped)
    assert failed.execution.status == "failed"
    assert failed.execution.failure is not None
    assert failed.execution.failure["reason"] == "budget_exhausted"
    assert failed.execution.failure["exhausted"] == "rounds"
    assert failed.execution.failure["budget"] == 50
    answer = await small.step(execution_id, Event(name="capture"))
    assert isinstance(answer, Discarded)
    assert answer.status == "failed"
    # A failed execution can still be cancelled (its position is still running).
    cancelled = await small.cancel(execution_id)
    assert isinstance(cancelled, Stepped)
    assert cancelled.execution.status == "cancelled"


async def test_the_answer_holds_the_row_as_stored(executions: Executions) -> None:
    # The store returns only the columns it changed; the answer's execution is the locked
    # row with those: it equals the row read afresh, running, failed and completed.
    small = Executions(
        executions.pool,
        executor=TableExecutor(),
        limits=executions.limits.__class__(max_macrostep_rounds=50),
    )
    running, failing, done = unique(), unique(), unique()
    for execution_id in (running, failing, done):
        created = await small.create(HOLD, execution_id=execution_id, metadata={"n": 1})
        assert created.execution == await small.get(execution_id)
    answers = {
        running: await small.step(running, Event(name="nothing")),
        failing: await small.step(failing, Event(name="fail")),
        done: await small.step(done, Event(name="capture")),
    }
    for execution_id, answer in answers.items():
        assert isinstance(answer, Stepped)
        assert answer.execution == await small.get(execution_id)
        assert answer.execution.metadata == {"n": 1}
    assert answers[failing].execution.failure is not None
    assert answers[done].execution.outcome is not None
    assert [answers[i].execution.status for i in (running, failing, done)] == [
        "active",
        "failed",
        "completed",
    ]


async def test_a_parked_execution_takes_no_event_until_unparked(
    executions: Executions, executor: TableExecutor
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    parked = await executions.park(execution_id)
    assert parked.status == "needs_migration"
    event = expired(execution_id, 1, executor)
    with pytest.raises(NeedsMigration) as raised:
        await executions.step(execution_id, event, key="job:7")
    assert raised.value.execution.id == execution_id
    with pytest.raises(NeedsMigration):
        await executions.cancel(execution_id)
    with pytest.raises(InvalidTransition):
        await executions.park(execution_id)
    assert (await executions.unpark(execution_id)).status == "active"
    stepped = await executions.step(execution_id, event, key="job:7")
    assert isinstance(stepped, Stepped)
    assert stepped.state.datamodel["expirations"] == 1


async def test_only_a_parked_execution_can_be_unparked(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    with pytest.raises(InvalidTransition):
        await executions.unpark(execution_id)
    await executions.step(execution_id, Event(name="capture"))
    with pytest.raises(InvalidTransition) as raised:
        await executions.park(execution_id)
    assert (raised.value.status, raised.value.wanted) == ("completed", "needs_migration")


async def test_cancel_runs_onexit_and_a_second_cancel_is_discarded(
    executions: Executions, store: AsyncConnectionPool
) -> None:
    execution_id = unique()
    await executions.create(HOLD, execution_id=execution_id)
    cancelled = await executions.cancel(execution_id)
    assert isinstance(cancelled, Stepped)
    assert any(isinstance(e, fx.Done) for e in cancelled.effects)
    assert cancelled.execution.outcome == {"configuration": ["authorized"], "donedata": None}
    assert await effect_rows(store, execution_id) == [
        ("schedule", "hold", 1, None, True),
        ("cancel", "hold", 2, None, False),
    ]
    again = await executions.cancel(execution_id)
    assert isinstance(again, Discarded)
    assert again.status == "cancelled"


async def test_a_chart_that_finishes_at_once_is_created_completed(executions: Executions) -> None:
    done = chart('<final id="end"/>')
    created = await executions.create(done, execution_id=unique())
    assert created.execution.status == "completed"


@pytest.mark.parametrize(
    "execution_id", ["", "a b", "x" * 201, "line\nbreak"], ids=["empty", "space", "long", "nl"]
)
async def test_execution_ids_are_bounded(executions: Executions, execution_id: str) -> None:
    with pytest.raises(InvalidArgument):
        await executions.create(HOLD, execution_id=execution_id)


async def test_a_fresh_id_is_minted_when_none_is_given(executions: Executions) -> None:
    created = await executions.create(HOLD)
    assert created.execution.id.startswith("sess_")
    assert created.state.datamodel["_sessionid"] == created.execution.id


@pytest.mark.parametrize("text", ["nul \x00", "lone \ud800"], ids=["nul", "surrogate"])
async def test_metadata_jsonb_cannot_hold_is_refused_before_anything_is_written(
    executions: Executions, text: str
) -> None:
    execution_id = unique()
    with pytest.raises(InvalidArgument, match="jsonb cannot store"):
        await executions.create(HOLD, execution_id=execution_id, metadata={"note": text})
    with pytest.raises(InvalidArgument, match="jsonb cannot store"):
        await executions.list(metadata={text: 1})
    with pytest.raises(ExecutionNotFound):
        await executions.get(execution_id)
