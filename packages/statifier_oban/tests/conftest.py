"""Fixtures: one real PostgreSQL server per run, one fresh database per test, pools, Oban.

* ``pg_server`` (session): an embedded server started once, or the server named by
  ``$DATABASE_URL`` (its database is only used to create and drop others).
* ``template_database`` (session): a database with the full schema (``install()``), from
  which every test database is copied (``CREATE DATABASE … TEMPLATE``).
* ``make_database`` (function): factory ``make_database(template=None) -> url`` creating
  a fresh database (default: from the template; ``"template0"`` gives an empty one) that
  is dropped ``WITH (FORCE)`` after the test. ``database_url`` is one such database.
* ``pool`` (function, async): an open ``AsyncConnectionPool`` on ``database_url``.
* ``oban_client`` (function, async): a client-mode ``Oban`` on ``pool`` (not started).
* ``start_oban`` (function, async): factory ``await start_oban(queues, **options) -> Oban``
  starting server-mode instances that are all stopped at teardown.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import oban.oban as oban_module
import psycopg
import pytest
import pytest_asyncio
from oban import Oban
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import AsyncConnectionPool
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import install

STAGER_INTERVAL_S = 0.1
"""Stager poll interval of instances from ``start_oban`` (oban's default is 1 s)."""


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


@pytest.fixture(scope="session")
def template_database(pg_server: PgServer) -> Iterator[str]:
    """Name of a database holding oban's schema and our indexes, copied for every test.

    Connections to it are disallowed once installed (a template being copied must have
    no other sessions); it is dropped at the end of the run.
    """
    name = unique_name("statifier_tmpl")
    ident = sql.Identifier(name)
    with pg_server.admin() as conn:
        # template0: template1 may have sessions on a shared server, which blocks copying it.
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(ident))
    try:
        run_async(install(pg_server.url_for(name)))
        with pg_server.admin() as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(ident))
        yield name
    finally:
        with pg_server.admin() as conn:
            _drop_database(conn, name)


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
        name = unique_name("test")
        with pg_server.admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template or template_database)
                )
            )
        created.append(name)
        return pg_server.url_for(name)

    yield make
    if created:
        with pg_server.admin() as conn:
            for name in reversed(created):
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


def _forget(instance: Oban) -> None:
    """Drop ``instance`` from oban's global name registry (best effort, private API)."""
    registry = getattr(oban_module, "_instances", None)
    name = getattr(instance, "_name", None)
    if isinstance(registry, dict) and registry.get(name) is instance:
        del registry[name]


@pytest_asyncio.fixture
async def oban_client(pool: AsyncConnectionPool) -> AsyncIterator[Oban]:
    """A client-mode ``Oban`` (no queues, never started) on ``pool``, uniquely named."""
    client = Oban(pool=pool, name=unique_name("client"))
    try:
        yield client
    finally:
        _forget(client)


class StartOban(Protocol):
    """Signature of the ``start_oban`` fixture."""

    def __call__(
        self,
        queues: dict[str, Any],
        *,
        pool: AsyncConnectionPool | None = None,
        **options: Any,
    ) -> Awaitable[Oban]:
        """Start a server-mode ``Oban`` running ``queues``; see the fixture."""
        ...


@pytest_asyncio.fixture
async def start_oban(pool: AsyncConnectionPool) -> AsyncIterator[StartOban]:
    """Factory starting server-mode ``Oban`` instances; all are stopped at teardown.

    ``await start_oban({"timers": 5}, **options)`` starts an instance on the test's
    ``pool`` (or ``pool=``) with a unique ``name`` and ``node``, ``stager`` polling every
    0.1 s, ``lifeline`` checking every 0.5 s (rescuing after oban's default 300 s) and a
    1 s ``shutdown_grace_period``; any ``Oban(...)`` keyword in ``options`` overrides these.
    """
    started: list[Oban] = []

    async def start(
        queues: dict[str, Any], *, pool: AsyncConnectionPool | None = None, **options: Any
    ) -> Oban:
        name = unique_name("server")
        config: dict[str, Any] = {
            "name": name,
            "node": f"{name}.node",
            "stager": {"interval": STAGER_INTERVAL_S},
            "lifeline": {"interval": 0.5},
            "shutdown_grace_period": 1.0,
        }
        config.update(options)
        instance = Oban(pool=pool or default_pool, queues=queues, **config)
        try:
            await instance.start()
        except BaseException:
            await instance.stop()
            _forget(instance)
            raise
        started.append(instance)
        return instance

    default_pool = pool
    yield start
    errors: list[BaseException] = []
    for instance in reversed(started):
        try:
            await instance.stop()
        except Exception as exc:  # stop the others anyway
            errors.append(exc)
        finally:
            _forget(instance)
    if errors:
        raise errors[0]
