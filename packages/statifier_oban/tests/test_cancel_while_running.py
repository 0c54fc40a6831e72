"""A cancel that met a running timer job still holds after a crash and a resume (ADR 14).

A worker takes the hold's job when it falls due; before it delivers, the session leaves
the state that armed the hold, and its ``<cancel>`` reaches the store. The cancel cannot
stop a running job, so it marks it (``meta.cancel_ordinal``). Then the process dies: the
job stays ``executing``, a rescue runs it again, and it fires into the session resumed
from its saved position. That session must drop the fire when its position holds the
cancel, and take it when the cancel's step was never saved.

Runs on real queues: the first instance's delivery hangs (the job is taken and never
acked), the instance is stopped, and a second instance's lifeline rescues the job.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier.core.position import dumps
from statifier.runtime.session import Session
from statifier_oban.delivery import SessionDelivery
from statifier_oban.timers import _schedule
from statifier_oban.timers._host import DurableTimers

from oban_support.common import (
    SETTLED,
    Sessions,
    chart,
    database_fixture,
    execute,
    job_row,
    sessions_fixture,
    unique,
    wait_for_state,
    wait_until,
)
from oban_support.deliveries import SCRIPTS, ScriptedDelivery, forget
from oban_support.harness import Servers, send_delayed, servers_fixture, timer_rows

HOLD = chart(
    """
    <datamodel><data id="expirations" expr="0"/></datamodel>
    <state id="authorized">
      <onentry><send id="hold" event="authorization.expired" delay="100ms"/></onentry>
      <onexit><cancel sendid="hold"/></onexit>
      <transition event="authorization.expired" target="expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
      <transition event="disarm" target="disarmed"/>
    </state>
    <state id="expired"/>
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


class FirstLife:
    """The session's first process: its hold's job is taken by a delivery that hangs."""

    def __init__(self) -> None:
        self.taken = asyncio.Event()
        self.positions: list[bytes] = []

    async def hang(self, scope: str, effect: fx.SendDelayed) -> Any:
        """The worker has the job and never gets to deliver it (the process will die)."""
        self.taken.set()
        await asyncio.Event().wait()

    def save(self, session: Session) -> None:
        """The ``on_step`` save: every step's position."""
        self.positions.append(dumps(session.snapshot()))


async def crash_after_the_cancel(
    servers: Servers, sessions: Sessions, scope: str
) -> tuple[FirstLife, int, str]:
    """The hold's job is running when ``disarm`` cancels it; then the process dies.

    Returns the first life, the job's id and its queue."""
    server = await servers.start(shutdown_grace_period=0.2)
    life = FirstLife()
    SCRIPTS[scope] = life.hang
    session = await sessions.start(
        HOLD,
        session_id=scope,
        delayed_sends=DurableTimers(server.config(delivery=ScriptedDelivery)),
        on_step=life.save,
    )
    await asyncio.wait_for(life.taken.wait(), timeout=10)
    session.send_event("disarm")
    await wait_until(lambda: session.status().configuration == ("disarmed",))
    [row] = await timer_rows(server.pool, scope)
    marked = await job_row(server.pool, row.id)
    assert (marked.state, marked.meta.get("cancel_ordinal")) == ("executing", 2)
    await server.stop()
    await session.stop()
    assert (await job_row(server.pool, row.id)).state == "executing"  # never acked
    return life, row.id, server.queue


async def resume(
    servers: Servers, sessions: Sessions, scope: str, position: bytes, queue: str
) -> Session:
    """The second process: resume the session, then run the queue with a lifeline that
    rescues the first process's job; its delivery is the default one from now on."""

    SCRIPTS[scope] = SessionDelivery().deliver
    after = await servers.build(queue, lifeline={"interval": 0.3, "rescue_after": 1})
    resumed = await sessions.start(
        HOLD, resume=position, delayed_sends=DurableTimers(after.config())
    )
    await after.oban.start()
    return resumed


async def test_a_resumed_session_drops_a_rescued_fire_its_saved_cancel_met(
    servers: Servers, sessions: Sessions, caplog: pytest.LogCaptureFixture
) -> None:
    scope = unique("cancel_running")
    caplog.set_level(logging.INFO, logger="statifier.runtime.session")
    try:
        life, job_id, queue = await crash_after_the_cancel(servers, sessions, scope)
        saved = life.positions[-1]  # the disarm's step, its cancel included
        resumed = await resume(servers, sessions, scope, saved, queue)
        done = await wait_for_state(resumed_pool(servers), job_id, *SETTLED)
        assert done.state == "completed", done.error_text
        assert (done.attempt, done.meta.get("rescued")) == (2, 1)

        def handled() -> bool:
            """The fire reached the session: dropped (logged), or taken (counted)."""
            dropped = any("dropped durable send hold" in r.getMessage() for r in caplog.records)
            return dropped or resumed.snapshot().datamodel["expirations"] != 0

        await wait_until(handled)
        assert resumed.snapshot().datamodel["expirations"] == 0
        assert resumed.status().configuration == ("disarmed",)
    finally:
        forget(scope)


async def test_a_rescued_fire_reaches_a_session_resumed_from_before_the_cancel(
    servers: Servers, sessions: Sessions
) -> None:
    scope = unique("cancel_unsaved")
    try:
        life, job_id, queue = await crash_after_the_cancel(servers, sessions, scope)
        unsaved = life.positions[0]  # saved before the disarm: its cancel never was
        assert statifier.core.position.loads(unsaved, HOLD).timer_counter == 1
        resumed = await resume(servers, sessions, scope, unsaved, queue)
        await wait_until(lambda: resumed.status().configuration == ("expired",))
        assert resumed.snapshot().datamodel["expirations"] == 1
        done = await wait_for_state(resumed_pool(servers), job_id, *SETTLED)
        assert done.state == "completed", done.error_text
    finally:
        forget(scope)


def resumed_pool(servers: Servers) -> Any:
    """The pool of the newest instance (the second process's)."""
    return servers.servers[-1].pool


async def test_cancel_marks_are_read_as_anyone_wrote_them(
    servers: Servers, caplog: pytest.LogCaptureFixture
) -> None:
    """Each row's mark is checked as a timer row's fields are: a mark of up to 19
    characters that is an integer of at least 1 counts (the latest per send id), anything
    else is logged and skipped; finished rows and other scopes are not read."""
    client = await servers.build()  # never started: a client
    config = client.config()
    scope = unique("marks")
    marks: list[tuple[str, int, str, Any]] = [
        ("hold", 1, "executing", 3),
        ("hold", 2, "available", 5),  # rescued: the latest mark of "hold"
        ("hold", 3, "completed", 9),  # finished: it never runs again
        ("bill", 4, "retryable", 10**18),  # 19 characters
        ("late", 5, "executing", 10**19),  # 20 characters: no mark
        ("text", 6, "executing", "7"),
        ("zero", 7, "executing", 0),
        ("flag", 8, "executing", True),
    ]
    for send_id, ordinal, state, mark in marks:
        job = await _schedule.schedule(
            config, scope, send_delayed(send_id=send_id, ordinal=ordinal, delay_ms=600_000)
        )
        await execute(
            client.pool,
            "UPDATE oban_jobs SET state = %s, meta = meta || jsonb_build_object("
            "'cancel_ordinal', %s::jsonb) WHERE id = %s",
            [state, json.dumps(mark), job.job_id],
        )
    other = await _schedule.schedule(config, f"{scope}_other", send_delayed(delay_ms=600_000))
    await execute(
        client.pool,
        "UPDATE oban_jobs SET state = 'executing', meta = '{\"cancel_ordinal\": 99}' WHERE id = %s",
        [other.job_id],
    )
    caplog.set_level(logging.WARNING, logger="statifier_oban.timers")
    assert await _schedule.cancel_marks(config, scope) == {"hold": 5, "bill": 10**18}
    skipped = [r.getMessage() for r in caplog.records if "cancel mark" in r.getMessage()]
    assert len(skipped) == 4
    assert all("cancel_ordinal must be an integer >= 1" in message for message in skipped)
