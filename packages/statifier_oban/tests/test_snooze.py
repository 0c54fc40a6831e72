"""A delivery answering ``Snoozed(s)``: a parked execution asks again later, spending nothing.

The delivery (``ScriptedDelivery``) plays a host whose execution is parked: while parked it
answers ``Snoozed(60)``; once unparked it feeds the live session like the default delivery.
Runs on a real queue; "later" is brought forward by moving ``scheduled_at`` to now.
"""

from __future__ import annotations

from typing import Any

from statifier.core.effects import SendDelayed
from statifier_oban import Snoozed, pending_for
from statifier_oban.delivery import SessionDelivery
from statifier_oban.telemetry import TIMER_DISCARDED, TIMER_FIRED, TIMER_SCHEDULED
from statifier_oban.timers import _schedule

from oban_support.common import (
    JobRow,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
    job_row,
    sessions_fixture,
    wait_for_state,
    wait_until,
)
from oban_support.deliveries import CALLS, SCRIPTS, ScriptedDelivery
from oban_support.harness import (
    Server,
    cancel_effect,
    scope_fixture,
    send_delayed,
    server_fixture,
    set_due_now,
)

SNOOZE_S = 60

WAITING = chart(
    """
    <state id="waiting"><transition event="authorization.expired" target="expired"/></state>
    <state id="expired"/>
    """
)


database = database_fixture()
server = server_fixture()
sessions = sessions_fixture()


class Parking:
    """The host's park switch for one scope, installed as that scope's delivery script."""

    def __init__(self, scope: str) -> None:
        self.parked = True
        SCRIPTS[scope] = self.deliver

    def deliver(self, scope: str, effect: SendDelayed) -> Any:
        """Snoozed while parked; afterwards, what the default session delivery answers."""
        if self.parked:
            return Snoozed(SNOOZE_S)
        return SessionDelivery().deliver(scope, effect)


async def snoozed(server: Server, job_id: int, times: int) -> JobRow:
    """Wait until job ``job_id`` has been snoozed ``times`` times and is scheduled again."""

    async def check() -> JobRow | None:
        row = await job_row(server.pool, job_id)
        if row.meta.get("snoozed") == times and row.state == "scheduled":
            return row
        assert row.state in ("scheduled", "available", "executing"), row.error_text
        return None

    result: JobRow = await wait_until(check, what=f"snooze #{times} of job {job_id}")
    return result


scope = scope_fixture("parked")


async def test_a_snooze_reschedules_without_spending_an_attempt_and_stays_cancellable(
    server: Server, scope: str
) -> None:
    Parking(scope)
    config = server.config(delivery=ScriptedDelivery)
    with capture_telemetry() as seen:
        # Read the row before it can run: due far out, then brought forward.
        job = await _schedule.schedule(config, scope, send_delayed(delay_ms=60_000))
        before = await job_row(server.pool, job.job_id)
        await set_due_now(server.pool, job.job_id)
        row = await snoozed(server, job.job_id, 1)

        assert row.state == "scheduled"
        assert row.errors == []
        assert row.attempts_left == before.attempts_left  # oban 0.7: attempt given back
        assert row.attempt == before.attempt == 0
        assert row.max_attempts == before.max_attempts
        assert SNOOZE_S - 2 <= row.seconds_until_scheduled() <= SNOOZE_S
        assert len(CALLS[scope]) == 1
        assert await pending_for(config, [scope]) == {scope: 1}

        # Still reached by a cancel, which then leaves nothing pending.
        assert await _schedule.cancel_timers(config, scope, cancel_effect("hold")) == 1
        cancelled = await job_row(server.pool, job.job_id)
        assert cancelled.state == "cancelled"
        assert await pending_for(config, [scope]) == {scope: 0}
    # A snooze emits nothing of ours: only the schedule and the cancel.
    names = seen.for_scope(scope)
    assert TIMER_FIRED not in names
    assert TIMER_DISCARDED not in names
    assert names[0] == TIMER_SCHEDULED


async def test_a_parked_timer_snoozes_twice_then_fires_into_the_session_after_the_unpark(
    server: Server, scope: str, sessions: Sessions
) -> None:
    session = await sessions.start(WAITING, session_id=scope)
    parking = Parking(scope)
    config = server.config(delivery=ScriptedDelivery)
    with capture_telemetry() as seen:
        # Read the row before it can run: due far out, then brought forward.
        job = await _schedule.schedule(config, scope, send_delayed(delay_ms=60_000))
        before = await job_row(server.pool, job.job_id)
        await set_due_now(server.pool, job.job_id)
        await snoozed(server, job.job_id, 1)
        await set_due_now(server.pool, job.job_id)
        row = await snoozed(server, job.job_id, 2)
        assert row.errors == []
        assert row.attempts_left == before.attempts_left
        assert row.seconds_until_scheduled() >= SNOOZE_S - 2
        assert await pending_for(config, [scope]) == {scope: 1}
        assert session.status().configuration == ("waiting",)

        parking.parked = False
        await set_due_now(server.pool, job.job_id)
        done = await wait_for_state(server.pool, job.job_id, "completed", "cancelled", "retryable")
        await wait_until(lambda: session.status().configuration == ("expired",))
    assert done.state == "completed", done.error_text
    assert done.attempt == 1  # two snoozes, one attempt
    assert done.errors == []
    assert len(CALLS[scope]) == 3
    [fired] = seen.named(TIMER_FIRED, scope)
    assert fired["attempt"] == 1
    assert await pending_for(config, [scope]) == {scope: 0}


async def test_a_snoozed_timer_of_an_execution_that_finished_meanwhile_still_discards(
    server: Server, scope: str, sessions: Sessions
) -> None:
    session = await sessions.start(WAITING, session_id=scope)
    parking = Parking(scope)
    config = server.config(delivery=ScriptedDelivery)
    with capture_telemetry() as seen:
        job = await _schedule.schedule(config, scope, send_delayed(delay_ms=100))
        await snoozed(server, job.job_id, 1)
        await session.cancel_and_wait()
        parking.parked = False
        await set_due_now(server.pool, job.job_id)
        row = await wait_for_state(server.pool, job.job_id, "completed", "cancelled", "retryable")
    assert row.state == "cancelled", row.error_text
    assert "discarded: cancelled" in row.error_text
    [discarded] = seen.named(TIMER_DISCARDED, scope)
    assert discarded["reason"] == "cancelled"
    assert seen.named(TIMER_FIRED, scope) == []
