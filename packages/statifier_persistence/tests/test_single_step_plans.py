"""A step taken alone reads and stores its execution with statements PostgreSQL plans
once: after their first custom plans it keeps a generic one (``pg_prepared_statements`` of
the only connection), with a step key or without. A null key, or an array of one id, had
it plan the read again at every call, which cost more than running it; and with a few
thousand executions in the table, the store of arrays of one (a generic plan expects ten
rows of an unnest) was planned again at every step.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from psycopg.adapt import PyFormat, Transformer
from psycopg_pool import AsyncConnectionPool
from statifier.core.events import Event
from statifier_persistence import AlreadyApplied, Executions, Stepped
from statifier_persistence._stepping import STORE_ARRAYS, one_row_values

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

STORE = "-- What steps (or a create, or a cancel) store"
"""How ``store_executions.sql`` starts."""

ROWS = 3000
"""Executions in the table for the store's test: enough that PostgreSQL's statistics make
the custom plan of one row look ten times cheaper than a generic plan of ten."""


@pytest_asyncio.fixture
async def one_connection(module_database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """A pool of one connection: every statement of the test is prepared on it."""
    pool = AsyncConnectionPool(module_database_url, open=False, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()


async def plans_of(pool: AsyncConnectionPool, start: str) -> tuple[int, int]:
    """(generic, custom) plans PostgreSQL made on the connection for the statements that
    begin with ``start`` (psycopg prepares one per set of parameter types)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            [start + "%"],
        )
        rows = await cursor.fetchall()
    assert rows, f"no prepared statement starts with {start!r}"
    return sum(int(row[0]) for row in rows), sum(int(row[1]) for row in rows)


async def fill(pool: AsyncConnectionPool, execution_id: str, count: int) -> None:
    """``count`` copies of execution ``execution_id`` under other ids, and fresh statistics."""
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO statifier_executions"
            " SELECT (jsonb_populate_record(e, jsonb_build_object('id', e.id || '_copy_' || n))).*"
            " FROM statifier_executions AS e, generate_series(1, %s) AS n WHERE e.id = %s",
            [count, execution_id],
        )
        await conn.execute("ANALYZE statifier_executions")


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
@pytest.mark.parametrize("rows", [0, ROWS], ids=["few", "thousands"])
async def test_a_step_alone_keeps_one_plan_for_its_read_and_its_store(
    one_connection: AsyncConnectionPool, keyed: bool, rows: int
) -> None:
    executions = Executions(one_connection, executor=TableExecutor())
    created = await executions.create(TICKING)
    await fill(one_connection, created.execution.id, rows)
    for n in range(STEPS):
        key = f"tick-{n}" if keyed else None
        result = await executions.step(created.execution.id, Event(name="tick"), key=key)
        assert isinstance(result, Stepped)
        assert result.execution.step_count == created.execution.step_count + n + 1
    for statement in (READ, STORE):
        generic, custom = await plans_of(one_connection, statement)
        assert custom <= 5, statement
        assert generic >= STEPS - 10, statement


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


def test_a_step_alone_binds_the_same_types_whatever_its_counters() -> None:
    # psycopg types an int by its size (int2, int4, int8): counters of other sizes would be
    # statements prepared, and planned afresh, apart.
    def types(macrostep: int, round_: int) -> list[int]:
        row = dict.fromkeys(STORE_ARRAYS, "text") | {
            "positions": b"position",
            "macrosteps": macrostep,
            "rounds": round_,
        }
        values = one_row_values(tuple(row[name] for name in STORE_ARRAYS))
        dumpers = Transformer()
        return [dumpers.get_dumper(value, PyFormat.BINARY).oid for value in values]

    small = types(3, 1)
    assert small == types(2**20, 2**40) == types(2**62, 0)
    assert small[STORE_ARRAYS.index("macrosteps")] == small[STORE_ARRAYS.index("rounds")] == 20
