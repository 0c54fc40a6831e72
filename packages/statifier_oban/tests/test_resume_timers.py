"""A live session resumed from an earlier position finds its timers as that position left
them (ADR 14).

A live session stores a step's timers and cancels before the step takes effect, and its
host saves the position after. A process that dies between the two leaves the writes of a
step its saved position does not hold: a hold cancelled, a timeout armed. Resumed from
that position, the session has not run that step, so its store puts the timers back as the
position left them: the cancelled hold pending again, the timeout cancelled; and the
session's next sends take ordinals after every stored row, so none of them is mistaken
for the lost step's (a timer job is unique by ``(scope, ordinal)``, and a send that met a
lost row was never stored: a hold that never expired).
"""

from __future__ import annotations

import json
import logging

import pytest
from statifier.budget import MAX_LIMIT
from statifier.core.position import dumps
from statifier.runtime.session import Session
from statifier_oban import SessionIdNotFree
from statifier_oban.timers import _schedule
from statifier_oban.timers._host import DurableTimers

from oban_support.common import (
    Sessions,
    chart,
    database_fixture,
    execute,
    job_row,
    sessions_fixture,
    unique,
    wait_until,
)
from oban_support.harness import Servers, send_delayed, servers_fixture, timer_rows

CARD = chart(
    """
    <datamodel><data id="expirations" expr="0"/></datamodel>
    <state id="authorized">
      <onentry><send id="hold" event="authorization.expired" delay="1500ms"/></onentry>
      <onexit><cancel sendid="hold"/></onexit>
      <transition event="authorization.expired" target="expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
      <transition event="capture" target="capturing"/>
      <transition event="extend" target="authorized"/>
      <transition event="disarm" target="disarmed"/>
    </state>
    <state id="disarmed"/>
    <state id="capturing">
      <onentry><send id="timeout" event="capture.timeout" delay="60s"/></onentry>
      <transition event="capture.timeout" target="authorized"/>
    </state>
    <state id="expired"/>
    """
)

database = database_fixture()
servers = servers_fixture()
sessions = sessions_fixture()


async def lost_capture(servers: Servers, sessions: Sessions, scope: str) -> tuple[bytes, int]:
    """Arm the hold and save; then ``capture`` (the hold cancelled, a timeout armed), a
    step whose position is never saved. Returns the saved position and the hold's job."""
    server = await servers.start()
    session = await sessions.start(
        CARD, session_id=scope, delayed_sends=DurableTimers(server.config())
    )
    saved = dumps(session.snapshot())
    session.send_event("capture")
    await wait_until(lambda: session.status().configuration == ("capturing",))
    await session.stop()  # the process dies before the capture's position is saved
    hold, timeout = await timer_rows(server.pool, scope)
    assert (hold.args["send_id"], hold.state) == ("hold", "cancelled")
    assert (timeout.args["send_id"], timeout.args["ordinal"], timeout.state) == (
        "timeout",
        3,
        "scheduled",
    )
    return saved, hold.id


async def test_a_resumed_session_gets_its_cancelled_hold_back_and_it_expires_once(
    servers: Servers, sessions: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    scope = unique("resume_hold")
    saved, hold_id = await lost_capture(servers, sessions, scope)
    caplog.set_level(logging.WARNING, logger="statifier_oban.timers")
    server = servers.servers[-1]
    resumed = await sessions.start(CARD, resume=saved, delayed_sends=DurableTimers(server.config()))
    rows = {row.args["send_id"]: row for row in await timer_rows(server.pool, scope)}
    assert rows["hold"].state in ("scheduled", "available")
    assert "cancelled_by" not in rows["hold"].meta
    assert "restored" in rows["hold"].errors[-1]["error"]
    assert rows["timeout"].state == "cancelled"
    assert "after the resumed position" in rows["timeout"].errors[-1]["error"]
    [warning] = [r.getMessage() for r in caplog.records if "resumed" in r.getMessage()]
    assert "timer counter 1," in warning
    assert "1 put back, 1 cancelled" in warning

    await wait_until(lambda: resumed.status().configuration == ("expired",), timeout=10)
    assert resumed.snapshot().datamodel["expirations"] == 1
    assert (await job_row(server.pool, hold_id)).state == "completed"


async def test_a_resumed_sessions_sends_never_meet_the_lost_steps_ordinals(
    servers: Servers, sessions: Sessions
) -> None:
    scope = unique("resume_ordinals")
    saved, hold_id = await lost_capture(servers, sessions, scope)
    server = servers.servers[-1]
    resumed = await sessions.start(CARD, resume=saved, delayed_sends=DurableTimers(server.config()))
    assert resumed.snapshot().timer_counter == 3  # after the lost timeout's ordinal
    resumed.send_event("extend")  # the hold cancelled and armed again
    await wait_until(lambda: resumed.snapshot().timer_counter == 5)
    rows = await timer_rows(server.pool, scope)
    assert [(r.args["send_id"], r.args["ordinal"], r.state) for r in rows] == [
        ("hold", 1, "cancelled"),
        ("timeout", 3, "cancelled"),
        ("hold", 5, "scheduled"),
    ]
    assert rows[0].id == hold_id


@pytest.mark.parametrize(
    ("event", "counter"),
    [("capture", 3), ("disarm", 2)],  # the last ordinal a send's, or the cancel's own
)
async def test_a_session_resumed_from_its_last_position_changes_no_timer(
    servers: Servers, sessions: Sessions, event: str, counter: int
) -> None:
    scope = unique("resume_same")
    server = await servers.start()
    positions: list[bytes] = []

    def save(session: Session) -> None:
        positions.append(dumps(session.snapshot()))

    session = await sessions.start(
        CARD, session_id=scope, delayed_sends=DurableTimers(server.config()), on_step=save
    )
    session.send_event(event)
    await wait_until(lambda: len(positions) == 2)
    await session.stop()
    before = [(r.id, r.state, r.meta, r.errors) for r in await timer_rows(server.pool, scope)]
    assert before[0][1] == "cancelled"
    assert before[0][2]["cancelled_by"] == 2
    resumed = await sessions.start(
        CARD, resume=positions[-1], delayed_sends=DurableTimers(server.config())
    )
    after = [(r.id, r.state, r.meta, r.errors) for r in await timer_rows(server.pool, scope)]
    assert after == before
    assert resumed.snapshot().timer_counter == counter


async def test_the_top_ordinal_counts_only_ordinals_a_session_wrote(servers: Servers) -> None:
    """At most ``MAX_LIMIT`` (what a position holds), a JSON integer of at most 19
    characters: anything else in a row is no ordinal of ours, and is not counted."""
    client = await servers.build()  # never started: a client
    config = client.config()
    tops: list[int] = []
    for n, extra in enumerate([MAX_LIMIT, MAX_LIMIT + 1, "2.5", "7.0", "10000000000000000000"]):
        scope = unique(f"top_{n}")
        await _schedule.schedule(config, scope, send_delayed(ordinal=2, delay_ms=600_000))
        job = await _schedule.schedule(
            config, scope, send_delayed(ordinal=3, delay_ms=600_000, send_id="other")
        )
        await execute(
            client.pool,
            "UPDATE oban_jobs SET args = jsonb_set(args, '{ordinal}', %s::jsonb) WHERE id = %s",
            [json.dumps(extra) if isinstance(extra, int) else extra, job.job_id],
        )
        async with client.pool.connection() as conn, conn.transaction():
            rebased = await _schedule.rebase(config, scope, 2, conn=conn)
        tops.append(rebased.top_ordinal)
    assert tops == [MAX_LIMIT, 2, 2, 7, 2]


async def test_a_fresh_session_under_an_id_with_earlier_timers_is_refused(
    servers: Servers, sessions: Sessions
) -> None:
    """Its ordinals would start at 1 again: its hold would meet the earlier hold's row
    and never be stored."""
    scope = unique("fresh_taken")
    server = await servers.start()
    first = await sessions.start(
        CARD, session_id=scope, delayed_sends=DurableTimers(server.config())
    )
    await first.stop()
    [row] = await timer_rows(server.pool, scope)
    with pytest.raises(SessionIdNotFree) as refused:
        await sessions.start(CARD, session_id=scope, delayed_sends=DurableTimers(server.config()))
    assert refused.value.scope == scope
    assert [r.id for r in await timer_rows(server.pool, scope)] == [row.id]
    await execute(server.pool, "DELETE FROM oban_jobs WHERE id = %s", [row.id])
    again = await sessions.start(
        CARD, session_id=scope, delayed_sends=DurableTimers(server.config())
    )  # the lease was given back, and the id is free once the rows are gone
    [stored] = await timer_rows(server.pool, scope)
    assert (stored.args["ordinal"], stored.state) == (1, "scheduled")
    await again.stop()
