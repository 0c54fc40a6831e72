"""TimerWorker on a real queue: fired into live, dead and halted executions; bad rows; timeouts.

Every test runs a server-mode Oban (``start_oban``) on a fresh PostgreSQL database and lets
the real ``timers`` queue fire the job; nothing is drained inline or mocked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.runtime import registry
from statifier_oban._config import DEFAULT_DELIVERY
from statifier_oban._names import TIMER_WORKER
from statifier_oban.telemetry import EVENT_KEYS, TIMER_DISCARDED, TIMER_FIRED
from statifier_oban.timers import _args, _schedule
from statifier_oban.timers._host import DurableTimers

from oban_support.common import (
    SETTLED,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
    insert_row,
    job_row,
    sessions_fixture,
    unique,
    wait_for_state,
    wait_until,
)
from oban_support.deliveries import CALLS, SCRIPTS, ScriptedDelivery, forget
from oban_support.harness import Server, send_delayed, server_fixture, timer_rows

EXPIRY = chart(
    """
    <datamodel><data id="expirations" expr="0"/></datamodel>
    <state id="idle"><transition event="authorize" target="authorized"/></state>
    <state id="authorized">
      <onentry><send id="hold" event="authorization.expired" delay="200ms"/></onentry>
      <transition event="authorization.expired" target="expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
    </state>
    <state id="expired">
      <onentry><send id="echo" event="reminder" delay="60s"/></onentry>
      <transition event="authorization.expired">
        <assign location="expirations" expr="expirations + 1"/>
      </transition>
    </state>
    """
)

FINISHABLE = chart(
    """
    <state id="open"><transition event="finish" target="closed"/></state>
    <final id="closed"/>
    """
)

LOOPING = chart(
    """
    <datamodel><data id="n" expr="0"/></datamodel>
    <state id="a"><transition target="b"><assign location="n" expr="n + 1"/></transition></state>
    <state id="b"><transition target="a"/></state>
    """
)


sessions = sessions_fixture()
database = database_fixture()
server = server_fixture()


# --- fired into a live session --------------------------------------------------------------


async def test_a_timer_fired_into_a_live_session_is_delivered_through_its_job(
    server: Server,
    sessions: Sessions,
    record_property: Any,
) -> None:
    scope = unique("sess")
    context = {"request": "r-1", "nested": [1, 2.5, None, {"k": "v"}]}
    effects: list[Any] = []
    with capture_telemetry() as seen:
        session = await sessions.start(
            EXPIRY,
            session_id=scope,
            delayed_sends=DurableTimers(server.config()),
            subscribers=[lambda _sid, message: effects.append(message)],
        )
        session.send_event(Event(name="authorize", caller_context=context))
        await wait_until(lambda: session.status().configuration == ("authorized",))

        # The delayed send became a job, not an in-process timer.
        assert session.status().pending_timers == 0
        [row] = await timer_rows(server.pool, scope)
        assert row.worker == TIMER_WORKER
        assert row.queue == server.queue
        assert row.meta == {"delivery": DEFAULT_DELIVERY}
        assert row.args["send_id"] == "hold"
        assert row.args["event"] == "authorization.expired"
        [hold] = [e for e in effects if isinstance(e, fx.SendDelayed) and e.send_id == "hold"]
        assert row.args["ordinal"] == hold.ordinal
        assert hold.caller_context == context

        await wait_until(
            lambda: session.status().configuration == ("expired",), what="reaching 'expired'"
        )
        done = await wait_for_state(server.pool, row.id, *SETTLED)
    assert done.state == "completed", done.error_text
    assert done.attempt == 1
    assert done.errors == []
    assert session.status().pending_timers == 0
    assert session.snapshot().datamodel["expirations"] == 1

    # It fired at its time (not before), by the database clock.
    assert done.attempted_at is not None
    lateness = (done.attempted_at - done.scheduled_at).total_seconds()
    assert (done.scheduled_at - done.inserted_at).total_seconds() == pytest.approx(0.2, abs=0.005)
    assert 0 <= lateness < 1.5, lateness
    record_property("fire_lateness_ms", round(lateness * 1000, 1))

    [fired] = seen.named(TIMER_FIRED, scope)
    assert set(fired) == EVENT_KEYS[TIMER_FIRED]
    assert isinstance(fired.pop("system_time"), int)
    assert fired == {
        "attempt": 1,
        "scope": scope,
        "send_id": "hold",
        "ordinal": hold.ordinal,
        "delivery": DEFAULT_DELIVERY,
        "job_id": row.id,
        "caller_context": context,
    }
    assert seen.named(TIMER_DISCARDED, scope) == []

    # The fed-back event carried the caller context into the macrostep it started.
    [echo] = [e for e in effects if isinstance(e, fx.SendDelayed) and e.send_id == "echo"]
    assert echo.caller_context == context


# --- fired into a dead or halted execution --------------------------------------------------


async def test_a_timer_fired_into_a_dead_execution_is_cancelled_as_terminated(
    server: Server,
) -> None:
    scope = unique("gone")
    context = {"trace": "t-9"}
    assert registry.lookup(scope) is None
    with capture_telemetry() as seen:
        job = await _schedule.schedule(
            server.config(), scope, send_delayed(delay_ms=100, ordinal=4, caller_context=context)
        )
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "cancelled", row.error_text
    assert "discarded: terminated" in row.error_text
    assert row.completed_at is None
    assert row.attempt == 1

    [discarded] = seen.named(TIMER_DISCARDED, scope)
    assert set(discarded) == EVENT_KEYS[TIMER_DISCARDED]
    discarded.pop("system_time")
    assert discarded == {
        "attempt": 1,
        "scope": scope,
        "send_id": "hold",
        "ordinal": 4,
        "delivery": DEFAULT_DELIVERY,
        "reason": "terminated",
        "job_id": job.job_id,
        "caller_context": context,
    }
    assert seen.named(TIMER_FIRED, scope) == []


@pytest.mark.parametrize("halt", ["done", "cancelled"])
async def test_a_halted_but_registered_session_discards_with_its_status(
    server: Server, sessions: Sessions, halt: str
) -> None:
    scope = unique(halt)
    session = await sessions.start(FINISHABLE, session_id=scope)
    if halt == "done":
        session.send_event("finish")
        await session.wait_halted()
    else:
        await session.cancel_and_wait()
    before = session.status()
    assert before.status == halt
    with capture_telemetry() as seen:
        job = await _schedule.schedule(server.config(), scope, send_delayed(delay_ms=100))
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "cancelled", row.error_text
    assert f"discarded: {halt}" in row.error_text
    [discarded] = seen.named(TIMER_DISCARDED, scope)
    assert discarded["reason"] == halt
    assert seen.named(TIMER_FIRED, scope) == []
    # Nothing was queued on the halted session, and it is still registered.
    assert registry.lookup(scope) is session
    assert session.status().queued_events == before.queued_events


async def test_a_budget_exhausted_session_counts_as_live_and_gets_the_event_queued(
    server: Server, sessions: Sessions
) -> None:
    scope = unique("budget")
    session = await sessions.start(LOOPING, session_id=scope, max_macrostep_rounds=20)
    before = session.status()
    assert before.status == "budget_exhausted"
    with capture_telemetry() as seen:
        job = await _schedule.schedule(server.config(), scope, send_delayed(delay_ms=100))
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "completed", row.error_text
    assert session.status().queued_events == before.queued_events + 1
    assert len(seen.named(TIMER_FIRED, scope)) == 1
    assert seen.named(TIMER_DISCARDED, scope) == []


# --- rows the worker cannot decode ----------------------------------------------------------


def _corrupt(kind: str, scope: str) -> Any:
    args: Any = _args.encode(scope, send_delayed(ordinal=1), None)
    if kind == "not an object":
        return [scope, 1]
    if kind == "missing event":
        del args["event"]
    elif kind == "empty scope":
        args["scope"] = ""
    elif kind == "ordinal zero":
        args["ordinal"] = 0
    elif kind == "unknown owner":
        args["owner"] = ["sideways", 1]
    elif kind == "oversized target":
        args["target"] = "#_" + "x" * 5000
    elif kind == "data not json":
        args["data"] = {"json": "{not json"}
    elif kind == "data unknown form":
        args["data"] = {"pickle": "gASVAAAAAAAAAACMBGV2aWyULg=="}
    else:  # pragma: no cover
        raise AssertionError(kind)
    return args


async def insert_timer_row(server: Server, args: Any, meta: dict[str, Any]) -> int:
    """Insert a timer-worker row on the server's queue as it is (no validation), ready to run."""
    return await insert_row(server.pool, args, queue=server.queue, worker=TIMER_WORKER, meta=meta)


@pytest.mark.parametrize(
    "kind",
    [
        "not an object",
        "missing event",
        "empty scope",
        "ordinal zero",
        "unknown owner",
        "oversized target",
        "data not json",
        "data unknown form",
    ],
)
async def test_an_undecodable_row_is_cancelled_as_such_and_never_delivered(
    server: Server, kind: str
) -> None:
    scope = unique("corrupt")
    meta = {"delivery": "oban_support.deliveries:ScriptedDelivery"}
    try:
        with capture_telemetry() as seen:
            job_id = await insert_timer_row(server, _corrupt(kind, scope), meta)
            row = await wait_for_state(server.pool, job_id, *SETTLED)
        assert row.state == "cancelled", row.error_text
        assert "undecodable" in row.error_text
        assert row.completed_at is None
        assert CALLS.get(scope, []) == []
        assert [name for name, meta in seen.events if meta.get("job_id") == job_id] == []
    finally:
        forget(scope)


async def test_a_row_naming_an_unregistered_codec_is_cancelled_at_once(server: Server) -> None:
    """A row never chooses what the worker imports: an unregistered codec is refused."""
    scope = unique("codec")
    args = _args.encode(scope, send_delayed(), None)
    args["data"] = {"codec": "no_such_codec_module_xyz:Codec", "b64": "AAAA"}
    try:
        job_id = await insert_timer_row(
            server, args, {"delivery": "oban_support.deliveries:ScriptedDelivery"}
        )
        row = await wait_for_state(server.pool, job_id, *SETTLED)
        assert (row.state, row.attempt) == ("cancelled", 1), row.error_text
        assert "no_such_codec_module_xyz" in row.error_text
        assert "undecodable" in row.error_text
        assert CALLS.get(scope, []) == []
    finally:
        forget(scope)


# --- run-time bound -------------------------------------------------------------------------


async def test_a_delivery_overrunning_timer_timeout_fails_the_attempt_with_job_timeout(
    server: Server,
) -> None:
    scope = unique("slow")
    config = server.config(delivery=ScriptedDelivery, timer_timeout=50)
    finished: list[bool] = []

    async def slow(_scope: str, _effect: fx.SendDelayed) -> Any:
        await asyncio.sleep(2)
        finished.append(True)
        return None

    SCRIPTS[scope] = slow
    try:
        with capture_telemetry() as seen:
            job = await _schedule.schedule(config, scope, send_delayed(delay_ms=100))
            assert (await job_row(server.pool, job.job_id)).meta == {
                "delivery": "oban_support.deliveries:ScriptedDelivery",
                "timeout": 50,
            }
            row = await wait_for_state(server.pool, job.job_id, *SETTLED)
        assert row.state == "retryable", row.error_text
        assert row.attempt == 1
        assert "JobTimeoutError" in row.error_text
        assert "timed out after 0.05s" in row.error_text
        assert len(CALLS[scope]) == 1
        assert finished == []  # the delivery was interrupted, not awaited to its end
        assert seen.named(TIMER_FIRED, scope) == []
    finally:
        forget(scope)
