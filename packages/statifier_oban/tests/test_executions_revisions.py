"""Chart revisions of durable executions on real oban jobs: a migrated execution takes the
timer its old revision armed, a parked revision resumes after unpark, and pending timers
pin a revision (the library-hold story of the durable-timers seed); a running invocation
answers into the migrated execution.

Each test runs a server-mode Oban (queues of its own) in this process, on the module's
database, delivering into the ``Executions`` the rig installed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import statifier
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_oban.executions import TimerPins, execution_config
from statifier_persistence import PinSource, RetirementRefused

from oban_support.common import (
    NS,
    database_fixture,
    job_row,
    unique,
    wait_for_state,
    wait_until,
)
from oban_support.executions import GatedHandler, Rig, running_rig
from oban_support.harness import Servers, servers_fixture, set_due_now, timer_rows

database = database_fixture()
servers = servers_fixture()

LIBRARY_HOLD = f"""<scxml {NS} name="library_hold" initial="on_hold">
  <datamodel><data id="window" expr="'1h'"/></datamodel>
  <state id="on_hold">
    <onentry><send id="pickup" event="pickup.expired" delayexpr="window"/></onentry>
    <onexit><cancel sendid="pickup"/></onexit>
    <transition event="pickup.expired" target="returned_to_shelf"/>
    <transition event="hold.cancelled" target="withdrawn"/>
    <transition event="picked_up" target="lent"/>
  </state>
  <final id="returned_to_shelf"/>
  <final id="withdrawn"/>
  <final id="lent"/>
</scxml>"""


def hold_revision(**renames: str) -> statifier.Machine:
    """A revision of the library hold no other test uses, with ``renames`` of state ids."""
    source = LIBRARY_HOLD
    for old, new in renames.items():
        source = source.replace(f'"{old}"', f'"{new}"')
    return statifier.compile(source, version=unique("v"))


@pytest_asyncio.fixture
async def rig(servers: Servers) -> AsyncIterator[Rig]:
    """A running rig for this test."""
    async with running_rig(servers) as world:
        yield world


async def only_timer(rig: Rig, execution_id: str) -> Any:
    """The execution's one timer job row."""
    (row,) = await timer_rows(rig.server.pool, execution_id)
    return row


async def finished(rig: Rig, execution_id: str) -> str | None:
    """The execution's status once it is terminal (None before)."""
    status = (await rig.executions.get(execution_id)).status
    return status if status in ("completed", "cancelled", "failed") else None


async def test_a_renamed_state_migrates_and_the_pending_timer_fires_into_it(rig: Rig) -> None:
    v1 = hold_revision()
    v2 = hold_revision(on_hold="awaiting_pickup", returned_to_shelf="reshelved")
    execution_id = unique("hold")
    await rig.executions.create(v1, execution_id=execution_id)
    job = await only_timer(rig, execution_id)

    migrated = await rig.executions.migrate(
        execution_id, v2, state_map={"on_hold": "awaiting_pickup"}
    )
    assert migrated.state.active_leaf_ids() == ("awaiting_pickup",)
    assert (await only_timer(rig, execution_id)).id == job.id  # the same job, untouched

    await set_due_now(rig.server.pool, job.id)
    await wait_for_state(rig.server.pool, job.id, "completed", timeout=10)
    execution = await rig.executions.get(execution_id)
    assert execution.status == "completed"
    assert execution.chart_identity == v2.identity
    assert execution.outcome is not None
    assert execution.outcome["configuration"] == ["reshelved"]  # the new revision's state


async def test_a_parked_revision_snoozes_its_timers_and_resumes_after_unpark(rig: Rig) -> None:
    v1 = hold_revision()
    v2 = hold_revision(on_hold="awaiting_pickup")
    execution_id = unique("hold")
    await rig.executions.create(v1, execution_id=execution_id)
    job = await only_timer(rig, execution_id)
    parked = await rig.executions.park_all(v1.identity)
    assert parked.done == (execution_id,)
    await set_due_now(rig.server.pool, job.id)

    async def snoozed() -> Any:
        row = await job_row(rig.server.pool, job.id)
        return row if row.meta.get("snoozed") == 1 and row.state == "scheduled" else None

    await wait_until(snoozed, timeout=10, what="the timer of the parked execution snoozed")
    moved = await rig.executions.migrate_all(
        v1.identity, v2, state_map={"on_hold": "awaiting_pickup"}
    )
    assert moved.done == (execution_id,)
    assert (await rig.executions.get(execution_id)).status == "needs_migration"
    unparked = await rig.executions.unpark_all(v2.identity)
    assert unparked.done == (execution_id,)
    await set_due_now(rig.server.pool, job.id)
    await wait_for_state(rig.server.pool, job.id, "completed", timeout=10)
    assert await finished(rig, execution_id) == "completed"


async def test_a_pending_pickup_timer_pins_the_chart_until_it_fires(rig: Rig) -> None:
    chart = hold_revision()
    execution_id = unique("hold")
    await rig.executions.create(chart, execution_id=execution_id)
    timers = TimerPins(rig.config)
    assert isinstance(timers, PinSource)
    with pytest.raises(RetirementRefused) as caught:
        await rig.executions.retire(chart.identity, pin_sources=[timers])
    assert caught.value.pins.counts == {
        "executions": {"active": 1, "needs_migration": 0},
        "fan_outs": {"open": 0},
        "invoked_by": {"revisions": 0},
        "timers": {"timers": 1},
    }
    job = await only_timer(rig, execution_id)
    await set_due_now(rig.server.pool, job.id)
    await wait_for_state(rig.server.pool, job.id, "completed", timeout=10)
    retired = await rig.executions.retire(chart.identity, pin_sources=[timers])
    assert retired.retired_at is not None


async def test_a_cancelled_pickup_timer_unpins_the_chart(rig: Rig) -> None:
    chart = hold_revision()
    execution_id = unique("hold")
    await rig.executions.create(chart, execution_id=execution_id)
    timers = TimerPins(lambda: rig.config)  # the config read on every question
    with pytest.raises(RetirementRefused, match="timers: timers=1"):
        await rig.executions.retire(chart.identity, pin_sources=[timers])
    await rig.executions.step(execution_id, Event(name="hold.cancelled"))
    assert (await only_timer(rig, execution_id)).state == "cancelled"
    retired = await rig.executions.retire(chart.identity, pin_sources=[timers])
    assert retired.executions == {"completed": 1}


async def test_a_timer_left_by_a_finished_execution_pins_until_it_is_gone(rig: Rig) -> None:
    # a revision whose final states leave the pickup timer armed (no onexit cancel)
    chart = statifier.compile(
        LIBRARY_HOLD.replace('<onexit><cancel sendid="pickup"/></onexit>', ""),
        version=unique("v"),
    )
    execution_id = unique("hold")
    await rig.executions.create(chart, execution_id=execution_id)
    await rig.executions.step(execution_id, Event(name="picked_up"))
    timers = TimerPins(rig.config)
    report = await rig.executions.pins(chart.identity, pin_sources=[timers])
    assert report.counts["executions"] == {"active": 0, "needs_migration": 0}
    assert report.counts["timers"] == {"timers": 1}
    with pytest.raises(RetirementRefused, match="timers=1"):
        await rig.executions.retire(chart.identity, pin_sources=[timers])
    job = await only_timer(rig, execution_id)
    await set_due_now(rig.server.pool, job.id)
    fired = await wait_for_state(rig.server.pool, job.id, "cancelled", timeout=10)
    assert "discarded: completed" in fired.error_text
    await rig.executions.retire(chart.identity, pin_sources=[timers])


async def test_timer_pins_that_cannot_count_refuse(rig: Rig, servers: Servers) -> None:
    chart = hold_revision()
    execution_id = unique("hold")
    await rig.executions.create(chart, execution_id=execution_id)
    await rig.executions.step(execution_id, Event(name="picked_up"))  # nothing pins it...
    closed: AsyncConnectionPool = await servers.pool(max_size=1)
    await closed.close()
    unreachable = Oban(pool=closed, name=unique("closed"))
    timers = TimerPins(execution_config(unreachable, timers_queue="t"))
    with pytest.raises(RetirementRefused, match="timers raised StoreUnavailable"):
        await rig.executions.retire(chart.identity, pin_sources=[timers])  # ...but who knows
    assert (await rig.executions.revision(chart.identity)).retired_at is None
    assert await TimerPins(rig.config).pins(chart.identity, []) == {"timers": 0}


GATED = f"""<scxml {NS} name="gated" initial="working">
  <state id="working">
    <invoke id="slow" type="test:gated"/>
    <transition event="done.invoke.slow" target="answered"/>
  </state>
  <state id="answered"/>
</scxml>"""


async def test_a_running_invocation_answers_into_the_migrated_execution(rig: Rig) -> None:
    assert GatedHandler.gate is not None
    assert GatedHandler.started is not None
    v1 = statifier.compile(GATED, version=unique("v"))
    v2 = statifier.compile(
        GATED.replace('"working"', '"processing"').replace('"answered"', '"replied"'),
        version=unique("v"),
    )
    execution_id = unique("exe")
    await rig.executions.create(v1, execution_id=execution_id)
    await wait_until(GatedHandler.started.is_set, timeout=10, what="the handler running")
    migrated = await rig.executions.migrate(execution_id, v2, state_map={"working": "processing"})
    assert set(migrated.state.live_invocations()) == {"slow"}  # the same invoke id
    GatedHandler.gate.set()

    async def replied() -> bool:
        _, state = await rig.executions.load(execution_id)
        leaves: tuple[str, ...] = state.active_leaf_ids()
        return leaves == ("replied",)

    await wait_until(replied, timeout=10, what="the answer stepped into revision 2")
