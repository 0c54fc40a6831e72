"""Which delivery a fired timer goes to, what it receives, and what it may answer.

Delivery resolution and answers run on a real ``timers`` queue.
Deliveries are named on the job row's ``meta.delivery`` by import path
(``oban_support.deliveries:ScriptedDelivery``), resolved by the worker in this process.
"""

from __future__ import annotations

from typing import Any

import pytest
from oban import Snooze as ObanSnooze
from statifier.core import effects as fx
from statifier_oban import Config, Delivered, Discarded, Snoozed
from statifier_oban._config import DEFAULT_DELIVERY
from statifier_oban.telemetry import TIMER_DISCARDED, TIMER_FIRED
from statifier_oban.timers import _schedule

from oban_support.common import (
    SETTLED,
    Sessions,
    capture_telemetry,
    chart,
    database_fixture,
    job_row,
    sessions_fixture,
    wait_for_state,
    wait_until,
)
from oban_support.deliveries import (
    CALLS,
    JOB_IDS,
    SCRIPTS,
    ScriptedDelivery,
    SyncRecordingDelivery,
)
from oban_support.harness import (
    REMOVE,
    Server,
    scope_fixture,
    send_delayed,
    server_fixture,
    set_due_now,
    set_meta_delivery,
)

SCRIPTED = "oban_support.deliveries:ScriptedDelivery"

WAITING = chart(
    """
    <state id="waiting"><transition event="authorization.expired" target="expired"/></state>
    <state id="expired"/>
    """
)


sessions = sessions_fixture()
database = database_fixture()
server = server_fixture()
scope = scope_fixture("deliv")


def scripted(server: Server, **options: Any) -> Config:
    """Config whose timers are delivered by ``ScriptedDelivery``."""
    return server.config(delivery=ScriptedDelivery, **options)


# --- resolution -----------------------------------------------------------------------------


async def test_meta_without_a_delivery_uses_the_default_session_delivery(
    server: Server, sessions: Sessions, scope: str
) -> None:
    session = await sessions.start(WAITING, session_id=scope)
    with capture_telemetry() as seen:
        # Stored naming ScriptedDelivery, then the key is removed: the default must answer.
        job = await _schedule.schedule(scripted(server), scope, send_delayed(delay_ms=60_000))
        await set_meta_delivery(server.pool, job.job_id, REMOVE)
        assert (await job_row(server.pool, job.job_id)).meta == {}
        await set_due_now(server.pool, job.job_id)
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
        assert row.state == "completed", row.error_text
        await wait_until(lambda: session.status().configuration == ("expired",))
    assert CALLS.get(scope, []) == []
    [fired] = seen.named(TIMER_FIRED, scope)
    assert fired["delivery"] == DEFAULT_DELIVERY


@pytest.mark.parametrize(
    ("configured", "path"),
    [
        (ScriptedDelivery, SCRIPTED),
        (SCRIPTED, SCRIPTED),
        (
            "oban_support.deliveries.SyncRecordingDelivery",
            "oban_support.deliveries:SyncRecordingDelivery",
        ),
        (SyncRecordingDelivery, "oban_support.deliveries:SyncRecordingDelivery"),
    ],
    ids=["async-class", "async-path", "sync-dotted-path", "sync-class"],
)
async def test_the_configured_delivery_receives_the_scope_and_the_scheduled_effect(
    server: Server, scope: str, configured: Any, path: str
) -> None:
    config = server.config(delivery=configured)
    effect = send_delayed(
        event="payment.reminder",
        type="http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
        data={"amount": 12.5, "items": ["a", {"b": None}], "big": 2**70, "text": "é\u2028"},
        send_id="send_9",
        delay_ms=100,
        c_index=7,
        owner=("transition", 3),
        ordinal=3,
        id_from_author=False,
        caller_context={"trace": "t-1", "order": [3, 1, 2]},
        macrostep=4,
        microstep=2,
        round=1,
    )
    with capture_telemetry() as seen:
        job = await _schedule.schedule(config, scope, effect)
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "completed", row.error_text
    assert row.meta == {"delivery": path}
    [received] = CALLS[scope]
    assert type(received) is fx.SendDelayed
    assert received == effect
    assert JOB_IDS[scope] == [job.job_id]
    [fired] = seen.named(TIMER_FIRED, scope)
    assert fired["delivery"] == path
    assert fired["job_id"] == job.job_id
    assert fired["caller_context"] == effect.caller_context


@pytest.mark.parametrize(
    "value",
    [
        "oban_support.deliveries:NoSuchDelivery",
        "no_such_module_for_statifier_tests:Delivery",
        "oban_support.deliveries:NotADelivery",
        "not a path",
        42,
        ["oban_support.deliveries:ScriptedDelivery"],
    ],
    ids=["unknown-attribute", "unknown-module", "no-deliver", "not-a-path", "integer", "list"],
)
async def test_a_row_naming_an_unresolvable_delivery_is_cancelled_at_once_and_delivers_nothing(
    server: Server, sessions: Sessions, scope: str, value: Any
) -> None:
    # A live session under the scope: a worker wrongly falling back to the default
    # delivery would feed it the event.
    session = await sessions.start(WAITING, session_id=scope)
    with capture_telemetry() as seen:
        job = await _schedule.schedule(scripted(server), scope, send_delayed(delay_ms=60_000))
        await set_meta_delivery(server.pool, job.job_id, value)
        await set_due_now(server.pool, job.job_id)
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "cancelled", row.error_text
    assert row.attempt == 1
    assert "refused: " in row.error_text
    assert "delivery" in row.error_text
    assert (value if isinstance(value, str) else repr(value)) in row.error_text
    assert CALLS.get(scope, []) == []
    assert session.status().configuration == ("waiting",)
    assert session.status().queued_events == 0
    assert seen.named(TIMER_FIRED, scope) == seen.named(TIMER_DISCARDED, scope) == []


# --- answers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        Snoozed(0),
        Snoozed(-5),
        Snoozed(1.5),  # type: ignore[arg-type]
        Snoozed(True),
        ObanSnooze(60),
        "ok",
        None,
        Delivered,
    ],
    ids=[
        "snooze-0",
        "snooze-neg",
        "snooze-float",
        "snooze-bool",
        "oban-snooze",
        "str",
        "none",
        "cls",
    ],
)
async def test_an_invalid_answer_retries_and_spends_the_attempt(
    server: Server, scope: str, answer: Any
) -> None:
    SCRIPTS[scope] = lambda _scope, _effect: answer
    with capture_telemetry() as seen:
        # Read the row before it can run: due far out, then brought forward.
        job = await _schedule.schedule(scripted(server), scope, send_delayed(delay_ms=60_000))
        before = await job_row(server.pool, job.job_id)
        await set_due_now(server.pool, job.job_id)
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "retryable", row.error_text
    assert row.attempt == 1
    assert row.attempts_left == before.attempts_left - 1
    assert "delivery answered" in row.error_text
    assert "snoozed" not in row.meta
    assert len(CALLS[scope]) == 1
    assert seen.named(TIMER_FIRED, scope) == seen.named(TIMER_DISCARDED, scope) == []


async def test_a_raising_delivery_retries(server: Server, scope: str) -> None:
    def unreachable(_scope: str, _effect: fx.SendDelayed) -> Any:
        raise ConnectionError("execution store unreachable")

    SCRIPTS[scope] = unreachable
    with capture_telemetry() as seen:
        job = await _schedule.schedule(scripted(server), scope, send_delayed(delay_ms=100))
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "retryable", row.error_text
    assert row.attempt == 1
    assert "execution store unreachable" in row.error_text
    assert seen.named(TIMER_FIRED, scope) == seen.named(TIMER_DISCARDED, scope) == []


async def test_a_discarded_answer_cancels_the_job_with_the_hosts_reason(
    server: Server, scope: str
) -> None:
    SCRIPTS[scope] = lambda _scope, _effect: Discarded("chart_unknown")
    with capture_telemetry() as seen:
        job = await _schedule.schedule(scripted(server), scope, send_delayed(delay_ms=100))
        row = await wait_for_state(server.pool, job.job_id, *SETTLED)
    assert row.state == "cancelled", row.error_text
    assert "discarded: chart_unknown" in row.error_text
    [discarded] = seen.named(TIMER_DISCARDED, scope)
    assert discarded["reason"] == "chart_unknown"
    assert discarded["delivery"] == SCRIPTED
