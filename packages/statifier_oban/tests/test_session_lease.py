"""One writer per live session: ownership leases with a fencing epoch (issue 13, ADR 14).

The issue's finding: two processes resuming the same session id both ran, their timers
merged, the last save won. A session started with ``start_session`` owns its id: a second
owner is refused while the lease is held, or takes over with a higher epoch; from then on
the first owner's timer writes and position saves are refused, and it stops. The second
owner is played here by its first move, taking the lease over (all it shares with the
first is the lease row).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier.budget import MacrostepLimits
from statifier.core import effects as fx
from statifier.core.position import CorruptPosition, dumps, loads
from statifier.runtime import registry
from statifier.runtime.session import DelayedSendsUnavailable, Halted, Message, Session
from statifier_oban import (
    DurableTimers,
    LeaseHeld,
    LeaseLost,
    SessionLease,
    session_lease,
    start_session,
)

from oban_support.common import (
    chart,
    database_fixture,
    unique,
    wait_for_configuration,
    wait_until,
)
from oban_support.harness import Server, server_fixture, timer_rows

database = database_fixture()
server = server_fixture()

REMINDERS = chart(
    """
    <state id="idle">
      <transition event="arm" target="armed"/>
    </state>
    <state id="armed">
      <onentry><send id="reminder" event="remind" delay="60s"/></onentry>
      <transition event="arm" target="armed"/>
    </state>
    """
)

SAVE = """
INSERT INTO lease_positions (session_id, position, saved_by) VALUES (%s, %s, %s)
ON CONFLICT (session_id) DO UPDATE SET position = excluded.position, saved_by = excluded.saved_by
"""


@pytest_asyncio.fixture
async def positions(server: Server) -> AsyncIterator[AsyncConnectionPool]:
    """The host's own table of positions (on the server's pool)."""
    async with server.pool.connection() as conn:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS lease_positions "
            "(session_id text PRIMARY KEY, position bytea NOT NULL, saved_by text NOT NULL)"
        )
    yield server.pool


async def save(pool: AsyncConnectionPool, lease: SessionLease, session: Session) -> None:
    """The host's position save, fenced by the session's lease in the same transaction."""
    async with pool.connection() as conn, conn.transaction():
        await lease.fence(conn)
        await conn.execute(SAVE, [session.session_id, dumps(session.snapshot()), lease.owner])


async def test_a_second_owner_is_refused_while_the_lease_is_held(server: Server) -> None:
    config = server.config()
    scope = unique("lease")
    first = await SessionLease.acquire(config, scope, owner="first")
    with pytest.raises(LeaseHeld, match="'first'") as held:
        await SessionLease.acquire(config, scope, owner="second")
    assert (held.value.scope, held.value.owner) == (scope, "first")
    assert first.epoch == 1
    await first.renew()


async def test_a_takeover_raises_the_epoch_and_refuses_the_first_owner(server: Server) -> None:
    config = server.config()
    scope = unique("lease")
    first = await SessionLease.acquire(config, scope, owner="first")
    second = await SessionLease.acquire(config, scope, owner="second", takeover=True)
    assert (first.epoch, second.epoch) == (1, 2)
    async with server.pool.connection() as conn, conn.transaction():
        with pytest.raises(LeaseLost, match="'second' at epoch 2"):
            await first.fence(conn)
    with pytest.raises(LeaseLost):
        await first.renew()
    assert not await first.release()  # releasing a lost lease leaves the new owner alone
    async with server.pool.connection() as conn, conn.transaction():
        await second.fence(conn)


async def test_an_expired_lease_is_taken_without_asking_and_epochs_never_go_back(
    server: Server,
) -> None:
    config = server.config()
    scope = unique("lease")
    first = await SessionLease.acquire(config, scope, owner="first", ttl_s=0.2)
    await asyncio.sleep(0.3)
    second = await SessionLease.acquire(config, scope, owner="second")
    assert second.epoch == first.epoch + 1
    assert await second.release()
    third = await SessionLease.acquire(config, scope, owner="third")
    assert third.epoch == 3


async def test_a_second_resume_is_refused_and_a_takeover_stops_the_first_owner_writing(
    server: Server, positions: AsyncConnectionPool
) -> None:
    config = server.config()
    halts: list[Halted] = []

    def record(_session_id: str, message: Any) -> None:
        if isinstance(message, Halted):
            halts.append(message)

    first = await start_session(config, REMINDERS, owner="first", subscribers=[record])
    sid = first.session_id
    lease = session_lease(first)
    first.send_event("arm")
    await wait_for_configuration(first, "armed")
    await save(positions, lease, first)
    blob = dumps(first.snapshot())
    assert len(await timer_rows(server.pool, sid)) == 1

    # Another process resuming the same position is refused while the first owns it ...
    with pytest.raises(LeaseHeld):
        await start_session(config, REMINDERS, resume=blob, owner="second")
    # ... or takes it over, which is the first thing start_session(takeover=True) does.
    second = await SessionLease.acquire(config, sid, owner="second", takeover=True)
    assert second.epoch == lease.epoch + 1

    first.send_event("arm")  # would cancel and re-arm the reminder: its write is refused
    await wait_until(lambda: halts, what="the first owner stopped")
    assert halts == [Halted("superseded")]
    assert registry.lookup(sid) is None
    rows = await timer_rows(server.pool, sid)
    assert [(row.args["ordinal"], row.state) for row in rows] == [(1, "scheduled")]
    with pytest.raises(LeaseLost):
        await save(positions, lease, first)
    async with positions.connection() as conn:
        saved = await (
            await conn.execute("SELECT saved_by FROM lease_positions WHERE session_id = %s", [sid])
        ).fetchall()
    assert saved == [("first",)]


async def test_a_lease_lost_while_idle_stops_the_session_at_its_next_renewal(
    server: Server,
) -> None:
    config = server.config()
    session = await start_session(config, REMINDERS, lease_ttl_s=0.3)
    halted = asyncio.Event()
    session.subscribe(lambda _sid, message: halted.set() if isinstance(message, Halted) else None)
    await SessionLease.acquire(config, session.session_id, owner="other", takeover=True)
    await asyncio.wait_for(halted.wait(), 5)
    assert registry.lookup(session.session_id) is None


async def test_start_session_resumes_under_the_same_id_and_releases_its_lease_when_stopped(
    server: Server,
) -> None:
    config = server.config()
    first = await start_session(config, REMINDERS)
    blob = dumps(first.snapshot())
    await first.stop()
    resumed = await start_session(config, REMINDERS, resume=blob)
    try:
        assert resumed.session_id == first.session_id
        assert session_lease(resumed).epoch == 2
    finally:
        await resumed.stop()
    with psycopg.connect(server_url(server)) as conn:
        row = conn.execute(
            "SELECT epoch, expires_at <= now() FROM statifier_session_leases WHERE scope = %s",
            [first.session_id],
        ).fetchone()
    assert row == (2, True)


async def test_start_session_resumes_a_position_with_the_budget_it_is_given(
    server: Server,
) -> None:
    # A position stored with a larger budget than the default loads under that budget;
    # the resume once read the blob with the default one and refused it.
    config = server.config()
    generous = MacrostepLimits(steps=50_000_000)
    first = await start_session(config, REMINDERS, limits=generous)
    blob = dumps(first.snapshot())
    await first.stop()
    resumed = await start_session(config, REMINDERS, resume=blob, limits=generous)
    try:
        assert resumed.snapshot().limits == generous
    finally:
        await resumed.stop()
    with pytest.raises(CorruptPosition):
        await start_session(config, REMINDERS, resume=blob)


async def test_start_session_resumes_a_keyed_position_with_the_key(server: Server) -> None:
    config = server.config()
    secret = b"the host's own secret"
    first = await start_session(config, REMINDERS)
    blob = dumps(first.snapshot(), key=secret)
    await first.stop()
    with pytest.raises(CorruptPosition):
        await start_session(config, REMINDERS, resume=blob)
    resumed = await start_session(config, REMINDERS, resume=blob, position_key=secret)
    try:
        assert resumed.session_id == first.session_id
    finally:
        await resumed.stop()


def server_url(server: Server) -> str:
    """The conninfo of the server's database (the pool was made from a string)."""
    conninfo = server.pool.conninfo
    assert isinstance(conninfo, str)
    return conninfo


async def test_the_documented_on_step_save_is_fenced_from_the_first_step(
    server: Server, positions: AsyncConnectionPool
) -> None:
    # docs/timers.md: on_step saves fenced by session_lease(session). The first call
    # comes from the initial macrostep, inside start_session: it must find the lease, or
    # a new session's first position is never saved.
    config = server.config()
    failures: list[BaseException] = []

    async def on_step(session: Session) -> None:
        try:
            await save(positions, session_lease(session), session)
        except BaseException as exc:
            failures.append(exc)
            raise

    session = await start_session(config, REMINDERS, owner="host", on_step=on_step)
    try:
        assert failures == []
        async with positions.connection() as conn:
            saved = await (
                await conn.execute(
                    "SELECT saved_by FROM lease_positions WHERE session_id = %s",
                    [session.session_id],
                )
            ).fetchall()
        assert saved == [("host",)]
    finally:
        await session.stop()


CHATTY = chart(
    """
    <datamodel><data id="n" expr="0"/></datamodel>
    <state id="talking">
      <onentry><send id="reminder" event="remind" delay="60s"/></onentry>
      <transition event="say">
        <assign location="n" expr="n + 1"/><log label="said" expr="n"/>
      </transition>
    </state>
    """
)


async def test_every_durable_session_owns_its_id_and_a_second_resume_is_refused(
    server: Server, positions: AsyncConnectionPool
) -> None:
    """The README's form, ``Session.start(..., delayed_sends=DurableTimers(config))``,
    takes the session's lease: a second process resuming the same id is refused while
    the first runs, and resumes once it stopped."""
    config = server.config()
    first = await Session.start(
        CHATTY,
        delayed_sends=DurableTimers(config),
        on_step=lambda session: save(positions, session_lease(session), session),
    )
    blob = dumps(first.snapshot())
    assert session_lease(first).epoch == 1
    with pytest.raises(LeaseHeld):
        await Session.start(CHATTY, resume=blob, delayed_sends=DurableTimers(config))
    assert registry.lookup(first.session_id) is first
    await first.stop()
    with pytest.raises(LookupError):
        session_lease(first)
    resumed = await Session.start(CHATTY, resume=blob, delayed_sends=DurableTimers(config))
    try:
        assert session_lease(resumed).epoch == 2
    finally:
        await resumed.stop()


async def test_a_superseded_session_stops_at_its_first_refused_save(
    server: Server, positions: AsyncConnectionPool
) -> None:
    """After a takeover, the old owner's next save is refused (``LeaseLost`` out of
    ``on_step``): it stops there, as ``superseded``, with nothing queued behind that step
    performed, long before its next lease renewal."""
    config = server.config()
    messages: list[Message] = []
    first = await Session.start(
        CHATTY,
        delayed_sends=DurableTimers(config),
        on_step=lambda session: save(positions, session_lease(session), session),
        subscribers=[lambda _sid, message: messages.append(message)],
    )
    sid = first.session_id
    await SessionLease.acquire(config, sid, owner="second", takeover=True)
    for _ in range(5):
        first.send_event("say")
    await asyncio.wait_for(first.wait_halted(), 5)
    assert messages[-1] == Halted("superseded")
    assert [m.value for m in messages if isinstance(m, fx.Log)] == [1]
    assert first.status().status == "superseded"
    assert registry.lookup(sid) is None
    async with positions.connection() as conn:
        row = await (
            await conn.execute("SELECT position FROM lease_positions WHERE session_id = %s", [sid])
        ).fetchone()
    assert row is not None
    assert loads(bytes(row[0]), CHATTY).datamodel["n"] == 0  # the refused save stored nothing


async def test_a_lease_the_store_cannot_take_starts_nothing(server: Server) -> None:
    config = server.config()
    async with server.pool.connection() as conn:
        await conn.execute("ALTER TABLE statifier_session_leases RENAME TO leases_elsewhere")
    try:
        with pytest.raises(DelayedSendsUnavailable, match="lease of session 'no_lease'"):
            await Session.start(CHATTY, session_id="no_lease", delayed_sends=DurableTimers(config))
    finally:
        async with server.pool.connection() as conn:
            await conn.execute("ALTER TABLE leases_elsewhere RENAME TO statifier_session_leases")
    assert registry.lookup("no_lease") is None
    assert await timer_rows(server.pool, "no_lease") == []
