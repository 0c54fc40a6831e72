"""Restart round trip: timers outlive the Oban instance and the session that scheduled them.

A "restart" stops the Oban instance and the session before the timer is due, persists the
session's position with ``statifier.core.position.dumps``, then starts a *new* Oban instance (a
new name) on the same database and resumes the session from the blob. The timer must fire
exactly once into the resumed session; replays of the same schedule must conflict.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier.runtime.session import Session
from statifier_oban.telemetry import TIMER_DISCARDED, TIMER_FIRED
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
from oban_support.harness import Server, Servers, send_delayed, servers_fixture, timer_rows

DELAY_MS = 1000  # room for stopping one instance and starting the next before it is due

RESTARTABLE = chart(
    f"""
    <datamodel><data id="expirations" expr="0"/></datamodel>
    <state id="authorized">
      <onentry><send id="hold" event="authorization.expired" delay="{DELAY_MS}ms"/></onentry>
      <onexit><cancel sendid="hold"/></onexit>
      <transition event="authorization.expired" target="expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
      <transition event="disarm" target="disarmed"/>
    </state>
    <state id="expired">
      <transition event="authorization.expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
    </state>
    <state id="disarmed">
      <transition event="authorization.expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
    </state>
    """
)


database = database_fixture()
servers = servers_fixture()
sessions = sessions_fixture()


class Run:
    """The first life: an Oban instance and a session that scheduled ``hold`` through it."""

    def __init__(self, server: Server, session: Session, effects: list[Any]) -> None:
        self.server = server
        self.session = session
        self.effects = effects

    @property
    def hold(self) -> fx.SendDelayed:
        """The scheduled effect, as the chart produced it."""
        [effect] = [e for e in self.effects if isinstance(e, fx.SendDelayed)]
        return effect

    async def die(self) -> bytes:
        """Stop the instance and the session (the timer still pending); return the position."""
        await self.server.stop()
        await self.session.stop()
        return statifier.core.position.dumps(self.session.snapshot())


async def first_life(servers: Servers, sessions: Sessions, scope: str) -> Run:
    """Start an instance and a session whose initial state schedules ``hold``."""
    server = await servers.start()
    effects: list[Any] = []
    session = await sessions.start(
        RESTARTABLE,
        session_id=scope,
        delayed_sends=DurableTimers(server.config()),
        subscribers=[lambda _sid, message: effects.append(message)],
    )
    assert session.status().pending_timers == 0
    return Run(server, session, effects)


async def _past_due(server: Server, job_id: int, margin_s: float) -> bool:
    """Whether job ``job_id`` was due more than ``margin_s`` ago (database clock)."""
    row = await job_row(server.pool, job_id)
    return -row.seconds_until_scheduled() > margin_s


async def test_a_timer_pending_across_a_restart_fires_exactly_once_into_the_resumed_session(
    servers: Servers, sessions: Sessions
) -> None:
    scope = unique("restart")
    with capture_telemetry() as seen:
        run = await first_life(servers, sessions, scope)
        [row] = await timer_rows(run.server.pool, scope)
        blob = await run.die()
        assert (await job_row(run.server.pool, row.id)).state == "scheduled"

        # Second life: the new host resumes the session before its instance runs the queue.
        after = await servers.build(run.server.queue)
        assert after.oban._name != run.server.oban._name
        resumed = await sessions.start(
            RESTARTABLE, resume=blob, delayed_sends=DurableTimers(after.config())
        )
        assert resumed.session_id == scope
        assert resumed.status().pending_timers == 0
        replay = await _schedule.schedule(after.config(), scope, run.hold)
        assert replay.conflict is True
        assert replay.job_id == row.id
        await after.oban.start()

        await wait_until(lambda: resumed.status().configuration == ("expired",))
        done = await wait_for_state(after.pool, row.id, *SETTLED)
        assert done.state == "completed", done.error_text
        assert done.attempt == 1

        later = await _schedule.schedule(after.config(), scope, run.hold)
        assert (later.conflict, later.job_id, later.state) == (True, row.id, "completed")
        await asyncio.sleep(0.4)  # several stager ticks: nothing may fire again
    assert [r.id for r in await timer_rows(after.pool, scope)] == [row.id]
    assert resumed.snapshot().datamodel["expirations"] == 1
    [fired] = seen.named(TIMER_FIRED, scope)
    assert fired["job_id"] == row.id
    assert seen.named(TIMER_DISCARDED, scope) == []


async def test_a_timer_cancelled_before_a_restart_never_fires_and_its_replay_conflicts(
    servers: Servers, sessions: Sessions
) -> None:
    scope = unique("restart_cancel")
    with capture_telemetry() as seen:
        run = await first_life(servers, sessions, scope)
        [row] = await timer_rows(run.server.pool, scope)
        run.session.send_event("disarm")
        await wait_until(lambda: run.session.status().configuration == ("disarmed",))
        assert (await job_row(run.server.pool, row.id)).state == "cancelled"
        blob = await run.die()

        after = await servers.build(run.server.queue)
        resumed = await sessions.start(
            RESTARTABLE, resume=blob, delayed_sends=DurableTimers(after.config())
        )
        replay = await _schedule.schedule(after.config(), scope, run.hold)
        assert (replay.conflict, replay.job_id, replay.state) == (True, row.id, "cancelled")
        await after.oban.start()

        # Wait until well past the time it would have fired.
        await wait_until(
            lambda: _past_due(after, row.id, 0.5), timeout=DELAY_MS / 1000 + 3, interval=0.05
        )
    final = await job_row(after.pool, row.id)
    assert final.state == "cancelled"
    assert final.attempt == 0  # never picked up
    assert [r.id for r in await timer_rows(after.pool, scope)] == [row.id]
    assert resumed.status().configuration == ("disarmed",)
    assert resumed.snapshot().datamodel["expirations"] == 0
    assert seen.named(TIMER_FIRED, scope) == seen.named(TIMER_DISCARDED, scope) == []


async def test_a_restart_without_resuming_the_session_discards_the_timer_as_terminated(
    servers: Servers, sessions: Sessions
) -> None:
    scope = unique("restart_gone")
    with capture_telemetry() as seen:
        run = await first_life(servers, sessions, scope)
        [row] = await timer_rows(run.server.pool, scope)
        await run.die()
        after = await servers.start(run.server.queue)
        done = await wait_for_state(after.pool, row.id, *SETTLED, timeout=DELAY_MS / 1000 + 5)
    assert done.state == "cancelled", done.error_text
    assert "discarded: terminated" in done.error_text
    [discarded] = seen.named(TIMER_DISCARDED, scope)
    assert discarded["reason"] == "terminated"
    assert discarded["job_id"] == row.id
    assert seen.named(TIMER_FIRED, scope) == []


# --- replays through one connection ---------------------------------------------------------

REPLAYS = 12


@pytest.mark.parametrize("how", ["schedule", "schedule_many"])
async def test_a_long_lived_host_keeps_scheduling_and_replaying_through_its_pool(
    servers: Servers, how: str
) -> None:
    """A host's pool reuses its connections: the same insert runs on one connection again
    and again (psycopg prepares it after 5 runs; PostgreSQL may then plan it generically).
    Every schedule and every replay must keep working, not only the first few."""
    host = await servers.build(pool=await servers.pool(max_size=1))  # never started: a client
    config = host.config()
    scope = unique("replays")
    effects = [send_delayed(ordinal=n, delay_ms=600_000) for n in range(1, REPLAYS + 1)]
    first: list[int] = []
    for round_ in range(2):
        for n, effect in enumerate(effects):
            if how == "schedule":
                job = await _schedule.schedule(config, f"{scope}_{n}", effect)
            else:
                [job] = await _schedule.schedule_many(config, f"{scope}_{n}", [effect])
            if round_ == 0:
                assert job.conflict is False
                first.append(job.job_id)
            else:
                assert (job.conflict, job.job_id) == (True, first[n])
