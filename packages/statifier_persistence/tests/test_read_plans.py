"""A step taken alone reads its execution with a statement PostgreSQL plans once: after
its first custom plans it keeps a generic one (``pg_prepared_statements`` of the only
connection), with a step key or without. A null key, or an array of one id, had it plan
the read again at every call, which cost more than running it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_persistence import AlreadyApplied, Executions, Stepped

from persistence_support.common import TableExecutor, chart

TICKING = chart(
    """
    <state id="ticking">
      <transition event="tick" target="ticking"/>
    </state>
    """
)

STEPS = 30
"""Steps per test; psycopg prepares a statement at its sixth use on a connection, and
PostgreSQL makes custom plans for its first five runs, so 20 of the reads may reuse one."""

READ = "-- One execution with its position"
"""How ``select_execution.sql`` starts."""


@pytest_asyncio.fixture
async def one_connection(module_database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """A pool of one connection: every statement of the test is prepared on it."""
    pool = AsyncConnectionPool(module_database_url, open=False, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()


async def plans_of_the_read(pool: AsyncConnectionPool) -> tuple[int, int]:
    """(generic, custom) plans PostgreSQL made for the single read on the connection."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            [READ + "%"],
        )
        rows = await cursor.fetchall()
    assert len(rows) == 1, rows
    generic, custom = rows[0]
    return int(generic), int(custom)


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
async def test_a_step_alone_keeps_one_plan_for_its_read(
    one_connection: AsyncConnectionPool, keyed: bool
) -> None:
    executions = Executions(one_connection, executor=TableExecutor())
    created = await executions.create(TICKING)
    for n in range(STEPS):
        key = f"tick-{n}" if keyed else None
        result = await executions.step(created.execution.id, Event(name="tick"), key=key)
        assert isinstance(result, Stepped)
    generic, custom = await plans_of_the_read(one_connection)
    assert custom <= 5
    assert generic >= STEPS - 10


async def test_a_keyed_step_alone_still_sees_its_key_applied(
    one_connection: AsyncConnectionPool,
) -> None:
    executions = Executions(one_connection, executor=TableExecutor())
    created = await executions.create(TICKING)
    execution_id = created.execution.id
    assert isinstance(await executions.step(execution_id, Event(name="tick"), key="k"), Stepped)
    again = await executions.step(execution_id, Event(name="tick"), key="k")
    assert isinstance(again, AlreadyApplied)
    assert again.key == "k"
    keyless = await executions.step(execution_id, Event(name="tick"))
    assert isinstance(keyless, Stepped)
    assert keyless.execution.step_count == again.execution.step_count + 1
