"""Fixtures of the statifier_web tests.

The shared database fixtures (``pg_server``, ``schema_templates``, ``make_database``,
``module_database_url``, ``database_url``, ``pool``) are in ``packages/conftest.py``.
Here: ``template_database`` (the full schema: oban's tables and the executions'), and
``web`` (the app served by a real uvicorn on loopback, in the test's event loop, over a
fresh database, with ``Executions`` on it and an HTTP client holding a token).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier_oban.schema import install

from web_support.rig import WebRig, web_rig


@pytest.fixture(scope="session")
def template_database(schema_templates: Any) -> str:
    """A database with the full schema, copied for every test's database."""
    return str(schema_templates.get("statifier_web", install))


@pytest_asyncio.fixture
async def web(pool: AsyncConnectionPool) -> AsyncIterator[WebRig]:
    """The app on a loopback port over the test's database (see ``web_support.rig``)."""
    async with web_rig(pool) as rig:
        yield rig
