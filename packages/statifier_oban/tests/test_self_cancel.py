"""A fired timer whose delivery cancels its own send id must not kill itself.

A fired timer usually drives the chart out of the state that armed it, and that state's
``onexit`` cancels the same send id, while the job is still ``executing``. The cancel must
leave the executing job alone (it completes) and still reach pending jobs under that id.
Runs on a real queue, with the cancel issued from inside the running delivery.
"""

from __future__ import annotations

import asyncio
from typing import Any

from oban import current_job
from statifier.core import effects as fx
from statifier.runtime.session import Session
from statifier_oban import Delivered
from statifier_oban.delivery import SessionDelivery
from statifier_oban.telemetry import TIMER_CANCELLED, TIMER_FIRED
from statifier_oban.timers import _schedule
from statifier_oban.timers._host import DurableTimers

from oban_support.common import (
    SETTLED,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
    job_row,
    sessions_fixture,
    unique,
    wait_for_state,
    wait_until,
)
from oban_support.deliveries import SCRIPTS, ScriptedDelivery, forget
from oban_support.harness import (
    Server,
    cancel_effect,
    scope_fixture,
    send_delayed,
    server_fixture,
    timer_rows,
)

# Two sends under one id: the short one fires, the long one is its pending twin. Leaving
# "authorized" cancels "hold", from the macrostep the fired event starts.
ARMED = chart(
    """
    <state id="authorized">
      <onentry>
        <send id="hold" event="authorization.expired" delay="200ms"/>
        <send id="hold" event="authorization.expired" delay="60s"/>
      </onentry>
      <onexit><cancel sendid="hold"/></onexit>
      <transition event="authorization.expired" target="expired"/>
    </state>
    <state id="expired"/>
    """
)


database = database_fixture()
server = server_fixture()
sessions = sessions_fixture()
scope = scope_fixture("self")


class SelfCancelling:
    """A delivery script that cancels its own ``(scope, send_id)`` mid-delivery, like onexit."""

    def __init__(self, server: Server, scope: str) -> None:
        self.server = server
        self.config = server.config(delivery=ScriptedDelivery)
        self.counts: list[int] = []
        self.states_during: list[str] = []
        SCRIPTS[scope] = self.deliver

    async def deliver(self, scope: str, effect: fx.SendDelayed) -> Any:
        """Cancel the send id while this very job is executing, then report delivered."""
        job = current_job()
        assert job is not None
        assert job.id is not None
        self.states_during.append((await job_row(self.server.pool, job.id)).state)
        cancel = cancel_effect(effect.send_id)
        self.counts.append(await _schedule.cancel_timers(self.config, scope, cancel))
        return Delivered()


async def test_a_delivery_cancelling_its_own_send_id_gets_zero_and_still_completes(
    server: Server, scope: str
) -> None:
    script = SelfCancelling(server, scope)
    with capture_telemetry() as seen:
        job = await _schedule.schedule(script.config, scope, send_delayed(delay_ms=100))
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert script.states_during == ["executing"]
    assert script.counts == [0]
    assert row.state == "completed", row.error_text
    assert row.errors == []
    [cancelled] = seen.named(TIMER_CANCELLED, scope)
    assert cancelled["count"] == 0
    assert len(seen.named(TIMER_FIRED, scope)) == 1


async def test_a_self_cancel_reaches_the_pending_twin_under_the_same_send_id(
    server: Server, scope: str
) -> None:
    script = SelfCancelling(server, scope)
    fired = await _schedule.schedule(script.config, scope, send_delayed(ordinal=1, delay_ms=100))
    twin = await _schedule.schedule(script.config, scope, send_delayed(ordinal=2, delay_ms=60_000))
    other = await _schedule.schedule(
        script.config, scope, send_delayed(ordinal=3, send_id="other", delay_ms=60_000)
    )
    row = await wait_for_state(server.pool, fired.job_id, *SETTLED)
    assert script.states_during == ["executing"]
    assert script.counts == [1]
    assert row.state == "completed", row.error_text
    twin_row = await job_row(server.pool, twin.job_id)
    assert twin_row.state == "cancelled"
    assert "cancelled: <cancel sendid='hold'>" in twin_row.error_text
    assert (await job_row(server.pool, other.job_id)).state == "scheduled"


async def test_end_to_end_the_onexit_cancel_after_a_fire_spares_the_fired_job(
    server: Server, sessions: Sessions
) -> None:
    """The default delivery, unchanged: whatever the race with oban's ack, never cancelled."""
    scope = unique("e2e")
    states_at_cancel: list[str] = []

    async def observe(_sid: str, message: Any) -> None:
        if isinstance(message, fx.Cancel):
            states_at_cancel.extend(r.state for r in await timer_rows(server.pool, scope))

    with capture_telemetry() as seen:
        session = await sessions.start(
            ARMED,
            session_id=scope,
            delayed_sends=DurableTimers(server.config()),
            subscribers=[observe],
        )
        assert session.status().pending_timers == 0
        fired, twin = await timer_rows(server.pool, scope)
        await wait_until(lambda: session.status().configuration == ("expired",))
        row = await wait_for_state(server.pool, fired.id, *SETTLED)
        await wait_until(lambda: seen.named(TIMER_CANCELLED, scope))
        # The subscriber reads both rows after the cancel's telemetry: wait for it.
        await wait_until(lambda: len(states_at_cancel) == 2)
    assert row.state == "completed", row.error_text
    assert (await job_row(server.pool, twin.id)).state == "cancelled"
    [cancelled] = seen.named(TIMER_CANCELLED, scope)
    assert cancelled["count"] == 1  # the twin, never the fired job
    # Subscribers see a step once its durable writes are done (ADR 14): the cancel has
    # already reached the twin when its effect is published.
    assert states_at_cancel[1] == "cancelled"
    assert states_at_cancel[0] in ("executing", "completed")


async def test_end_to_end_the_onexit_cancel_runs_while_the_fired_job_executes(
    server: Server, sessions: Sessions
) -> None:
    """The delivery waits until the session has processed the event (and so run its onexit
    cancel) before it answers: the cancel provably meets the fired job ``executing``."""
    scope = unique("e2e_sync")
    processed = asyncio.Event()
    states_at_cancel: list[str] = []

    async def observe(_sid: str, message: Any) -> None:
        if isinstance(message, fx.Cancel):
            states_at_cancel.extend(r.state for r in await timer_rows(server.pool, scope))

    def stepped(session: Session) -> None:
        if session.status().configuration == ("expired",):
            processed.set()

    async def deliver_and_settle(scope: str, effect: fx.SendDelayed) -> Any:
        answer = SessionDelivery().deliver(scope, effect)
        await asyncio.wait_for(processed.wait(), 5)
        return answer

    SCRIPTS[scope] = deliver_and_settle
    try:
        with capture_telemetry() as seen:
            session = await sessions.start(
                ARMED,
                session_id=scope,
                delayed_sends=DurableTimers(server.config(delivery=ScriptedDelivery)),
                subscribers=[observe],
                on_step=stepped,
            )
            fired, twin = await timer_rows(server.pool, scope)
            row = await wait_for_state(server.pool, fired.id, *SETTLED)
        assert session.status().configuration == ("expired",)
        assert states_at_cancel == ["executing", "cancelled"]  # published after the write
        assert row.state == "completed", row.error_text
        assert (await job_row(server.pool, twin.id)).state == "cancelled"
        [cancelled] = seen.named(TIMER_CANCELLED, scope)
        assert cancelled["count"] == 1
        assert len(seen.named(TIMER_FIRED, scope)) == 1
    finally:
        forget(scope)
