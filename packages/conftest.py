"""Database fixtures every package's tests share (this conftest sits at their common parent).

One real PostgreSQL server per run, one fresh database per test:

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

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg
import pytest
import pytest_asyncio
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier_oban.embedded import EmbeddedPostgres


@dataclass(frozen=True)
class PgServer:
    """The PostgreSQL server of this test run."""

    url: str
    """Conninfo of the maintenance database (``postgres`` on the embedded server)."""
    embedded: EmbeddedPostgres | None
    """The embedded server, or None when ``$DATABASE_URL`` names the server."""

    def url_for(self, database: str) -> str:
        """Conninfo of ``database`` on this server (same host, port, user, password)."""
        return make_conninfo(self.url, dbname=database)

    def admin(self) -> psycopg.Connection[Any]:
        """A new autocommit connection to the maintenance database (for CREATE/DROP)."""
        return psycopg.connect(self.url, autocommit=True)


def run_async[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on a fresh event loop in a worker thread.

    For sync fixtures and tests: it never touches the event loop pytest-asyncio manages.
    """
    with ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def unique_name(kind: str) -> str:
    """A name unique to this run, e.g. for databases or Oban instances."""
    return f"{kind}_{uuid.uuid4().hex[:16]}"


def _drop_database(conn: psycopg.Connection[Any], name: str) -> None:
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _copy_database(server: PgServer, template: str, kind: str) -> str:
    """Create a database copied from ``template``; return its name."""
    name = unique_name(kind)
    with server.admin() as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return name


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The server: ``$DATABASE_URL`` if set, else an embedded one started once per run.

    The embedded server is stopped at the end of the run, which must delete its files.
    """
    url = os.environ.get("DATABASE_URL")
    if url:
        yield PgServer(url=url, embedded=None)
        return
    with EmbeddedPostgres.start() as embedded:
        yield PgServer(url=embedded.url, embedded=embedded)
    # Checked here rather than by a test of its own, which would start a second server.
    root = embedded.data_dir.parent
    assert not root.exists(), f"EmbeddedPostgres.stop() left {root} behind"
    embedded.stop()  # a second stop is a no-op


Installer = Callable[[str], Coroutine[Any, Any, Any]]
"""An async schema installer taking a conninfo (``statifier_oban.schema.install``...)."""


@dataclass
class SchemaTemplates:
    """Template databases of this run, one per installer name; see ``schema_templates``."""

    server: PgServer
    created: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, installer: Installer) -> str:
        """The template database for ``name``, installed by ``installer`` on first use."""
        if name in self.created:
            return self.created[name]
        database = unique_name(f"tmpl_{name}")
        ident = sql.Identifier(database)
        with self.server.admin() as conn:
            # template0: template1 may have sessions on a shared server, which blocks copying.
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(ident))
        self.created[name] = database
        run_async(installer(self.server.url_for(database)))
        with self.server.admin() as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(ident))
        return database

    def drop_all(self) -> None:
        """Drop every template created."""
        with self.server.admin() as conn:
            for database in self.created.values():
                _drop_database(conn, database)


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
        name = _copy_database(pg_server, template or template_database, "test")
        created.append(name)
        return pg_server.url_for(name)

    yield make
    if created:
        with pg_server.admin() as conn:
            for name in reversed(created):
                _drop_database(conn, name)


@pytest.fixture(scope="module")
def module_database_url(pg_server: PgServer, template_database: str) -> Iterator[str]:
    """Conninfo of a database copied from ``template_database`` for one test module.

    Cheaper than a database per test (a copy costs about a second on a busy machine);
    the module's tests isolate on their own ids.
    """
    name = _copy_database(pg_server, template_database, "mod")
    try:
        yield pg_server.url_for(name)
    finally:
        with pg_server.admin() as conn:
            _drop_database(conn, name)


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
