"""Timer telemetry: the event names and each event's exact meta, emitted through oban.

Spec 2.16 and acceptance 5, 8, 30 (the timer half). ``timer.fired`` and
``timer.discarded`` come from the worker and are covered by the worker tests.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg_pool import AsyncConnectionPool
from statifier_oban import telemetry
from statifier_oban._config import Config
from statifier_oban._errors import (
    InvalidScope,
    MissingOrdinal,
    MissingSendId,
    NonSelfTarget,
    OpaqueValueError,
    StoreUnavailable,
)
from statifier_oban.timers._schedule import cancel_timers, schedule, schedule_many

from oban_support.effects_factory import (
    all_jobs,
    cancel_effect,
    make_config,
    recording,
    send_delayed,
    unopened_oban,
)

SCOPE = "session-1"
SECRET = "do-not-emit-this-secret"  # noqa: S105 - bait the test checks never leaks
SCHEDULED = "statifier_oban.timer.scheduled"
REJECTED = "statifier_oban.timer.schedule_rejected"
CANCELLED = "statifier_oban.timer.cancelled"


@pytest.fixture
def config(oban_client: Oban) -> Config:
    """The timers Config on the test's client-mode Oban."""
    return make_config(oban_client)


def assert_recent(system_time: Any) -> None:
    assert isinstance(system_time, int)
    assert abs(time.time_ns() - system_time) < 60 * 10**9


def assert_no_secret(meta: dict[str, Any]) -> None:
    assert SECRET not in repr(meta)


TIMER_NAMES = [
    "statifier_oban.timer.scheduled",
    "statifier_oban.timer.schedule_rejected",
    "statifier_oban.timer.cancelled",
    "statifier_oban.timer.fired",
    "statifier_oban.timer.discarded",
]


def test_events_start_with_the_five_timer_names_in_order() -> None:
    names = telemetry.events()

    assert names[:5] == TIMER_NAMES
    assert list(telemetry.TIMER_EVENTS) == TIMER_NAMES
    assert [name for name in names if ".timer." in name] == TIMER_NAMES
    assert names is not telemetry.events()  # a fresh list each call


def test_events_are_the_fifteen_documented_names_in_order() -> None:
    """Spec 2.16: timers first, then the ten invoke events."""
    invoke = [
        "enqueued",
        "enqueue_rejected",
        "cancelled",
        "fan_out",
        "child_started",
        "unstarted_cancelled",
        "delivered",
        "discarded",
        "failed",
        "deferred",
    ]
    assert telemetry.events() == [*TIMER_NAMES, *(f"statifier_oban.invoke.{n}" for n in invoke)]
    assert set(telemetry.EVENT_KEYS) == set(telemetry.events())


def test_the_documented_key_sets() -> None:
    assert telemetry.EVENT_KEYS[SCHEDULED] == {
        "system_time",
        "delay_ms",
        "scope",
        "send_id",
        "ordinal",
        "macrostep",
        "microstep",
        "round",
        "scheduled_at",
        "queue",
        "conflict",
        "job_id",
        "caller_context",
    }
    assert telemetry.EVENT_KEYS[REJECTED] == {
        "system_time",
        "scope",
        "send_id",
        "ordinal",
        "reason",
    }
    assert telemetry.EVENT_KEYS[CANCELLED] == {
        "system_time",
        "count",
        "scope",
        "send_id",
        "ordinal",
        "caller_context",
    }


# --- timer.scheduled ----------------------------------------------------------------------


async def test_scheduled_carries_exactly_its_keys_and_the_rows_values(config: Config) -> None:
    effect = send_delayed(
        ordinal=3,
        send_id="nudge",
        delay_ms=1_500,
        macrostep=8,
        microstep=2,
        round=1,
        data={"secret": SECRET},
        caller_context={"trace": "t-1"},
    )
    with recording(telemetry.events()) as recorder:
        timer = await schedule(config, SCOPE, effect)
        again = await schedule(config, SCOPE, effect)

    assert [name for name, _ in recorder.events] == [SCHEDULED, SCHEDULED]
    first, second = recorder.named(SCHEDULED)
    for meta in (first, second):
        assert set(meta) == telemetry.EVENT_KEYS[SCHEDULED]
        assert_recent(meta["system_time"])
        assert_no_secret(meta)
        assert meta["delay_ms"] == 1_500
        assert meta["scope"] == SCOPE
        assert meta["send_id"] == "nudge"
        assert meta["ordinal"] == 3
        assert meta["macrostep"] == 8
        assert meta["microstep"] == 2
        assert meta["round"] == 1
        assert meta["scheduled_at"] == timer.scheduled_at
        assert meta["queue"] == "timers"
        assert meta["job_id"] == timer.job_id
        assert meta["caller_context"] == {"trace": "t-1"}
    assert first["conflict"] is False
    assert second["conflict"] is True
    assert again.job_id == timer.job_id


async def test_schedule_many_emits_one_scheduled_per_effect_or_rejected_for_a_refusal(
    config: Config,
) -> None:
    await schedule(config, SCOPE, send_delayed(ordinal=2))
    with recording(telemetry.events()) as recorder:
        jobs = await schedule_many(
            config, SCOPE, [send_delayed(ordinal=1, send_id="a"), send_delayed(ordinal=2)]
        )

    metas = recorder.named(SCHEDULED)
    assert len(recorder.events) == 2
    assert [(m["ordinal"], m["send_id"], m["conflict"]) for m in metas] == [
        (1, "a", False),
        (2, "reminder", True),
    ]
    assert [m["job_id"] for m in metas] == [j.job_id for j in jobs]
    for meta in metas:
        assert set(meta) == telemetry.EVENT_KEYS[SCHEDULED]

    refused = [send_delayed(ordinal=3), send_delayed(ordinal=4, target="#_parent")]
    with recording(telemetry.events()) as recorder, pytest.raises(NonSelfTarget):
        await schedule_many(config, SCOPE, refused)
    assert [name for name, _ in recorder.events] == [REJECTED]
    [meta] = recorder.named(REJECTED)
    assert meta["reason"] == "non_self_target"
    assert meta["ordinal"] == 4


# --- timer.schedule_rejected --------------------------------------------------------------


async def test_schedule_rejected_carries_exactly_its_keys_and_the_reason(
    config: Config, pool: AsyncConnectionPool
) -> None:
    cases: list[tuple[Any, dict[str, Any], type[Exception], str]] = [
        (SCOPE, {"target": "#_parent"}, NonSelfTarget, "non_self_target"),
        ("", {}, InvalidScope, "invalid_scope"),
        (None, {}, InvalidScope, "invalid_scope"),
        (SCOPE, {"ordinal": 0}, MissingOrdinal, "missing_ordinal"),
        (SCOPE, {"data": {SECRET: {1, 2}}}, OpaqueValueError, "codec_failed"),
    ]
    for scope, overrides, error, reason in cases:
        effect = send_delayed(**{"send_id": "nudge", "ordinal": 4, **overrides})
        with recording(telemetry.events()) as recorder, pytest.raises(error):
            await schedule(config, scope, effect)

        assert [name for name, _ in recorder.events] == [REJECTED], reason
        [meta] = recorder.named(REJECTED)
        assert set(meta) == telemetry.EVENT_KEYS[REJECTED]
        assert_recent(meta["system_time"])
        assert_no_secret(meta)
        assert meta["reason"] == reason
        assert meta["scope"] == scope  # raw, even when invalid
        assert meta["send_id"] == "nudge"
        assert meta["ordinal"] == effect.ordinal
    assert await all_jobs(pool) == []


async def test_schedule_emits_schedule_rejected_when_the_store_is_unavailable(
    config: Config, pool: AsyncConnectionPool
) -> None:
    await pool.close()
    with recording(telemetry.events()) as recorder, pytest.raises(StoreUnavailable):
        await schedule(config, SCOPE, send_delayed(ordinal=5))

    [meta] = recorder.named(REJECTED)
    assert len(recorder.events) == 1
    assert set(meta) == telemetry.EVENT_KEYS[REJECTED]
    assert meta["reason"] == "store_unavailable"
    assert meta["ordinal"] == 5


async def test_schedule_many_emits_schedule_rejected_when_the_store_is_unavailable(
    config: Config, pool: AsyncConnectionPool
) -> None:
    """Spec 2.2: schedule_rejected on *any* error; schedule_many follows schedule's rules."""
    await pool.close()
    batch = [send_delayed(ordinal=1), send_delayed(ordinal=2)]
    with recording(telemetry.events()) as recorder, pytest.raises(StoreUnavailable):
        await schedule_many(config, SCOPE, batch)

    metas = recorder.named(REJECTED)
    assert [name for name, _ in recorder.events] == [REJECTED, REJECTED]
    assert [m["ordinal"] for m in metas] == [1, 2]
    assert {m["reason"] for m in metas} == {"store_unavailable"}


# --- timer.cancelled ----------------------------------------------------------------------


async def test_cancelled_carries_exactly_its_keys_and_the_count(config: Config) -> None:
    await schedule(config, SCOPE, send_delayed(ordinal=1, send_id="nudge"))
    await schedule(config, SCOPE, send_delayed(ordinal=2, send_id="nudge"))
    effect = cancel_effect(send_id="nudge", ordinal=11, caller_context={"trace": "c"})

    with recording(telemetry.events()) as recorder:
        assert await cancel_timers(config, SCOPE, effect) == 2
        assert await cancel_timers(config, SCOPE, effect) == 0

    assert [name for name, _ in recorder.events] == [CANCELLED, CANCELLED]
    swept, empty = recorder.named(CANCELLED)
    for meta in (swept, empty):
        assert set(meta) == telemetry.EVENT_KEYS[CANCELLED]
        assert_recent(meta["system_time"])
        assert meta["scope"] == SCOPE
        assert meta["send_id"] == "nudge"
        assert meta["ordinal"] == 11  # the Cancel's own ordinal
        assert meta["caller_context"] == {"trace": "c"}
    assert swept["count"] == 2
    assert empty["count"] == 0


async def test_a_cancel_key_error_emits_nothing() -> None:
    with unopened_oban() as host:
        config = make_config(host)
        with recording(telemetry.events()) as recorder:
            with pytest.raises(InvalidScope):
                await cancel_timers(config, "", cancel_effect())
            with pytest.raises(MissingSendId):
                await cancel_timers(config, SCOPE, cancel_effect(send_id=""))

    assert recorder.events == []


# --- emission never breaks the caller -----------------------------------------------------


async def test_a_raising_handler_does_not_break_schedule_or_cancel(
    config: Config, pool: AsyncConnectionPool
) -> None:
    def explode(name: str, meta: dict[str, Any]) -> None:
        raise RuntimeError(f"handler failed on {name}")

    oban_telemetry.attach("test-exploding-handler", telemetry.events(), explode)
    try:
        with recording(telemetry.events()) as recorder:
            timer = await schedule(config, SCOPE, send_delayed())
            with pytest.raises(NonSelfTarget):
                await schedule(config, SCOPE, send_delayed(ordinal=2, target="#_parent"))
            count = await cancel_timers(config, SCOPE, cancel_effect())
    finally:
        oban_telemetry.detach("test-exploding-handler")

    assert timer.conflict is False
    assert count == 1
    assert [row.id for row in await all_jobs(pool)] == [timer.job_id]
    assert [name for name, _ in recorder.events] == [SCHEDULED, REJECTED, CANCELLED]
