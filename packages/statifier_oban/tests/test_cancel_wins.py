"""Cancel always wins: a timer job fetched before its send was cancelled never drives the
execution (issue 18, SCXML 6.3).

A real worker fetches the ``hold`` job (it is ``executing``); the delivery is held between
the fetch and the fire (``HeldTimerDelivery``) while a step cancels the send (the cancel
skips executing jobs, as it should): by a re-arm, a plain ``<cancel>``, by leaving the
state, or ``Executions.cancel`` (what ``statifier-oban executions cancel`` runs). Released,
the job finds its send no longer armed: it is cancelled with the reason on its row and in
``timer.discarded``, and the execution is as the cancelling step left it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import statifier
from statifier.core.events import Event
from statifier_oban.workers import TIMER_WORKER

from oban_support.common import (
    capture_telemetry,
    database_fixture,
    job_rows,
    unique,
    wait_for_state,
)
from oban_support.executions import HeldTimerDelivery, Rig, running_rig
from oban_support.harness import Servers, servers_fixture, set_due_now
from tests.drivers.cancel_races import HOLD as CANCEL_RACE_CHART

database = database_fixture()
servers = servers_fixture()

HOLD = statifier.compile(CANCEL_RACE_CHART.format(rearmed="1h"))

DISCARDED = "statifier_oban.timer.discarded"
FIRED = "statifier_oban.timer.fired"


@pytest_asyncio.fixture
async def rig(servers: Servers) -> AsyncIterator[Rig]:
    """A running rig whose timer deliveries are held between fetch and fire."""
    async with running_rig(servers, delivery=HeldTimerDelivery) as world:
        yield world


async def hold_jobs(rig: Rig, execution_id: str) -> list[Any]:
    """The execution's timer job rows, oldest first."""
    return await job_rows(
        rig.server.pool,
        "worker = %s AND args->>'scope' = %s ORDER BY id",
        [TIMER_WORKER, execution_id],
    )


async def fetched_hold(rig: Rig, execution_id: str) -> int:
    """Make the hold due and wait until a worker holds it between fetch and fire."""
    await rig.executions.create(HOLD, execution_id=execution_id)
    [job] = await hold_jobs(rig, execution_id)
    assert HeldTimerDelivery.fetched is not None
    await set_due_now(rig.server.pool, job.id)
    await wait_for_state(rig.server.pool, job.id, "executing")
    await HeldTimerDelivery.fetched.wait()
    return int(job.id)


@pytest.mark.parametrize(
    ("race", "status", "configuration"),
    [
        ("rearm", "active", ("held",)),
        ("drop", "active", ("held",)),
        ("leave", "active", ("waiting",)),
        ("executions cancel", "cancelled", None),
    ],
)
async def test_a_timer_cancelled_while_its_job_ran_never_drives_the_execution(
    rig: Rig, race: str, status: str, configuration: tuple[str, ...] | None
) -> None:
    execution_id = unique("exe")
    with capture_telemetry() as captured:
        job_id = await fetched_hold(rig, execution_id)
        if race == "executions cancel":
            await rig.executions.cancel(execution_id)
        else:
            await rig.executions.step(execution_id, Event(name=race))
        assert HeldTimerDelivery.release is not None
        HeldTimerDelivery.release.set()
        row = await wait_for_state(rig.server.pool, job_id, "cancelled", "completed")
    assert row.state == "cancelled"
    assert "discarded: cancelled" in row.error_text
    [discarded] = captured.named(DISCARDED, scope=execution_id)
    assert (discarded["reason"], discarded["job_id"]) == ("cancelled", job_id)
    assert captured.named(FIRED, scope=execution_id) == []
    execution = await rig.executions.get(execution_id)
    assert execution.status == status
    assert execution.step_count == 2  # create, and the cancelling step: the fire applied nothing
    if configuration is not None:
        _, state = await rig.executions.load(execution_id)
        assert state.active_leaf_ids() == configuration


async def test_the_rearmed_hold_stays_armed_and_fires_later(rig: Rig) -> None:
    execution_id = unique("exe")
    old = await fetched_hold(rig, execution_id)
    await rig.executions.step(execution_id, Event(name="rearm"))
    assert HeldTimerDelivery.release is not None
    HeldTimerDelivery.release.set()
    await wait_for_state(rig.server.pool, old, "cancelled")
    [_, new] = await hold_jobs(rig, execution_id)
    assert new.state == "scheduled"
    await set_due_now(rig.server.pool, new.id)
    await wait_for_state(rig.server.pool, new.id, "completed")
    execution = await rig.executions.get(execution_id)
    assert execution.status == "completed"
    assert execution.outcome == {"configuration": ["expired"], "donedata": None}
