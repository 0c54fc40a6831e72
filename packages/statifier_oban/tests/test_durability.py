"""Durability never degrades in silence (issue 13, ADR 14), on a real store and a real queue.

The sessions' store is a pool of one connection with a short checkout timeout; the test
takes that connection away to make the store unavailable (the pool times out, as under
exhaustion), and gives it back. The queue runs on a pool of its own.

* Unavailable store: a step that arms a timer is held, never armed in-process; it is
  stored once the store answers again (``SessionStatus.store_error`` says why meanwhile).
* The issue's race: a ``<cancel>`` that cannot reach the store is not dropped, so the old
  timer cannot fire into the re-armed state early.
* A value the store refuses (PostgreSQL cannot keep a NUL in an event name) becomes
  ``error.communication`` in the chart: no job row, no in-process timer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.runtime import registry
from statifier.runtime.session import DelayedSendsUnavailable, Session
from statifier_oban import Config, DurableTimers

from oban_support.common import (
    Sessions,
    chart,
    database_fixture,
    forget_instance,
    sessions_fixture,
    unique,
    wait_for_configuration,
    wait_until,
)
from oban_support.harness import Server, server_fixture, timer_rows

database = database_fixture()
server = server_fixture()
sessions = sessions_fixture()

ARMING = chart(
    """
    <state id="idle"><transition event="arm" target="armed"/></state>
    <state id="armed">
      <onentry><send id="reminder" event="remind" delay="60s"/></onentry>
    </state>
    """
)

HOLD_S = 1.5
"""The hold of the ``HOLD`` chart; ``extend`` re-enters the state: cancel, then re-arm."""

HOLD = chart(
    f"""
    <state id="held">
      <onentry><send id="expiry" event="expire" delay="{int(HOLD_S * 1000)}ms"/></onentry>
      <onexit><cancel sendid="expiry"/></onexit>
      <transition event="extend" target="held"/>
      <transition event="expire" target="expired"/>
    </state>
    <state id="expired"/>
    """
)

REFUSED = chart(
    """
    <state id="sending">
      <onentry><send eventexpr="'bad\\x00name'" delay="1s"/></onentry>
      <transition event="error.communication" target="failed"/>
    </state>
    <state id="failed"/>
    """
)


class Store:
    """The sessions' store: a client Oban on a one-connection pool that can be taken away."""

    def __init__(self, pool: AsyncConnectionPool, oban: Oban, queue: str) -> None:
        self.pool = pool
        self.config = Config(oban=oban, timers_queue=queue)
        self.held: Any = None

    async def take_away(self) -> None:
        """Hold the pool's only connection: every store call times out."""
        self.held = await self.pool.getconn()

    async def give_back(self) -> None:
        """Return the connection."""
        await self.pool.putconn(self.held)
        self.held = None


@pytest_asyncio.fixture
async def store(database: str, server: Server) -> AsyncIterator[Store]:
    """The sessions' store, on ``server``'s queue (run by ``server``, on its own pool)."""
    pool = AsyncConnectionPool(database, open=False, min_size=1, max_size=1, timeout=0.3)
    await pool.open(wait=True)
    oban = Oban(pool=pool, name=unique("client"))
    store = Store(pool, oban, server.queue)
    try:
        yield store
    finally:
        if store.held is not None:
            await store.give_back()
        forget_instance(oban)
        await pool.close()


async def start(sessions: Sessions, store: Store, machine: Any, **options: Any) -> Session:
    """A session whose delayed sends go to ``store``."""
    return await sessions.start(machine, delayed_sends=DurableTimers(store.config), **options)


async def test_an_unavailable_store_holds_the_step_and_never_arms_an_in_process_timer(
    store: Store, server: Server, sessions: Sessions
) -> None:
    started = [await start(sessions, store, ARMING) for _ in range(20)]
    await store.take_away()
    for session in started:
        session.send_event("arm")
    await wait_until(lambda: all(s.status().store_error for s in started), what="every step held")
    await asyncio.sleep(0.5)  # several attempts later: still held, still nothing in memory
    for session in started:
        status = session.status()
        assert status.configuration == ("idle",)
        assert status.pending_timers == 0
        assert "StoreUnavailable" in (status.store_error or "")
    assert [await timer_rows(server.pool, s.session_id) for s in started] == [[]] * 20

    await store.give_back()
    for session in started:
        await wait_for_configuration(session, "armed", timeout=10)
    for session in started:
        status = session.status()
        assert (status.pending_timers, status.store_error) == (0, None)
        [row] = await timer_rows(server.pool, session.session_id)
        assert row.state == "scheduled"


async def test_a_cancel_the_store_cannot_take_is_not_dropped_and_the_old_timer_cannot_fire_early(
    store: Store, server: Server, sessions: Sessions
) -> None:
    session = await start(sessions, store, HOLD)
    [first] = await timer_rows(server.pool, session.session_id)
    await store.take_away()
    session.send_event("extend")  # cancel the first timer, arm a second: both held
    await wait_until(lambda: session.status().store_error, what="the step held")

    # The first timer falls due while the step is held; the queue fires it into the session.
    async def first_fired() -> bool:
        return await job_state(server, first.id) == "completed"

    await wait_until(first_fired, timeout=10, what="the old timer fired")
    await asyncio.sleep(0.2)
    assert session.status().configuration == ("held",)
    await store.give_back()
    rearmed = time.monotonic()

    await wait_for_configuration(session, "expired", timeout=10, interval=0.01)
    expired_after = time.monotonic() - rearmed
    # The re-armed hold runs in full: the old timer's event was dropped as cancelled.
    assert expired_after >= HOLD_S - 0.1, expired_after
    rows = await timer_rows(server.pool, session.session_id)
    assert [(row.args["ordinal"], row.state) for row in rows] == [
        (1, "completed"),
        (3, "completed"),
    ]


async def job_state(server: Server, job_id: int) -> str | None:
    """The state of job ``job_id`` (None once it is gone)."""
    async with server.pool.connection() as conn:
        cursor = await conn.execute("SELECT state::text FROM oban_jobs WHERE id = %s", [job_id])
        row = await cursor.fetchone()
    return row[0] if row else None


async def test_a_value_the_store_refuses_becomes_an_error_in_the_chart(
    store: Store, server: Server, sessions: Sessions
) -> None:
    errors: list[Any] = []

    def record(_session_id: str, message: Any) -> None:
        if getattr(message, "name", "") == "error.communication":
            errors.append(message)

    session = await start(sessions, store, REFUSED, subscribers=[record])
    await wait_for_configuration(session, "failed")
    assert session.status().pending_timers == 0
    assert await timer_rows(server.pool, session.session_id) == []


async def test_a_session_whose_first_step_cannot_be_stored_does_not_start(
    store: Store, sessions: Sessions
) -> None:
    await store.take_away()
    with pytest.raises(DelayedSendsUnavailable, match="unavailable"):
        await start(sessions, store, HOLD, session_id="never_started")
    assert registry.lookup("never_started") is None
    await store.give_back()
