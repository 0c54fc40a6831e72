"""Fan-out settled: a ``statifier:map`` invocation's children are durable executions, and
their finishing answers the parent's invocation once.

Each test runs the execution rig (``oban_support.executions``: a server-mode Oban running a
timers and an invoke queue in this process, an ``Executions`` whose ``ObanExecutor`` knows
``MapHandler``). The parent chart maps ``items`` over the registered child chart
``fan_child``; an item's ``mode`` says how its child ends: ``now`` (in its initial drive),
``wait`` (on an event ``go``), ``timer`` (on a timer 50 ms later), ``reject`` (in the final
state ``rejected``, which the parent names as a failure) or ``runaway`` (an eventless loop:
``failed``). Every job here is run by oban; the checks read the rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Invoke
from statifier.core.events import Event
from statifier_oban import Error, FanOut
from statifier_oban.children import MapHandler
from statifier_oban.cli import _main as cli
from statifier_oban.executions import ObanExecutor
from statifier_oban.workers import CHILD_START_WORKER
from statifier_persistence import (
    MAX_FAN_OUT_CHILDREN,
    AlreadyApplied,
    Discarded,
    Executions,
    FanOutKey,
    InvalidArgument,
    child_execution_id,
)

from oban_support.common import (
    chart,
    database_fixture,
    insert_row,
    job_rows,
    unique,
    wait_for_state,
    wait_until,
)
from oban_support.executions import Rig, running_rig
from oban_support.harness import Servers, servers_fixture

database = database_fixture()
servers = servers_fixture()

SETTLEMENT = "statifier_oban.children.SettlementWorker"
CASCADE = "statifier_oban.children.CascadeWorker"

CHILD = chart(
    """
    <datamodel><data id="item" expr="None"/></datamodel>
    <state id="start">
      <transition cond="item['mode'] == 'now'" target="done"/>
      <transition cond="item['mode'] == 'reject'" target="rejected"/>
      <transition cond="item['mode'] == 'runaway'" target="spin"/>
      <transition cond="item['mode'] == 'timer'" target="ticking"/>
      <transition target="waiting"/>
    </state>
    <state id="waiting"><transition event="go" target="done"/></state>
    <state id="ticking">
      <onentry><send event="go" delay="50ms"/></onentry>
      <transition event="go" target="done"/>
    </state>
    <state id="spin"><transition target="spun"/></state>
    <state id="spun"><transition target="spin"/></state>
    <final id="done"><donedata><param name="n" expr="item['n']"/></donedata></final>
    <final id="rejected"><donedata><param name="rejected" expr="item['n']"/></donedata></final>
    """,
    name="fan_child",
)

PARENT = chart(
    """
    <datamodel>
      <data id="items" expr="[]"/><data id="on" expr="'all'"/>
      <data id="results" expr="None"/><data id="error" expr="None"/>
    </datamodel>
    <state id="mapping">
      <invoke id="map" type="statifier:map">
        <param name="items" expr="items"/>
        <param name="chart" expr="'fan_child'"/>
        <param name="on" expr="on"/>
        <param name="failed_states" expr="['rejected']"/>
      </invoke>
      <transition event="done.invoke.map" target="mapped">
        <assign location="results" expr="_event.data"/>
      </transition>
      <transition event="error.communication.invoke.map" target="failed">
        <assign location="error" expr="_event.data"/>
      </transition>
      <transition event="abort" target="aborted"/>
      <transition event="again" target="mapping"/>
    </state>
    <state id="mapped"/>
    <state id="failed"/>
    <state id="aborted"/>
    """,
    name="fan_parent",
)


@pytest_asyncio.fixture
async def rig(servers: Servers) -> AsyncIterator[Rig]:
    """A running rig with the child chart registered."""
    async with running_rig(servers) as world:
        await world.executions.register(CHILD)
        yield world


def items(*modes: str) -> list[dict[str, Any]]:
    """One item per mode, numbered."""
    return [{"n": n, "mode": mode} for n, mode in enumerate(modes)]


async def start_map(rig: Rig, item_list: list[dict[str, Any]], on: str = "all") -> str:
    """Create a parent mapping ``item_list`` under policy ``on``; its id."""
    parent_id = unique("parent")
    await rig.executions.create(
        PARENT, execution_id=parent_id, datamodel={"items": item_list, "on": on}
    )
    return parent_id


async def wait_leaf(rig: Rig, execution_id: str, leaf: str, timeout: float = 10) -> Any:
    """Wait until the execution's active leaf is ``leaf``; its (row, position)."""

    async def there() -> Any:
        execution, state = await rig.executions.load(execution_id)
        return (execution, state) if state.active_leaf_ids() == (leaf,) else None

    return await wait_until(there, timeout=timeout, what=f"{execution_id} in {leaf!r}")


async def child_ids(rig: Rig, parent_id: str) -> list[str]:
    """The ids of the children of the parent's latest fan-out, in index order."""
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT child_id FROM statifier_fan_out_children WHERE parent_id = %s"
            " AND generation = (SELECT max(generation) FROM statifier_fan_out_children"
            " WHERE parent_id = %s) ORDER BY child_index",
            [parent_id, parent_id],
        )
        return [row[0] for row in await cursor.fetchall()]


async def children(rig: Rig, parent_id: str, count: int, timeout: float = 10) -> list[Any]:
    """The rows of the ``count`` children of the parent's latest fan-out, once all exist."""

    async def created() -> Any:
        ids = await child_ids(rig, parent_id)
        return ids if len(ids) == count else None

    ids = await wait_until(created, timeout=timeout, what=f"{count} children")
    return [await rig.executions.get(child_id) for child_id in ids]


async def wait_children(rig: Rig, ids: list[str], status: str) -> None:
    """Wait until every child in ``ids`` has ``status``."""

    async def ended() -> bool:
        found = [(await rig.executions.get(child_id)).status for child_id in ids]
        return found == [status] * len(ids)

    await wait_until(ended, timeout=10, what=f"children {status}")


async def fan_out_key(rig: Rig, parent_id: str) -> FanOutKey:
    """The key of the parent's (only) fan-out, as its first start opened it."""
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT generation FROM statifier_fan_outs WHERE parent_id = %s", [parent_id]
        )
        (generation,) = await cursor.fetchone() or (None,)
    assert isinstance(generation, int)
    return FanOutKey(parent_id, "map", generation)


async def fan_out_jobs(rig: Rig, worker: str, parent_id: str) -> list[Any]:
    """The parent's settlement or cascade jobs, oldest first."""
    return await job_rows(
        rig.server.pool, "worker = %s AND args->>'scope' = %s ORDER BY id", [worker, parent_id]
    )


async def settled_jobs(rig: Rig, worker: str, parent_id: str, count: int) -> list[Any]:
    """Wait until the parent has ``count`` such jobs, none of them pending or running."""

    async def settled() -> Any:
        rows = await fan_out_jobs(rig, worker, parent_id)
        done = all(row.state in ("completed", "cancelled", "discarded") for row in rows)
        return rows if len(rows) == count and done else None

    return list(await wait_until(settled, timeout=10, what=f"{count} {worker} jobs settled"))


async def fan_out_row(rig: Rig, parent_id: str) -> tuple[Any, ...]:
    """``(state, finished, child_count, failed_index)`` of the parent's fan-out."""
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT state, finished, child_count, failed_index FROM statifier_fan_outs"
            " WHERE parent_id = %s",
            [parent_id],
        )
        rows = await cursor.fetchall()
    assert len(rows) == 1, rows
    return tuple(rows[0])


async def step_keys(rig: Rig, execution_id: str) -> list[str]:
    """The step keys applied to the execution."""
    async with rig.server.pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT key FROM statifier_step_keys WHERE execution_id = %s ORDER BY key",
            [execution_id],
        )
        return [row[0] for row in await cursor.fetchall()]


# --- settling under all ----------------------------------------------------------------


async def test_all_answers_once_with_the_donedata_in_index_order(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait", "now", "wait", "now", "wait"))
    waiting = [0, 2, 4]
    kids = await children(rig, parent_id, 5)
    assert [kid.parent.index for kid in kids] == [0, 1, 2, 3, 4]
    assert all(kid.parent.execution_id == parent_id for kid in kids)
    for index in reversed(waiting):  # finishing order is not the answer's order
        await rig.executions.step(kids[index].id, Event(name="go"))

    execution, state = await wait_leaf(rig, parent_id, "mapped")
    assert state.datamodel["results"] == [{"n": n} for n in range(5)]
    assert execution.step_count == 2  # created, then answered once
    (job,) = await settled_jobs(rig, SETTLEMENT, parent_id, 1)
    assert job.state == "completed"
    assert await step_keys(rig, parent_id) == [f"job:{job.id}"]
    assert await fan_out_row(rig, parent_id) == ("settled", 5, 5, None)
    assert await fan_out_jobs(rig, CASCADE, parent_id) == []


async def test_all_with_a_failure_waits_for_every_child_then_names_the_failures(
    rig: Rig,
) -> None:
    parent_id = await start_map(rig, items("now", "reject", "wait"))
    kids = await children(rig, parent_id, 3)
    _, state = await rig.executions.load(parent_id)
    assert state.active_leaf_ids() == ("mapping",)  # child 1 failed; child 2 still runs
    await rig.executions.step(kids[2].id, Event(name="go"))

    _, state = await wait_leaf(rig, parent_id, "failed")
    error = state.datamodel["error"]
    assert error["reason"] == "children_failed"
    assert error["failed"] == [1]
    assert error["results"] == [{"n": 0}, {"rejected": 1}, {"n": 2}]
    assert "1 of 3 children failed: 1 (completed in a failed state)" in error["detail"]
    await settled_jobs(rig, SETTLEMENT, parent_id, 1)
    assert await fan_out_jobs(rig, CASCADE, parent_id) == []


async def test_an_empty_fan_out_answers_an_empty_list_at_once(rig: Rig) -> None:
    parent_id = await start_map(rig, [])
    execution, state = await wait_leaf(rig, parent_id, "mapped")
    assert state.datamodel["results"] == []
    assert execution.step_count == 2
    starts = await job_rows(
        rig.server.pool, "worker = %s AND args->>'scope' = %s", [CHILD_START_WORKER, parent_id]
    )
    assert starts == []
    assert await fan_out_jobs(rig, SETTLEMENT, parent_id) == []


# --- first_error ----------------------------------------------------------------------


async def test_first_error_answers_the_first_failure_and_cancels_the_running_siblings(
    rig: Rig,
) -> None:
    parent_id = await start_map(rig, items("wait", "wait", "wait", "wait"), on="first_error")
    kids = await children(rig, parent_id, 4)
    await rig.executions.step(kids[1].id, Event(name="go"))  # a success settles nothing
    await rig.executions.cancel(kids[2].id)  # the first failure: an operator cancelled it

    _, state = await wait_leaf(rig, parent_id, "failed")
    error = state.datamodel["error"]
    assert error["reason"] == "child_failed"
    assert (error["index"], error["execution_id"]) == (2, kids[2].id)
    assert error["detail"] == "child 2 (cancelled) of 4 failed"

    async def siblings_cancelled() -> bool:
        found = [(await rig.executions.get(kid.id)).status for kid in kids]
        return found == ["cancelled", "completed", "cancelled", "cancelled"]

    await wait_until(siblings_cancelled, timeout=10, what="the siblings cancelled")
    (cascade,) = await settled_jobs(rig, CASCADE, parent_id, 1)
    assert cascade.state == "completed"
    await settled_jobs(rig, SETTLEMENT, parent_id, 1)
    assert await fan_out_row(rig, parent_id) == ("settled", 4, 4, 2)
    execution = await rig.executions.get(parent_id)
    assert execution.step_count == 2  # the cancelled siblings answered nothing more


async def test_first_error_on_a_runaway_child_names_its_failure(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait", "runaway"), on="first_error")
    _, state = await wait_leaf(rig, parent_id, "failed")
    error = state.datamodel["error"]
    assert error["reason"] == "child_failed"
    assert error["index"] == 1
    assert error["detail"] == "child 1 (failed: budget_exhausted) of 2 failed"
    # Child 0 is cancelled if its start came first; if not, the settled fan-out never
    # started it (no one would take its answer).
    await settled_jobs(rig, CASCADE, parent_id, 1)
    statuses = [(await rig.executions.get(i)).status for i in await child_ids(rig, parent_id)]
    assert statuses in (["cancelled", "failed"], ["failed"])


# --- idempotent child starts ----------------------------------------------------------


async def test_a_redelivered_start_adopts_the_child_it_created(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait", "wait"))
    kids = await children(rig, parent_id, 2)
    starts = await job_rows(
        rig.server.pool,
        "worker = %s AND args->>'scope' = %s ORDER BY id",
        [CHILD_START_WORKER, parent_id],
    )
    assert len(starts) == 2
    await wait_until(
        lambda: _all_completed(rig.server.pool, [row.id for row in starts]),
        what="the starts completed",
    )
    await rig.server.oban.retry_job(starts[0].id)  # as after a worker killed before its ack
    await wait_until(
        lambda: _all_completed(rig.server.pool, [starts[0].id], attempt=2),
        what="the start ran again",
    )
    again = await rig.executions.get(kids[0].id)
    assert again.step_count == kids[0].step_count == 1  # adopted, not created again

    # The same start through the API: adopted, with the same derived id.
    key = await fan_out_key(rig, parent_id)
    assert kids[1].id == child_execution_id(key, 1)
    started = await rig.executions.start_child(
        key, 1, 2, chart="fan_child", datamodel={"item": {"n": 1, "mode": "wait"}}
    )
    assert (started.outcome, started.execution_id) == ("adopted", kids[1].id)


async def test_an_index_outside_the_fan_out_is_refused(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait", "wait"))
    await children(rig, parent_id, 2)
    key = await fan_out_key(rig, parent_id)
    for index in (2, -1, 7):
        with pytest.raises(InvalidArgument, match=r"outside 0\.\.1"):
            await rig.executions.start_child(key, index, 2, chart="fan_child")
    with pytest.raises(InvalidArgument, match="has 2 children"):
        await rig.executions.start_child(key, 2, 3, chart="fan_child")
    assert await fan_out_row(rig, parent_id) == ("open", 0, 2, None)


async def test_no_child_is_started_for_an_invocation_that_is_not_live(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait"))
    await children(rig, parent_id, 1)
    stale = FanOutKey(parent_id, "other", (await fan_out_key(rig, parent_id)).generation)
    started = await rig.executions.start_child(stale, 0, 1, chart="fan_child")
    assert (started.outcome, started.reason) == ("not_needed", "invocation_not_live")
    gone = FanOutKey(unique("nobody"), "map", 1)
    started = await rig.executions.start_child(gone, 0, 1, chart="fan_child")
    assert (started.outcome, started.reason) == ("not_needed", "parent_not_found")


# --- exactly once ---------------------------------------------------------------------


async def test_settlement_is_exactly_once_under_redelivered_child_finishes(rig: Rig) -> None:
    parent_id = await start_map(rig, items("timer", "timer", "timer"))
    kids = await children(rig, parent_id, 3)
    execution, _ = await wait_leaf(rig, parent_id, "mapped")
    (settlement,) = await settled_jobs(rig, SETTLEMENT, parent_id, 1)
    finishes = []
    for kid in kids:
        (timer,) = await job_rows(
            rig.server.pool,
            "worker = 'statifier_oban.workers.TimerWorker' AND args->>'scope' = %s",
            [kid.id],
        )
        finishes.append(timer.id)
    # The parent answered once the last child's timer step committed; that timer's job is
    # acked later (in a batch), and a retry of an ``executing`` job changes nothing.
    await wait_until(
        lambda: _all_completed(rig.server.pool, [*finishes, settlement.id]),
        what="the finishing timers and the settlement acked",
    )
    # oban delivers every child's finishing timer again, and the settlement too.
    await asyncio.gather(
        *(rig.server.oban.retry_job(job_id) for job_id in [*finishes, settlement.id])
    )
    await wait_until(
        lambda: _all_completed(rig.server.pool, [*finishes, settlement.id], attempt=2),
        timeout=10,
        what="the redeliveries",
    )
    again, state = await rig.executions.load(parent_id)
    assert again.step_count == execution.step_count == 2
    assert state.datamodel["results"] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert len(await fan_out_jobs(rig, SETTLEMENT, parent_id)) == 1
    assert await fan_out_row(rig, parent_id) == ("settled", 3, 3, None)
    for kid in kids:
        assert (await rig.executions.get(kid.id)).step_count == 2  # created, one timer
    # A finishing step delivered again by its caller's key is applied once as well.
    replay = await rig.executions.step(kids[0].id, Event(name="go"), key=f"job:{finishes[0]}")
    assert isinstance(replay, AlreadyApplied)


async def test_concurrent_completions_on_two_workers_settle_once(
    rig: Rig, servers: Servers
) -> None:
    count = 12
    parent_id = await start_map(rig, items(*["wait"] * count))
    kids = await children(rig, parent_id, count)
    # A second worker: its own pool and Executions, finishing every other child at once.
    other_pool: AsyncConnectionPool = await servers.pool(max_size=8)
    other = Executions(other_pool, executor=ObanExecutor(rig.config))
    workers = [rig.executions, other]
    await asyncio.gather(
        *(workers[i % 2].step(kid.id, Event(name="go")) for i, kid in enumerate(kids))
    )
    execution, state = await wait_leaf(rig, parent_id, "mapped")
    assert state.datamodel["results"] == [{"n": n} for n in range(count)]
    assert execution.step_count == 2
    assert len(await settled_jobs(rig, SETTLEMENT, parent_id, 1)) == 1
    assert await fan_out_row(rig, parent_id) == ("settled", count, count, None)


# --- the parent moved on ----------------------------------------------------------------


async def test_a_parent_that_left_the_state_gets_nothing_and_its_children_are_cancelled(
    rig: Rig,
) -> None:
    parent_id = await start_map(rig, items("wait", "wait", "wait"))
    kids = await children(rig, parent_id, 3)
    await rig.executions.step(parent_id, Event(name="abort"))

    await wait_children(rig, [kid.id for kid in kids], "cancelled")
    (cascade,) = await settled_jobs(rig, CASCADE, parent_id, 1)
    assert cascade.state == "completed"
    assert await fan_out_row(rig, parent_id) == ("abandoned", 3, 3, None)
    late = await rig.executions.step(kids[0].id, Event(name="go"))
    assert isinstance(late, Discarded)
    assert await fan_out_jobs(rig, SETTLEMENT, parent_id) == []
    execution, state = await rig.executions.load(parent_id)
    assert state.active_leaf_ids() == ("aborted",)
    assert execution.step_count == 2  # created, aborted: no answer


async def test_an_answer_settled_after_the_parent_left_is_declined(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait"))
    (kid,) = await children(rig, parent_id, 1)
    await rig.server.oban.pause_queue(rig.config.invoke_queue or "")
    try:
        await rig.executions.step(kid.id, Event(name="go"))  # settles: the answer is a job
        (pending,) = await fan_out_jobs(rig, SETTLEMENT, parent_id)
        assert pending.state == "available"
        await rig.executions.step(parent_id, Event(name="abort"))
    finally:
        await rig.server.oban.resume_queue(rig.config.invoke_queue or "")
    (job,) = await settled_jobs(rig, SETTLEMENT, parent_id, 1)
    assert job.state == "cancelled"
    assert "discarded: invocation_not_live" in job.error_text
    _, state = await rig.executions.load(parent_id)
    assert state.active_leaf_ids() == ("aborted",)


async def test_an_answer_settled_before_the_parent_re_entered_the_state_is_discarded(
    rig: Rig,
) -> None:
    parent_id = await start_map(rig, items("wait"))
    (kid,) = await children(rig, parent_id, 1)
    queue = rig.config.invoke_queue or ""
    await rig.server.oban.pause_queue(queue)
    try:
        await rig.executions.step(kid.id, Event(name="go"))  # settles: the answer is a job
        await rig.executions.step(parent_id, Event(name="again"))  # the same invoke id, anew
    finally:
        await rig.server.oban.resume_queue(queue)
    (job,) = await settled_jobs(rig, SETTLEMENT, parent_id, 1)
    assert job.state == "cancelled"
    assert "discarded: invocation_superseded" in job.error_text

    async def renewed() -> Any:
        ids = await child_ids(rig, parent_id)
        return ids if ids and ids != [kid.id] else None

    (fresh,) = await wait_until(renewed, timeout=10, what="the new generation's child")
    await rig.executions.step(fresh, Event(name="go"))
    _, state = await wait_leaf(rig, parent_id, "mapped")
    assert state.datamodel["results"] == [{"n": 0}]


async def test_a_re_entered_invoking_state_maps_anew(rig: Rig) -> None:
    parent_id = await start_map(rig, items("wait", "wait"))
    first = await children(rig, parent_id, 2)
    old = await fan_out_key(rig, parent_id)
    await rig.executions.step(parent_id, Event(name="again"))  # leaves and re-enters
    await wait_children(rig, [kid.id for kid in first], "cancelled")
    # A start of the left generation still running now creates nothing.
    stale = await rig.executions.start_child(old, 0, 2, chart="fan_child")
    assert (stale.outcome, stale.reason) == ("not_needed", "invocation_superseded")

    async def renewed() -> Any:
        ids = await child_ids(rig, parent_id)
        return ids if len(ids) == 2 and not set(ids) & {kid.id for kid in first} else None

    fresh = await wait_until(renewed, timeout=10, what="the new generation's children")
    for child_id in fresh:
        await rig.executions.step(child_id, Event(name="go"))
    _, state = await wait_leaf(rig, parent_id, "mapped")
    assert state.datamodel["results"] == [{"n": 0}, {"n": 1}]


@pytest.mark.parametrize("worker", [SETTLEMENT, CASCADE])
@pytest.mark.parametrize(
    "args",
    [
        {"scope": "p", "invoke_id": "map", "macrostep": "1"},
        {"scope": "p", "invoke_id": "", "macrostep": 1},
        {"invoke_id": "map", "macrostep": 1},
        ["p", "map", 1],
    ],
    ids=["text-macrostep", "empty-invoke-id", "no-scope", "not-an-object"],
)
async def test_a_fan_out_job_naming_no_fan_out_is_cancelled_as_undecodable(
    rig: Rig, worker: str, args: Any
) -> None:
    queue = rig.config.invoke_queue or ""
    job_id = await insert_row(rig.server.pool, args, queue=queue, worker=worker)
    row = await wait_for_state(rig.server.pool, job_id, "cancelled", "completed", "retryable")
    assert row.state == "cancelled", row.error_text
    assert "undecodable" in row.error_text


async def test_show_tells_an_operator_how_far_a_fan_out_is(
    rig: Rig, database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parent_id = await start_map(rig, items("wait", "now", "wait"), on="first_error")
    await children(rig, parent_id, 3)
    key = await fan_out_key(rig, parent_id)
    (fan_out,) = await rig.executions.fan_outs(parent_id)
    assert (fan_out.key, fan_out.count, fan_out.finished) == (key, 3, 1)
    assert (fan_out.policy, fan_out.state) == ("first_error", "open")
    assert fan_out.chart_identity == CHILD.identity

    done = await asyncio.to_thread(
        cli.main, ["executions", "show", "--database-url", database, parent_id]
    )
    assert done == 0
    shown = capsys.readouterr().out
    assert (
        f"fan-out        map (generation {key.generation}): 1 of 3 children finished, open, "
        "on first_error"
    ) in shown


# --- the map handler ---------------------------------------------------------------------


async def test_a_map_is_never_wider_than_a_fan_out_may_be(servers: Servers) -> None:
    async with running_rig(servers, max_fan_out=MAX_FAN_OUT_CHILDREN + 5):
        assert MapHandler().config().max_fan_out == MAX_FAN_OUT_CHILDREN
    async with running_rig(servers, max_fan_out=7):
        assert MapHandler().config().max_fan_out == 7


async def test_a_map_without_a_chart_fails_and_one_over_nothing_fans_out() -> None:
    invoke = Invoke(
        invoke_id="map",
        type="statifier:map",
        src=None,
        params={"items": [1, 2]},
        content=None,
        autoforward=False,
        state_index=1,
        invoke_index=0,
        macrostep=1,
        microstep=0,
        round=0,
    )
    assert isinstance(await MapHandler().run(invoke), Error)
    invoke = dataclasses.replace(invoke, params={"items": [1, 2], "chart": "fan_child"})
    assert await MapHandler().run(invoke) == FanOut([1, 2])


async def _all_completed(pool: AsyncConnectionPool, ids: list[int], attempt: int = 1) -> bool:
    rows = await job_rows(pool, "id = ANY(%s)", [ids])
    return len(rows) == len(ids) and all(
        row.state == "completed" and row.attempt >= attempt for row in rows
    )
