"""Fixtures of the statifier_persistence tests.

The shared database fixtures (``pg_server``, ``schema_templates``, ``make_database``,
``module_database_url``, ``database_url``, ``pool``) are in ``packages/conftest.py``.
Here: ``template_database`` (the persistence tables plus the test executor's tables),
``store`` (a pool on the module's database), ``executor`` (a ``TableExecutor``) and
``executions`` (an ``Executions`` on both).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier_persistence import Executions

from persistence_support.common import TableExecutor, install_with_test_tables


@pytest.fixture(scope="session")
def template_database(schema_templates: Any) -> str:
    """A database with the persistence tables and the test tables, copied per module."""
    return str(schema_templates.get("statifier_persistence", install_with_test_tables))


@pytest_asyncio.fixture
async def store(module_database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """An open pool (1 to 6 connections) on the module's database, closed after the test."""
    pool = AsyncConnectionPool(module_database_url, open=False, min_size=1, max_size=6)
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def executor() -> TableExecutor:
    """A fresh test executor (durable effects as ``test_effects`` rows)."""
    return TableExecutor()


@pytest.fixture
def executions(store: AsyncConnectionPool, executor: TableExecutor) -> Executions:
    """``Executions`` on the module's database with the test executor and default host."""
    return Executions(store, executor=executor)
