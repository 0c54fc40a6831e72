"""A PostgreSQL server for a test run, and fresh databases copied from installed templates.

One server per run (embedded, or the one ``$DATABASE_URL`` names), one template database
per installer (the schema installed once), and a fresh copy of a template per test: a copy
is a file copy inside the server, much cheaper than installing the schema again. The
statifier_oban pytest plugin builds its fixtures on these, and so do the repository's own
test fixtures (``packages/conftest.py``).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

if TYPE_CHECKING:
    from statifier_oban.embedded import EmbeddedPostgres

DATABASE_URL_VARIABLE: Final = "DATABASE_URL"
"""The environment variable naming a server to use instead of an embedded one."""

Installer = Callable[[str], Coroutine[Any, Any, Any]]
"""An async schema installer taking a conninfo (``statifier_oban.schema.install``...)."""


@dataclass(frozen=True)
class PostgresServer:
    """The PostgreSQL server of a test run."""

    url: str
    """Conninfo of its maintenance database (``postgres`` on an embedded server), which is
    only used to create and drop others."""
    embedded: EmbeddedPostgres | None
    """The embedded server, or None when ``$DATABASE_URL`` names the server."""

    def url_for(self, database: str) -> str:
        """Conninfo of ``database`` on this server (same host, port, user, password)."""
        return make_conninfo(self.url, dbname=database)

    def admin(self) -> psycopg.Connection[Any]:
        """A new autocommit connection to the maintenance database (for CREATE/DROP)."""
        return psycopg.connect(self.url, autocommit=True)

    def copy_database(self, template: str, kind: str = "test") -> str:
        """Create a database copied from ``template``; return its name."""
        name = unique_name(kind)
        with self.admin() as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
        return name

    def drop_database(self, name: str) -> None:
        """Drop ``name`` (``WITH (FORCE)``: its open connections are closed)."""
        with self.admin() as conn:
            drop(conn, name)


def drop(conn: psycopg.Connection[Any], name: str) -> None:
    """Drop database ``name`` on ``conn``'s server, if it exists, connections and all."""
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    """The server named by ``$DATABASE_URL`` if set, else an embedded one (extra
    ``statifier-oban[embedded]``), started here and stopped at exit."""
    url = os.environ.get(DATABASE_URL_VARIABLE)
    if url:
        yield PostgresServer(url=url, embedded=None)
        return
    from statifier_oban.embedded import EmbeddedPostgres

    with EmbeddedPostgres.start() as embedded:
        yield PostgresServer(url=embedded.url, embedded=embedded)


def run_async[T](coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on a fresh event loop in a worker thread.

    For sync fixtures: it never touches an event loop the caller (or pytest-asyncio) runs.
    """
    with ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def unique_name(kind: str) -> str:
    """A name unique to this run, e.g. for databases or Oban instances."""
    return f"{kind}_{uuid.uuid4().hex[:16]}"


@dataclass
class SchemaTemplates:
    """Template databases of a run, one per installer name, dropped by :meth:`drop_all`."""

    server: PostgresServer
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
                drop(conn, database)
