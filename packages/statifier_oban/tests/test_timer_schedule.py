"""``timer.schedule`` and ``timer.schedule_many`` against a real PostgreSQL.

Spec 2.2 (schedule), 3.1 (the job row) and 3.4 (uniqueness in every state).
"""

from __future__ import annotations

import json
import math
from datetime import timedelta
from typing import Any

import pytest
from oban import Oban
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier_oban._config import DEFAULT_DELIVERY, Config
from statifier_oban._errors import (
    InvalidScope,
    MissingOrdinal,
    NonSelfTarget,
    OpaqueValueError,
    ScheduleRejected,
    ValueRefused,
)
from statifier_oban._names import TIMER_WORKER
from statifier_oban.timers._args import encode as encode_args
from statifier_oban.timers._schedule import TimerJob, _plain, schedule, schedule_many

from oban_support.effects_factory import (
    ARGS_KEYS,
    TIMERS_QUEUE,
    all_jobs,
    job,
    make_config,
    send_delayed,
    set_state,
    with_ordinal,
)

SCOPE = "session-1"


class HostDelivery:
    """A host delivery class; only its path is stored on the row."""


@pytest.fixture
def config(oban_client: Oban) -> Config:
    """The timers Config on the test's client-mode Oban."""
    return make_config(oban_client)


# --- one timer ----------------------------------------------------------------------------


async def test_schedule_stores_one_scheduled_timer_job(
    config: Config, pool: AsyncConnectionPool
) -> None:
    effect = send_delayed(ordinal=3, send_id="remind")

    timer = await schedule(config, SCOPE, effect)

    assert isinstance(timer, TimerJob)
    assert timer.scope == SCOPE
    assert timer.ordinal == 3
    assert timer.send_id == "remind"
    assert timer.state == "scheduled"
    assert timer.queue == TIMERS_QUEUE
    assert timer.conflict is False
    [row] = await all_jobs(pool)
    assert row.id == timer.job_id
    assert row.state == "scheduled"
    assert row.queue == TIMERS_QUEUE
    assert row.worker == TIMER_WORKER == "statifier_oban.workers.TimerWorker"
    assert row.max_attempts == 20  # no override: oban's default
    assert row.errors == []
    assert row.scheduled_at == timer.scheduled_at
    assert row.inserted_at == timer.inserted_at
    assert row.meta == {"delivery": DEFAULT_DELIVERY}  # no timeout unless configured


async def test_fire_time_is_insert_time_plus_delay_on_the_database_clock_computed_once(
    config: Config, pool: AsyncConnectionPool
) -> None:
    delays = [1, 999, 1_500, 3_600_000, 40 * 86_400_000]
    timers = [
        await schedule(config, SCOPE, send_delayed(ordinal=n, delay_ms=delay))
        for n, delay in enumerate(delays, start=1)
    ]
    async with pool.connection() as conn:
        row = await (await conn.execute("SELECT timezone('UTC', now())")).fetchone()
    assert row is not None
    db_now = row[0]

    for timer, delay in zip(timers, delays, strict=True):
        stored = await job(pool, timer.job_id)
        assert stored.scheduled_at - stored.inserted_at == timedelta(milliseconds=delay)
        assert timer.scheduled_at - timer.inserted_at == timedelta(milliseconds=delay)
        # inserted_at is the database's clock at insert time, moments ago
        assert timedelta(0) <= db_now - stored.inserted_at < timedelta(seconds=5)

    # computed once: a replay with another delay does not move it
    replay = await schedule(config, SCOPE, send_delayed(ordinal=4, delay_ms=5))
    assert replay.conflict is True
    assert replay.scheduled_at == timers[3].scheduled_at
    stored = await job(pool, timers[3].job_id)
    assert stored.scheduled_at - stored.inserted_at == timedelta(milliseconds=3_600_000)


# --- dedup on (scope, ordinal) ------------------------------------------------------------


async def test_a_duplicate_returns_the_same_job_with_conflict_and_no_second_row(
    oban_client: Oban, config: Config, pool: AsyncConnectionPool
) -> None:
    original = send_delayed(ordinal=7)
    first = await schedule(config, SCOPE, original)
    stored_args = (await job(pool, first.job_id)).args

    replay = with_ordinal(
        original,
        7,
        send_id="another-id",
        event="other.event",
        data={"different": True},
        caller_context={"ctx": 1},
        macrostep=99,
        microstep=9,
        round=3,
        c_index=11,
        owner=("transition", 4),
        delay_ms=1,
        id_from_author=False,
    )
    again = await schedule(config, SCOPE, replay)

    assert first.conflict is False
    assert again.conflict is True
    assert again.job_id == first.job_id
    assert again.scheduled_at == first.scheduled_at
    # the queue is not part of the key either
    moved = await schedule(make_config(oban_client, timers_queue="elsewhere"), SCOPE, replay)
    assert moved.conflict is True
    assert moved.job_id == first.job_id
    assert moved.queue == TIMERS_QUEUE
    rows = await all_jobs(pool)
    assert [row.id for row in rows] == [first.job_id]
    assert rows[0].args == stored_args  # the first effect's row data is kept


EVERY_OTHER_STATE = ["completed", "cancelled", "discarded", "executing", "retryable", "available"]


async def test_a_duplicate_conflicts_whatever_the_state_of_the_existing_row(
    config: Config, pool: AsyncConnectionPool
) -> None:
    originals = {}
    for ordinal, state in enumerate(EVERY_OTHER_STATE, start=1):
        originals[state] = await schedule(config, SCOPE, send_delayed(ordinal=ordinal))
        await set_state(pool, originals[state].job_id, state)

    for ordinal, state in enumerate(EVERY_OTHER_STATE, start=1):
        again = await schedule(config, SCOPE, send_delayed(ordinal=ordinal, send_id="replayed"))
        assert again.conflict is True, state
        assert again.job_id == originals[state].job_id, state
        assert again.state == state

    rows = await all_jobs(pool)
    assert [(row.id, row.state) for row in rows] == [
        (originals[state].job_id, state) for state in EVERY_OTHER_STATE
    ]


async def test_a_different_ordinal_or_scope_is_a_new_job(
    config: Config, pool: AsyncConnectionPool
) -> None:
    base = await schedule(config, SCOPE, send_delayed(ordinal=1))
    other_ordinal = await schedule(config, SCOPE, send_delayed(ordinal=2))
    other_scope = await schedule(config, "session-2", send_delayed(ordinal=1))

    ids = {base.job_id, other_ordinal.job_id, other_scope.job_id}
    assert len(ids) == 3
    assert not other_ordinal.conflict
    assert not other_scope.conflict
    assert len(await all_jobs(pool)) == 3


async def test_schedule_and_schedule_many_keep_working_past_the_prepare_threshold(
    config: Config, database_url: str, pool: AsyncConnectionPool
) -> None:
    """psycopg prepares a statement after 5 runs on a connection and PostgreSQL may then
    plan it generically: the ON CONFLICT of the insert must still find the dedup index."""
    async with await AsyncConnection.connect(database_url, autocommit=True) as conn:
        fresh = [
            await schedule(config, SCOPE, send_delayed(ordinal=n), conn=conn) for n in range(1, 16)
        ]
        replays = [
            await schedule(config, SCOPE, send_delayed(ordinal=n), conn=conn) for n in range(1, 16)
        ]
        batches = [
            await schedule_many(
                config, SCOPE, [send_delayed(ordinal=n), send_delayed(ordinal=n + 100)], conn=conn
            )
            for n in range(1, 16)
        ]
    assert [t.conflict for t in fresh] == [False] * 15
    assert [t.conflict for t in replays] == [True] * 15
    assert [t.job_id for t in replays] == [t.job_id for t in fresh]
    assert [[t.conflict for t in batch] for batch in batches] == [[True, False]] * 15
    assert len(await all_jobs(pool)) == 30


# --- refusals: nothing stored -------------------------------------------------------------


async def test_a_non_self_target_bad_scope_or_ordinal_is_refused_and_nothing_stored(
    config: Config, pool: AsyncConnectionPool
) -> None:
    for target in ["#_parent", "#_scxml_other", "#_internal", "http://x/y"]:
        with pytest.raises(NonSelfTarget) as caught:
            await schedule(config, SCOPE, send_delayed(target=target))
        assert caught.value.reason == "non_self_target"
        assert target in str(caught.value)
    for scope in ["", None, 5, b"session"]:
        with pytest.raises(InvalidScope) as invalid:
            await schedule(config, scope, send_delayed())  # type: ignore[arg-type]
        assert invalid.value.reason == "invalid_scope"
    for ordinal in [0, -1, True]:
        with pytest.raises(MissingOrdinal) as missing:
            await schedule(config, SCOPE, send_delayed(ordinal=ordinal))
        assert missing.value.reason == "missing_ordinal"
    assert await all_jobs(pool) == []


class NotJson:
    """An object with no JSON form."""


NOT_JSON_LIKE: list[Any] = [
    {1, 2},
    (1, 2),
    math.nan,
    math.inf,
    -math.inf,
    NotJson(),
    {1: "int key"},
    {"nested": [{"deeper": {3.5, 4}}]},
    {"nested": [math.nan]},
    b"bytes",
]


async def test_a_value_that_is_not_json_like_is_refused_and_nothing_is_stored(
    config: Config, pool: AsyncConnectionPool
) -> None:
    for field in ["data", "caller_context"]:
        for value in NOT_JSON_LIKE:
            with pytest.raises(OpaqueValueError) as caught:
                await schedule(config, SCOPE, send_delayed(**{field: value}))
            assert caught.value.reason == "codec_failed"
            assert isinstance(caught.value, ScheduleRejected)
            assert field in str(caught.value)
    assert await all_jobs(pool) == []


# --- the caller's transaction -------------------------------------------------------------


async def test_schedule_in_the_callers_transaction_rollback_removes_and_commit_keeps(
    config: Config, database_url: str, pool: AsyncConnectionPool
) -> None:
    async with await AsyncConnection.connect(database_url) as conn:
        undone = await schedule(config, SCOPE, send_delayed(ordinal=1), conn=conn)
        undone_many = await schedule_many(
            config, SCOPE, [send_delayed(ordinal=2), send_delayed(ordinal=3)], conn=conn
        )
        inside = await (await conn.execute("SELECT count(*) FROM oban_jobs")).fetchone()
        assert inside == (3,)
        assert await all_jobs(pool) == []  # not visible outside before commit
        await conn.rollback()
    assert undone.conflict is False
    assert len(undone_many) == 2
    assert await all_jobs(pool) == []

    async with await AsyncConnection.connect(database_url) as conn:
        kept = await schedule(config, SCOPE, send_delayed(ordinal=1), conn=conn)
        [kept_many] = await schedule_many(config, SCOPE, [send_delayed(ordinal=2)], conn=conn)
        await conn.commit()
    assert kept.conflict is False  # the rolled-back row left no dedup guard behind
    assert [row.id for row in await all_jobs(pool)] == [kept.job_id, kept_many.job_id]


# --- schedule_many ------------------------------------------------------------------------


async def test_schedule_many_stores_a_batch_in_order_with_conflicts_marked(
    config: Config, pool: AsyncConnectionPool
) -> None:
    existing = await schedule(config, SCOPE, send_delayed(ordinal=2, send_id="b"))
    batch = [
        send_delayed(ordinal=5, send_id="e", delay_ms=5_000),
        send_delayed(ordinal=2, send_id="b-replayed"),
        send_delayed(ordinal=1, send_id="a", delay_ms=1_000),
    ]

    jobs = await schedule_many(config, SCOPE, batch)

    assert [(j.ordinal, j.send_id, j.conflict) for j in jobs] == [
        (5, "e", False),
        (2, "b-replayed", True),
        (1, "a", False),
    ]
    assert jobs[1].job_id == existing.job_id
    rows = {row.id: row for row in await all_jobs(pool)}
    assert len(rows) == 3
    for timer, effect in zip(jobs, batch, strict=True):
        row = rows[timer.job_id]
        assert row.args["ordinal"] == effect.ordinal
        assert row.state == timer.state == "scheduled"
        assert row.queue == timer.queue == TIMERS_QUEUE
        assert row.worker == TIMER_WORKER
        assert row.scheduled_at == timer.scheduled_at
    assert rows[jobs[0].job_id].args["send_id"] == "e"
    assert rows[jobs[1].job_id].args["send_id"] == "b"  # the original row is kept
    fresh = rows[jobs[0].job_id]
    assert fresh.scheduled_at - fresh.inserted_at == timedelta(milliseconds=5_000)
    assert await schedule_many(config, SCOPE, []) == []


SCHEDULE_MANY_REFUSALS: list[tuple[dict[str, Any], type[ScheduleRejected]]] = [
    ({"target": "#_parent"}, NonSelfTarget),
    ({"ordinal": 0}, MissingOrdinal),
    ({"data": {1, 2}}, OpaqueValueError),
    ({"caller_context": math.nan}, OpaqueValueError),
]


async def test_schedule_many_stores_nothing_when_one_effect_is_refused(
    config: Config, pool: AsyncConnectionPool
) -> None:
    for bad, error in SCHEDULE_MANY_REFUSALS:
        batch = [
            send_delayed(ordinal=1),
            send_delayed(**{"ordinal": 2, **bad}),
            send_delayed(ordinal=3),
        ]
        with pytest.raises(error):
            await schedule_many(config, SCOPE, batch)
    with pytest.raises(InvalidScope):
        await schedule_many(config, "", [send_delayed()])
    assert await all_jobs(pool) == []


SAME_ARGS_BOTH_ENCODERS: list[dict[str, Any]] = [
    {},  # plain: orjson
    {"event": "r\u00e9veil", "send_id": "caf\u00e9"},  # non-ASCII texts: the full check
    {"macrostep": 2**70},  # beyond 64 bits: orjson refuses, the standard encoder writes it
    {"data": {"text": "\u00e9t\u00e9 \U0001f600", "big": 2**80, "x": 1.5}},  # opaque JSON text
    {"owner": ("transition", 7), "type": "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"},
]


async def test_schedule_many_stores_the_args_the_standard_json_encoder_writes(
    config: Config, pool: AsyncConnectionPool
) -> None:
    # A plain batch takes the fast encoder: the stored jsonb must be what json.dumps of
    # the same args stores, and the returned jobs what TimerJob(...) builds.
    batch = [
        send_delayed(**{"ordinal": i + 1, "send_id": f"s-{i}", **overrides})
        for i, overrides in enumerate(SAME_ARGS_BOTH_ENCODERS)
    ]
    assert [_plain(effect) for effect in batch] == [True, False, True, True, True]
    scopes = [SCOPE, "sc\u00f6pe"]  # a non-ASCII scope is plain too
    for scope in scopes:
        jobs = await schedule_many(config, scope, batch)
        async with pool.connection() as conn:
            for timer, effect in zip(jobs, batch, strict=True):
                expected = json.dumps(encode_args(scope, effect, None))
                cursor = await conn.execute(
                    "SELECT args = %s::jsonb, scheduled_at, inserted_at FROM oban_jobs "
                    "WHERE id = %s",
                    [expected, timer.job_id],
                )
                row = await cursor.fetchone()
                assert row is not None
                same, scheduled_at, inserted_at = row
                assert same, effect
                assert timer == TimerJob(
                    timer.job_id, scope, effect.ordinal, effect.send_id, "scheduled",
                    TIMERS_QUEUE, scheduled_at, inserted_at, False,
                )  # fmt: skip
    assert len(await all_jobs(pool)) == len(batch) * len(scopes)


async def test_schedule_many_refuses_a_nan_delay_as_before(
    config: Config, pool: AsyncConnectionPool
) -> None:
    # A float is never encoded by orjson (which writes NaN as null): PostgreSQL still
    # refuses the NaN the standard encoder writes, and nothing is stored.
    batch = [send_delayed(ordinal=1), send_delayed(ordinal=2, delay_ms=math.nan)]
    with pytest.raises(ValueRefused):
        await schedule_many(config, SCOPE, batch)
    assert await all_jobs(pool) == []


# --- meta and args ------------------------------------------------------------------------


async def test_meta_carries_a_custom_delivery_path_and_the_timer_timeout(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(
        oban_client, delivery=HostDelivery, timer_timeout=5_000, timers_queue="slow"
    )

    timer = await schedule(config, SCOPE, send_delayed(ordinal=1))
    [batched] = await schedule_many(config, SCOPE, [send_delayed(ordinal=2)])

    expected = {"delivery": f"{__name__}:HostDelivery", "timeout": 5_000}
    assert (await job(pool, timer.job_id)).meta == expected
    assert (await job(pool, batched.job_id)).meta == expected
    assert (await job(pool, timer.job_id)).queue == "slow"


async def test_the_args_are_the_documented_keys_and_readable_in_sql(
    config: Config, pool: AsyncConnectionPool
) -> None:
    effect = send_delayed(
        ordinal=4,
        send_id="nudge",
        event="nudge.due",
        type="http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
        delay_ms=2_500,
        c_index=8,
        owner=("onentry", 3, 1),
        macrostep=12,
        microstep=2,
        round=1,
        id_from_author=False,
        data={"n": 1},
        caller_context=None,
    )
    timer = await schedule(config, SCOPE, effect)

    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "SELECT args->>'scope', (args->>'ordinal')::int, args->>'send_id', "
                "args->>'event', args->'target', args->>'type', (args->>'delay_ms')::int, "
                "(args->>'c_index')::int, args->'owner', (args->>'macrostep')::int, "
                "(args->>'microstep')::int, (args->>'round')::int, "
                "(args->>'id_from_author')::bool, args->'data', args->'caller_context', "
                "(SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(args) AS k) "
                "FROM oban_jobs WHERE id = %s",
                [timer.job_id],
            )
        ).fetchone()
    assert row is not None
    *values, keys = row
    assert set(keys) == ARGS_KEYS
    assert values == [
        SCOPE,
        4,
        "nudge",
        "nudge.due",
        None,  # jsonb null
        "http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
        2_500,
        8,
        ["onentry", 3, 1],
        12,
        2,
        1,
        False,
        {"json": '{"n":1}'},
        None,
    ]
