"""``Executions.create`` from the registry: by chart name (its newest revision that is not
retired) or by identity; and a database without our tables says how to install them."""

from __future__ import annotations

import pytest
from psycopg_pool import AsyncConnectionPool
from statifier_persistence import (
    ChartNotRegistered,
    ChartRetired,
    ExecutionNotFound,
    Executions,
    InvalidArgument,
    NotInstalled,
    StoreError,
)

from persistence_support.common import TableExecutor, chart, unique


async def test_a_name_starts_its_newest_revision_that_is_not_retired(
    executions: Executions,
) -> None:
    name = unique("chart")
    first, second = chart('<state id="v1"/>', name=name), chart('<state id="v2"/>', name=name)
    await executions.register(first)
    await executions.register(second)
    newest = await executions.create(name, execution_id=unique())
    assert newest.state.active_leaf_ids() == ("v2",)
    assert newest.execution.chart_identity == second.identity
    assert newest.entry is not None
    assert newest.entry.detail["chart"] == {
        "identity": second.identity,
        "name": name,
        "version": None,
    }
    older = await executions.create(first.identity, execution_id=unique())
    assert older.state.active_leaf_ids() == ("v1",)
    await executions.cancel(newest.execution.id)  # nothing pins the revision any more
    await executions.retire(second.identity)
    fallback = await executions.create(name, execution_id=unique())
    assert fallback.execution.chart_identity == first.identity
    with pytest.raises(ChartRetired):
        await executions.create(second.identity, execution_id=unique())


async def test_an_unknown_chart_creates_nothing(executions: Executions) -> None:
    execution_id = unique()
    with pytest.raises(ChartNotRegistered):
        await executions.create(unique("nothing"), execution_id=execution_id)
    with pytest.raises(InvalidArgument):
        await executions.create("", execution_id=execution_id)
    with pytest.raises(InvalidArgument):
        await executions.create(42, execution_id=execution_id)  # type: ignore[call-overload]
    with pytest.raises(ExecutionNotFound):
        await executions.get(execution_id)


async def test_a_database_without_our_tables_says_to_install_them(make_database: object) -> None:
    url = make_database("template0")  # type: ignore[operator]
    pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=2)
    await pool.open(wait=True)
    try:
        executions = Executions(pool, executor=TableExecutor())
        machine = chart('<state id="s"/>', name="bare")
        with pytest.raises(NotInstalled, match="run `statifier-oban install") as raised:
            await executions.create(machine)
        assert isinstance(raised.value, StoreError)  # what callers caught before
        assert 'relation "public.statifier_charts" does not exist' in str(raised.value)
        with pytest.raises(NotInstalled):
            await executions.history(unique())
        with pytest.raises(NotInstalled):
            await executions.wait(unique(), status="completed", timeout=1)
    finally:
        await pool.close()
