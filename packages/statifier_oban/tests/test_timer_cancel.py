"""``timer.cancel`` against a real PostgreSQL.

Spec 2.2 (cancel), 2.15 (the cancellable states), 3.4, acceptance 8 and 9.
The Python port's cancellable states are scheduled, available and retryable.
"""

from __future__ import annotations

import pytest
from oban import Oban
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier_oban._config import Config
from statifier_oban._errors import InvalidScope, MissingSendId
from statifier_oban._names import PENDING_STATES
from statifier_oban.timers._schedule import cancel_timers, schedule

from oban_support.effects_factory import (
    OTHER_WORKER,
    all_jobs,
    cancel_effect,
    insert_raw,
    job,
    make_config,
    send_delayed,
    set_state,
    states,
)

SCOPE = "session-1"
PENDING = ["scheduled", "available", "retryable"]
NOT_PENDING = ["executing", "completed", "cancelled", "discarded"]


@pytest.fixture
def config(oban_client: Oban) -> Config:
    """The timers Config on the test's client-mode Oban."""
    return make_config(oban_client)


async def arm(config: Config, scope: str, ordinal: int, send_id: str) -> int:
    """Schedule one timer; returns its job id."""
    timer = await schedule(config, scope, send_delayed(ordinal=ordinal, send_id=send_id))
    return timer.job_id


def test_the_pending_states_are_scheduled_available_and_retryable() -> None:
    assert PENDING_STATES == ("scheduled", "available", "retryable")


# --- cancel -------------------------------------------------------------------------------


async def test_cancel_cancels_every_pending_job_of_the_send_id_in_the_scope_only(
    config: Config, pool: AsyncConnectionPool
) -> None:
    twin_a = await arm(config, SCOPE, 1, "reminder")
    twin_b = await arm(config, SCOPE, 2, "reminder")
    other_id = await arm(config, SCOPE, 3, "other")
    other_scope = await arm(config, "session-2", 1, "reminder")
    prefix_scope = await arm(config, "session-10", 1, "reminder")

    count = await cancel_timers(config, SCOPE, cancel_effect(send_id="reminder"))

    assert count == 2
    assert await states(pool) == {
        twin_a: "cancelled",
        twin_b: "cancelled",
        other_id: "scheduled",
        other_scope: "scheduled",
        prefix_scope: "scheduled",
    }


async def test_cancel_matching_nothing_returns_zero(
    config: Config, pool: AsyncConnectionPool
) -> None:
    kept = await arm(config, SCOPE, 1, "reminder")

    assert await cancel_timers(config, SCOPE, cancel_effect(send_id="never-armed")) == 0
    assert await cancel_timers(config, "nobody", cancel_effect(send_id="reminder")) == 0
    assert await states(pool) == {kept: "scheduled"}


async def test_cancel_reaches_only_scheduled_available_and_retryable_jobs(
    config: Config, pool: AsyncConnectionPool
) -> None:
    ids = {}
    for ordinal, state in enumerate([*PENDING, *NOT_PENDING], start=1):
        ids[state] = await arm(config, SCOPE, ordinal, "reminder")
        await set_state(pool, ids[state], state)
    before = {row.id: row for row in await all_jobs(pool)}

    assert await cancel_timers(config, SCOPE, cancel_effect()) == 3

    rows = {row.id: row for row in await all_jobs(pool)}
    for state in PENDING:
        assert rows[ids[state]].state == "cancelled", state
    for state in NOT_PENDING:  # executing and finished rows are never touched
        assert rows[ids[state]] == before[ids[state]], state
        assert rows[ids[state]].state == state
        assert rows[ids[state]].cancelled_at is None
        assert rows[ids[state]].errors == []


async def test_cancel_ignores_other_workers_and_the_queue(
    oban_client: Oban, pool: AsyncConnectionPool
) -> None:
    config = make_config(oban_client)
    elsewhere = await arm(make_config(oban_client, timers_queue="elsewhere"), SCOPE, 1, "reminder")
    foreign = await insert_raw(
        pool,
        args={"scope": SCOPE, "ordinal": 2, "send_id": "reminder"},
        worker=OTHER_WORKER,
    )

    assert await cancel_timers(config, SCOPE, cancel_effect()) == 1
    assert await states(pool) == {elsewhere: "cancelled", foreign: "scheduled"}


async def test_a_cancelled_row_records_when_and_why_and_stays_the_dedup_guard(
    config: Config, pool: AsyncConnectionPool
) -> None:
    job_id = await arm(config, SCOPE, 1, "reminder")

    await cancel_timers(config, SCOPE, cancel_effect(send_id="reminder", ordinal=9))

    row = await job(pool, job_id)
    assert row.state == "cancelled"
    assert row.cancelled_at is not None
    assert row.cancelled_at >= row.inserted_at
    [entry] = row.errors
    assert "reminder" in entry["error"]
    assert entry["error"].startswith("cancelled")
    assert entry["attempt"] == 0
    assert "at" in entry

    # the cancelled row stays the dedup guard: a replay conflicts, nothing re-arms
    replay = await schedule(config, SCOPE, send_delayed(ordinal=1, send_id="reminder"))
    assert replay.conflict is True
    assert replay.job_id == job_id
    assert await states(pool) == {job_id: "cancelled"}


async def test_cancel_in_the_callers_transaction_rollback_undoes_and_commit_keeps(
    config: Config, database_url: str, pool: AsyncConnectionPool
) -> None:
    job_id = await arm(config, SCOPE, 1, "reminder")

    async with await AsyncConnection.connect(database_url) as conn:
        assert await cancel_timers(config, SCOPE, cancel_effect(), conn=conn) == 1
        assert await states(pool) == {job_id: "scheduled"}  # not visible outside yet
        await conn.rollback()
    assert await states(pool) == {job_id: "scheduled"}

    async with await AsyncConnection.connect(database_url) as conn:
        assert await cancel_timers(config, SCOPE, cancel_effect(), conn=conn) == 1
        await conn.commit()
    assert await states(pool) == {job_id: "cancelled"}


async def test_cancel_refuses_an_invalid_scope_or_a_missing_send_id(
    config: Config, pool: AsyncConnectionPool
) -> None:
    job_id = await arm(config, SCOPE, 1, "reminder")

    for scope in ["", None, 5]:
        with pytest.raises(InvalidScope):
            await cancel_timers(config, scope, cancel_effect())  # type: ignore[arg-type]
    for send_id in ["", None]:
        with pytest.raises(MissingSendId) as caught:
            await cancel_timers(config, SCOPE, cancel_effect(send_id=send_id))
        assert caught.value.reason == "missing_send_id"

    assert await states(pool) == {job_id: "scheduled"}
