"""Database fixtures every package's tests share (this conftest sits at their common parent).

One real PostgreSQL server per run, one fresh database per test (the server, the
templates and the copies are ``statifier_oban.testing``'s, which its pytest plugin uses):

* ``pg_server`` (session): an embedded server started once, or the server named by
  ``$DATABASE_URL`` (its database is only used to create and drop others).
* ``schema_templates`` (session): ``schema_templates.get(name, installer)`` creates (once
  per run) a database on which ``await installer(conninfo)`` ran, closed to connections so
  it can be copied; every template is dropped at the end of the run. Each package's
  ``conftest.py`` defines ``template_database`` (session) from it, with its installer.
* ``make_database`` (function): factory ``make_database(template=None) -> url`` creating
  a fresh database (default: from ``template_database``; ``"template0"`` gives an empty
  one) that is dropped ``WITH (FORCE)`` after the test. ``database_url`` is one such
  database.
* ``module_database_url`` (module): one such database shared by a test module.
* ``pool`` (function, async): an open ``AsyncConnectionPool`` on ``database_url``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Protocol

import pytest
import pytest_asyncio
from psycopg_pool import AsyncConnectionPool
from statifier_oban.testing import PostgresServer as PgServer
from statifier_oban.testing import SchemaTemplates

_embedded_roots: list[Path] = []
"""Where the run's embedded server kept its files (checked once it has stopped)."""


@pytest.fixture(scope="session")
def pg_server(statifier_postgres: PgServer) -> PgServer:
    """The server: ``$DATABASE_URL`` if set, else an embedded one started once per run.

    It is the statifier_oban pytest plugin's ``statifier_postgres``, so the plugin's
    fixtures (``durable_env``, in any test folder) use the same server.
    """
    if statifier_postgres.embedded is not None:
        _embedded_roots.append(statifier_postgres.embedded.data_dir.parent)
    return statifier_postgres


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The embedded server, stopped with the session's fixtures, must have deleted its
    files (checked here rather than by a test of its own, which would start a second
    server)."""
    left = [root for root in _embedded_roots if root.exists()]
    if left:
        print(f"\nEmbeddedPostgres.stop() left {left[0]} behind")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def schema_templates(pg_server: PgServer) -> Iterator[SchemaTemplates]:
    """Factory of installed template databases, dropped at the end of the run."""
    templates = SchemaTemplates(pg_server)
    try:
        yield templates
    finally:
        templates.drop_all()


class MakeDatabase(Protocol):
    """Signature of the ``make_database`` fixture."""

    def __call__(self, template: str | None = None) -> str:
        """Create a fresh database from ``template`` (default: the schema template)."""
        ...


@pytest.fixture
def make_database(pg_server: PgServer, template_database: str) -> Iterator[MakeDatabase]:
    """Factory of fresh databases, each dropped (``WITH (FORCE)``) after the test.

    ``make_database()`` copies the installed template; ``make_database("template0")``
    gives an empty database. Returns the new database's conninfo.
    """
    created: list[str] = []

    def make(template: str | None = None) -> str:
        name = pg_server.copy_database(template or template_database, "test")
        created.append(name)
        return pg_server.url_for(name)

    yield make
    for name in reversed(created):
        pg_server.drop_database(name)


@pytest.fixture(scope="module")
def module_database_url(pg_server: PgServer, template_database: str) -> Iterator[str]:
    """Conninfo of a database copied from ``template_database`` for one test module.

    Cheaper than a database per test (a copy costs about a second on a busy machine);
    the module's tests isolate on their own ids.
    """
    name = pg_server.copy_database(template_database, "mod")
    try:
        yield pg_server.url_for(name)
    finally:
        pg_server.drop_database(name)


@pytest.fixture
def database_url(make_database: MakeDatabase) -> str:
    """Conninfo of a fresh database with the schema installed, private to this test."""
    return make_database()


@pytest_asyncio.fixture
async def pool(database_url: str) -> AsyncIterator[AsyncConnectionPool]:
    """An open pool (1 to 5 connections) on ``database_url``, closed after the test."""
    pool = AsyncConnectionPool(database_url, open=False, min_size=1, max_size=5)
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()
