"""Fan-out children and their settlement, on real PostgreSQL, without oban.

``FanOutTableExecutor`` records a settlement as a ``settle`` row and a cascade as a
``cascade`` row of ``test_effects``, written in the transaction that decided them, so a
test counts exactly what a transaction committed. The parent invokes ``test:job`` (the
executor's invoke type) as ``map``; children run ``fan_child`` (registered by name).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier_persistence import (
    MAX_FAN_OUT_CHILDREN,
    ChartNotRegistered,
    CorruptExecution,
    Discarded,
    Executions,
    FanOutKey,
    InvalidArgument,
    Limits,
    NeedsMigration,
    RetirementRefused,
    child_execution_id,
)

from persistence_support.common import FanOutTableExecutor, TableExecutor, chart, scalar, unique

CHILD_BODY = """
    <datamodel><data id="item" expr="None"/></datamodel>
    <state id="start">
      <transition cond="item == 'now'" target="done"/>
      <transition cond="item == 'reject'" target="rejected"/>
      <transition target="waiting"/>
    </state>
    <state id="waiting">
      <transition event="go" target="done"/>
      <transition event="big" target="big"/>
    </state>
    <final id="done"><donedata><param name="item" expr="item"/></donedata></final>
    <final id="big"><donedata><param name="blob" expr="'x' * 600"/></donedata></final>
    <final id="rejected"/>
    """

CHILD = chart(CHILD_BODY, name="fan_child")

PARENT = chart(
    """
    <state id="mapping">
      <invoke id="map" type="test:job"/>
      <transition event="leave" target="elsewhere"/>
      <transition event="again" target="mapping"/>
    </state>
    <state id="elsewhere"/>
    """,
    name="fan_parent",
)


@pytest_asyncio.fixture
async def fan_executions(store: AsyncConnectionPool) -> Executions:
    """``Executions`` whose executor runs fan-outs, with ``fan_child`` registered."""
    executions = Executions(store, executor=FanOutTableExecutor())
    await executions.register(CHILD)
    return executions


async def mapping(executions: Executions) -> FanOutKey:
    """A parent in its invoking state; the key of its ``map`` invocation's fan-out."""
    created = await executions.create(PARENT, execution_id=unique("parent"))
    (invoke,) = [e for e in created.effects if isinstance(e, fx.Invoke)]
    return FanOutKey(created.execution.id, invoke.invoke_id, invoke.macrostep)


async def start(
    executions: Executions, key: FanOutKey, index: int, count: int, item: Any, **options: Any
) -> Any:
    """Start child ``index`` of ``count`` with ``item`` (``chart`` defaults to fan_child)."""
    options.setdefault("chart", "fan_child")
    return await executions.start_child(key, index, count, datamodel={"item": item}, **options)


async def rows(store: AsyncConnectionPool, key: FanOutKey, kind: str) -> int:
    """How many ``kind`` rows (``settle``, ``cascade``) the fan-out's transactions wrote."""
    return int(
        await scalar(
            store,
            "SELECT count(*) FROM test_effects WHERE kind = %s AND execution_id = %s"
            " AND invoke_id = %s AND (detail->>'generation')::int = %s",
            [kind, key.parent_id, key.invoke_id, key.generation],
        )
    )


def test_child_ids_are_derived_from_the_fan_out_and_the_index() -> None:
    key = FanOutKey("parent_1", "map", 3)
    first = child_execution_id(key, 0)
    assert re.fullmatch(r"fan_[0-9a-f]{20}_0", first)
    assert child_execution_id(key, 0) == first
    assert child_execution_id(key, 1) == first.removesuffix("_0") + "_1"
    others = {
        child_execution_id(FanOutKey("parent_1", "map", 4), 0),
        child_execution_id(FanOutKey("parent_1", "map2", 3), 0),
        child_execution_id(FanOutKey("parent_2", "map", 3), 0),
        child_execution_id(FanOutKey("parent_1map", "", 3), 0),
    }
    assert first not in others
    assert len(others) == 4


async def test_a_start_creates_the_child_once_and_a_second_start_adopts_it(
    fan_executions: Executions,
) -> None:
    key = await mapping(fan_executions)
    created = await start(fan_executions, key, 1, 2, "wait")
    assert created.outcome == "created"
    assert created.execution_id == child_execution_id(key, 1)
    again = await start(fan_executions, key, 1, 2, "wait")
    assert (again.outcome, again.execution_id) == ("adopted", created.execution_id)

    child, state = await fan_executions.load(created.execution_id)
    assert child.parent is not None
    assert (child.parent.execution_id, child.parent.invoke_id, child.parent.index) == (
        key.parent_id,
        "map",
        1,
    )
    assert child.step_count == 1  # created once
    assert state.datamodel["item"] == "wait"
    assert child.chart_name == "fan_child"


async def test_an_index_outside_the_fan_out_is_refused_and_nothing_is_written(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    for index, count in ((2, 2), (-1, 2), (0, 0), (0, MAX_FAN_OUT_CHILDREN + 1), (True, 2)):
        with pytest.raises(InvalidArgument):
            await start(fan_executions, key, index, count, "wait")
    opened = "SELECT count(*) FROM statifier_fan_outs WHERE parent_id = %s"
    assert await scalar(store, opened, [key.parent_id]) == 0


async def test_a_start_must_agree_with_the_fan_out_its_first_start_opened(
    fan_executions: Executions,
) -> None:
    key = await mapping(fan_executions)
    await start(fan_executions, key, 0, 2, "wait")
    with pytest.raises(InvalidArgument, match="has 2 children under 'all'"):
        await start(fan_executions, key, 1, 3, "wait")
    with pytest.raises(InvalidArgument, match="this start says 2 under 'first_error'"):
        await start(fan_executions, key, 1, 2, "wait", policy="first_error")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"chart": "no_such_chart"}, ChartNotRegistered),
        ({"chart": ""}, InvalidArgument),
        ({"policy": "most"}, InvalidArgument),
        ({"failed_states": "rejected"}, InvalidArgument),
        ({"caller_context": {"bad": {1, 2}}}, InvalidArgument),
    ],
    ids=["unregistered-chart", "no-chart", "bad-policy", "states-not-a-list", "context"],
)
async def test_a_start_that_cannot_open_its_fan_out_writes_nothing(
    fan_executions: Executions, store: AsyncConnectionPool, options: dict[str, Any], error: type
) -> None:
    key = await mapping(fan_executions)
    with pytest.raises(error):
        await start(fan_executions, key, 0, 1, "wait", **options)
    opened = "SELECT count(*) FROM statifier_fan_outs WHERE parent_id = %s"
    assert await scalar(store, opened, [key.parent_id]) == 0


async def test_an_executor_without_fan_outs_is_refused(store: AsyncConnectionPool) -> None:
    executions = Executions(store, executor=TableExecutor())
    key = await mapping(executions)
    with pytest.raises(InvalidArgument, match="FanOutExecutor"):
        await start(executions, key, 0, 1, "wait")


async def test_no_child_is_started_when_no_one_would_take_its_answer(
    fan_executions: Executions,
) -> None:
    key = await mapping(fan_executions)
    gone = FanOutKey(unique("nobody"), "map", 1)
    assert (await start(fan_executions, gone, 0, 1, "x")).reason == "parent_not_found"
    other = FanOutKey(key.parent_id, "other", key.generation)
    assert (await start(fan_executions, other, 0, 1, "x")).reason == "invocation_not_live"

    first_error: dict[str, Any] = {"policy": "first_error", "failed_states": ["rejected"]}
    await start(fan_executions, key, 0, 3, "reject", **first_error)  # fails at once
    settled = await start(fan_executions, key, 1, 3, "wait", **first_error)
    assert (settled.outcome, settled.reason) == ("not_needed", "fan_out_settled")

    left = await mapping(fan_executions)
    await start(fan_executions, left, 0, 2, "wait")
    await fan_executions.step(left.parent_id, Event(name="leave"))
    late = await start(fan_executions, left, 1, 2, "wait")
    assert (late.outcome, late.reason) == ("not_needed", "invocation_not_live")

    await fan_executions.cancel(left.parent_id)
    cancelled = await start(fan_executions, left, 1, 2, "wait")
    assert cancelled.reason == "parent_cancelled"


async def test_a_start_of_a_generation_the_parent_left_creates_nothing(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    # The parent leaves and re-enters the invoking state before this generation's first
    # start ran: the invoke id is live again, but as another invocation.
    await fan_executions.step(key.parent_id, Event(name="again"))
    stale = await start(fan_executions, key, 0, 2, "wait")
    assert (stale.outcome, stale.reason) == ("not_needed", "invocation_superseded")
    opened = "SELECT count(*) FROM statifier_fan_outs WHERE parent_id = %s"
    assert await scalar(store, opened, [key.parent_id]) == 0


async def test_a_parked_parent_makes_the_start_wait(fan_executions: Executions) -> None:
    key = await mapping(fan_executions)
    await fan_executions.park(key.parent_id)
    with pytest.raises(NeedsMigration):
        await start(fan_executions, key, 0, 1, "wait")
    await fan_executions.unpark(key.parent_id)
    assert (await start(fan_executions, key, 0, 1, "wait")).outcome == "created"


async def test_all_settles_once_when_the_last_child_finishes(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    ids = [(await start(fan_executions, key, i, 3, "wait")).execution_id for i in range(3)]
    for child_id in (ids[2], ids[0]):
        await fan_executions.step(child_id, Event(name="go"))
        assert await fan_executions.fan_out_answer(key) is None
    assert await rows(store, key, "settle") == 0
    await fan_executions.step(ids[1], Event(name="go"))
    assert await rows(store, key, "settle") == 1

    answer = await fan_executions.fan_out_answer(key)
    assert answer is not None
    assert (answer.name, answer.invokeid) == ("done.invoke.map", "map")
    assert answer.data == [{"item": "wait"}] * 3
    # A finished child takes no more events, and its finishing is never counted again.
    assert isinstance(await fan_executions.step(ids[1], Event(name="go")), Discarded)
    await fan_executions.cancel(ids[1])
    assert await rows(store, key, "settle") == 1
    assert await rows(store, key, "cascade") == 0


async def test_a_child_that_finishes_in_its_initial_drive_is_counted_by_its_start(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    await start(fan_executions, key, 0, 2, "now")
    await start(fan_executions, key, 1, 2, "now")
    assert await rows(store, key, "settle") == 1
    answer = await fan_executions.fan_out_answer(key)
    assert answer is not None
    assert answer.data == [{"item": "now"}, {"item": "now"}]


async def test_children_finishing_at_once_settle_once(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    count = 5
    ids = [(await start(fan_executions, key, i, count, "wait")).execution_id for i in range(count)]
    await asyncio.gather(*(fan_executions.step(i, Event(name="go")) for i in ids))
    assert await rows(store, key, "settle") == 1
    finished = "SELECT finished, state FROM statifier_fan_outs WHERE parent_id = %s"
    async with store.connection() as conn:
        cursor = await conn.execute(finished, [key.parent_id])
        assert await cursor.fetchone() == (count, "settled")


async def test_first_error_settles_on_the_first_failure_and_asks_for_the_cascade(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    ids = [
        (await start(fan_executions, key, i, 3, "wait", policy="first_error")).execution_id
        for i in range(3)
    ]
    await fan_executions.step(ids[0], Event(name="go"))
    await fan_executions.cancel(ids[1])
    assert (await rows(store, key, "settle"), await rows(store, key, "cascade")) == (1, 1)
    assert await fan_executions.unfinished_children(key) == [ids[2]]

    answer = await fan_executions.fan_out_answer(key)
    assert answer is not None
    assert answer.name == "error.communication.invoke.map"
    assert answer.data == {
        "reason": "child_failed",
        "attempts": 1,
        "detail": "child 1 (cancelled) of 3 failed",
        "index": 1,
        "execution_id": ids[1],
        "data": None,
    }
    await fan_executions.cancel(ids[2])  # what the cascade does
    assert (await rows(store, key, "settle"), await rows(store, key, "cascade")) == (1, 1)
    assert await fan_executions.unfinished_children(key) == []


async def test_a_completion_in_a_failed_state_is_a_failure(fan_executions: Executions) -> None:
    key = await mapping(fan_executions)
    await start(fan_executions, key, 0, 2, "now", failed_states=["rejected"])
    await start(fan_executions, key, 1, 2, "reject", failed_states=["rejected"])
    answer = await fan_executions.fan_out_answer(key)
    assert answer is not None
    assert answer.data["reason"] == "children_failed"
    assert answer.data["failed"] == [1]
    assert answer.data["results"] == [{"item": "now"}, None]
    assert answer.data["detail"] == "1 of 2 children failed: 1 (completed in a failed state)"


async def test_an_answer_over_the_position_bound_is_a_failure(
    store: AsyncConnectionPool,
) -> None:
    executions = Executions(
        store, executor=FanOutTableExecutor(), limits=Limits(max_position_bytes=4096)
    )
    await executions.register(CHILD)
    key = await mapping(executions)
    ids = [(await start(executions, key, i, 8, "wait")).execution_id for i in range(8)]
    for child_id in ids:
        await executions.step(child_id, Event(name="big"))
    answer = await executions.fan_out_answer(key)
    assert answer is not None
    assert answer.data["reason"] == "answer_too_large"
    assert "over the 4096 limit" in answer.data["detail"]


@pytest.mark.parametrize("stored_count", [MAX_FAN_OUT_CHILDREN + 1, 2**31 - 1])
async def test_a_stored_count_over_the_limit_is_a_corrupt_row(
    fan_executions: Executions, store: AsyncConnectionPool, stored_count: int
) -> None:
    # The table's CHECK takes any positive count: a corrupted row is refused as corrupt,
    # not trusted to size the answer (2**31 - 1 children would be gigabytes of indexes).
    key = await mapping(fan_executions)
    for index in range(2):
        await start(fan_executions, key, index, 2, "now")
    assert await fan_executions.fan_out_answer(key) is not None
    async with store.connection() as conn:
        await conn.execute(
            "UPDATE statifier_fan_outs SET child_count = %s, finished = 0"
            " WHERE parent_id = %s AND invoke_id = %s AND generation = %s",
            [stored_count, key.parent_id, key.invoke_id, key.generation],
        )
    with pytest.raises(CorruptExecution) as caught:
        await fan_executions.fan_out_answer(key)
    assert caught.value.execution_id == key.parent_id
    assert f"counts {stored_count} children, over the {MAX_FAN_OUT_CHILDREN} limit" in str(
        caught.value
    )


async def test_leaving_the_invoking_state_abandons_the_fan_out(
    fan_executions: Executions, store: AsyncConnectionPool
) -> None:
    key = await mapping(fan_executions)
    ids = [(await start(fan_executions, key, i, 2, "wait")).execution_id for i in range(2)]
    await fan_executions.step(key.parent_id, Event(name="leave"))
    assert await rows(store, key, "cascade") == 1
    assert await fan_executions.unfinished_children(key) == ids
    for child_id in ids:
        await fan_executions.step(child_id, Event(name="go"))  # finished before the cascade
    assert await rows(store, key, "settle") == 0
    assert await fan_executions.fan_out_answer(key) is None
    state = "SELECT state FROM statifier_fan_outs WHERE parent_id = %s"
    assert await scalar(store, state, [key.parent_id]) == "abandoned"


async def test_an_open_fan_out_pins_its_children_revision_and_new_fan_outs_skip_retired_ones(
    fan_executions: Executions,
) -> None:
    name = unique("pinned_child")
    first = chart(CHILD_BODY, name=name)
    await fan_executions.register(first)
    key = await mapping(fan_executions)
    await start(fan_executions, key, 0, 2, "now", chart=name)  # finished: pins nothing
    with pytest.raises(RetirementRefused) as caught:  # child 1 is still to come
        await fan_executions.retire(first.identity)
    assert caught.value.pins.counts["fan_outs"] == {"open": 1}
    assert caught.value.pins.counts["executions"] == {"active": 0, "needs_migration": 0}

    await start(fan_executions, key, 1, 2, "now", chart=name)  # settles the fan-out
    await fan_executions.retire(first.identity)
    later = await mapping(fan_executions)
    with pytest.raises(ChartNotRegistered):  # the only revision of that name is retired
        await start(fan_executions, later, 0, 1, "now", chart=name)
    second = chart(CHILD_BODY.replace("'x' * 600", "'y' * 600"), name=name)
    await fan_executions.register(second)
    created = await start(fan_executions, later, 0, 1, "now", chart=name)
    assert (await fan_executions.get(created.execution_id)).chart_identity == second.identity
