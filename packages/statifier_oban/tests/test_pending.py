"""``timer.pending_for`` against a real PostgreSQL.

Spec 2.2 (pending_for) and acceptance 18: every requested scope is answered, only pending
timer jobs count, duplicates are queried once, the list is chunked, and "could not count"
raises instead of answering 0. Pending means scheduled, available or retryable.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban._config import Config
from statifier_oban._errors import InvalidScope, StoreUnavailable
from statifier_oban.timers._schedule import PENDING_CHUNK, pending_for, schedule

from oban_support.effects_factory import (
    OTHER_WORKER,
    forget,
    insert_raw,
    make_config,
    send_delayed,
    set_state,
    unopened_oban,
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


# --- counting --------------------------------------------------------------------------


async def test_pending_for_answers_every_requested_scope_counting_only_pending_timers(
    config: Config, pool: AsyncConnectionPool
) -> None:
    ordinal = 0
    for state in [*PENDING, *NOT_PENDING]:
        ordinal += 1
        job_id = await arm(config, "busy", ordinal, "reminder")
        await set_state(pool, job_id, state)
    await arm(config, "one", 1, "reminder")
    for state in NOT_PENDING:
        ordinal += 1
        await set_state(pool, await arm(config, "finished", ordinal, "reminder"), state)
    await insert_raw(
        pool, args={"scope": "busy", "ordinal": 99, "send_id": "x"}, worker=OTHER_WORKER
    )
    await insert_raw(pool, args={"scope": "foreign", "ordinal": 1}, worker=OTHER_WORKER)

    counts = await pending_for(config, ["busy", "one", "finished", "foreign", "nothing"])

    assert counts == {"busy": 3, "one": 1, "finished": 0, "foreign": 0, "nothing": 0}
    assert list(counts) == ["busy", "one", "finished", "foreign", "nothing"]


async def test_pending_for_queries_duplicate_scopes_once(
    config: Config, pool: AsyncConnectionPool
) -> None:
    await arm(config, "a", 1, "x")
    await arm(config, "a", 2, "y")

    counts = await pending_for(config, ["a", "b", "a", "a", "b"])

    assert counts == {"a": 2, "b": 0}
    assert await pending_for(config, []) == {}


async def test_pending_for_counts_more_scopes_than_one_chunk(
    config: Config, pool: AsyncConnectionPool
) -> None:
    scopes = [f"scope-{n}" for n in range(2 * PENDING_CHUNK + 201)]
    armed = {scopes[0]: 1, scopes[PENDING_CHUNK - 1]: 2, scopes[PENDING_CHUNK]: 1, scopes[-1]: 3}
    for scope, count in armed.items():
        for ordinal in range(1, count + 1):
            await arm(config, scope, ordinal, "reminder")

    counts = await pending_for(config, scopes)

    assert len(counts) == len(scopes)
    assert {scope: n for scope, n in counts.items() if n} == armed
    assert sum(counts.values()) == 7


async def test_pending_for_refuses_an_invalid_scope() -> None:
    with unopened_oban() as host:
        config = make_config(host)
        for bad in ["", None, 7]:
            with pytest.raises(InvalidScope):
                await pending_for(config, ["fine", bad])  # type: ignore[list-item]


async def test_pending_for_raises_when_the_pool_is_closed(
    config: Config, pool: AsyncConnectionPool
) -> None:
    await arm(config, SCOPE, 1, "reminder")
    await pool.close()

    with pytest.raises(StoreUnavailable):
        await pending_for(config, [SCOPE])


async def test_pending_for_raises_when_the_database_is_unreachable(pg_server: Any) -> None:
    missing = pg_server.url_for(f"no_such_database_{uuid.uuid4().hex[:8]}")
    unreachable = AsyncConnectionPool(missing, open=False, min_size=1, max_size=1, timeout=0.5)
    await unreachable.open(wait=False)
    host = Oban(pool=unreachable, name=f"unreachable_{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(StoreUnavailable):
            await pending_for(make_config(host), [SCOPE])
    finally:
        forget(host)
        await unreachable.close()
