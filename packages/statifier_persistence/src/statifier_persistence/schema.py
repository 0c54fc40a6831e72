"""The persistence tables: install them (idempotent), or check they are there.

:func:`install_sql` is the DDL (``sql/install.sql``) for migration tools; :func:`install`
applies it in one transaction, serialised with other installs into the same schema;
:func:`verify` names what is missing. ``statifier-oban install`` runs this installer too
when statifier_persistence is installed, so the job schema and these tables live together.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final, LiteralString

import psycopg
from psycopg import AsyncConnection, sql
from psycopg_pool import AsyncConnectionPool

from ._db import one_line
from ._errors import InvalidArgument, SchemaError
from ._sql import check_prefix, statement

TABLES: Final = (
    "statifier_charts",
    "statifier_executions",
    "statifier_step_keys",
    "statifier_fan_outs",
    "statifier_fan_out_children",
    "statifier_history",
    "statifier_watches",
    "statifier_chart_links",
    "statifier_messages",
)
"""Our tables, in creation order."""

DEFAULT_CONNECT_TIMEOUT_S: Final = 10
"""``connect_timeout`` for a conninfo target (unless the conninfo sets one)."""

type Target = str | AsyncConnection[Any] | AsyncConnectionPool[Any]
"""Where to install: a conninfo string or URL, an open connection, or an open pool."""


def install_sql(prefix: str = "public") -> LiteralString:
    """The DDL of our tables and indexes in schema ``prefix`` (every statement idempotent).

    The schema itself must exist (``install`` creates it). ``sql/install.sql`` holds the
    executions, ``sql/fan_out_tables.sql`` the fan-outs, ``sql/history_tables.sql`` the
    history and the watches of waiters, ``sql/invoked_chart_tables.sql`` the charts invoked
    as child executions (tree columns, chart links, mailboxes).
    """
    return "\n".join(
        statement(name, prefix)
        for name in ("install", "fan_out_tables", "history_tables", "invoked_chart_tables")
    )


def _lock_key(prefix: str) -> int:
    """A stable signed 64-bit advisory lock key serialising installs into one schema."""
    digest = hashlib.blake2b(f"statifier_persistence:{prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@asynccontextmanager
async def _connection(target: Target) -> AsyncIterator[AsyncConnection[Any]]:
    if isinstance(target, AsyncConnection):
        yield target
    elif isinstance(target, AsyncConnectionPool):
        async with target.connection() as conn:
            yield conn
    elif isinstance(target, str):
        conn = await AsyncConnection.connect(target, connect_timeout=DEFAULT_CONNECT_TIMEOUT_S)
        try:
            yield conn
        finally:
            await conn.close()
    else:
        raise InvalidArgument(
            "target must be a conninfo string, a psycopg AsyncConnection or a "
            f"psycopg_pool AsyncConnectionPool, not {type(target).__name__}"
        )


async def install_into(conn: AsyncConnection[Any], prefix: str = "public") -> None:
    """Install into schema ``prefix`` on ``conn``, inside the transaction it is in.

    For installers that already hold a transaction (``statifier-oban install``): creates
    the schema if missing and runs :func:`install_sql` under the schema's advisory lock.
    """
    ddl = install_sql(prefix)
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(prefix)])
    await conn.execute(
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(check_prefix(prefix)))
    )
    await conn.execute(ddl)


async def install(target: Target, *, prefix: str = "public") -> None:
    """Install our tables into schema ``prefix`` in one transaction (idempotent).

    ``target`` is a conninfo string (connected and closed here), an ``AsyncConnection``
    (inside the caller's transaction this is a savepoint) or an open pool. Raises
    ``InvalidPrefix``, ``SchemaError`` (database unreachable or a statement failed, the
    cause chained) or ``InvalidArgument`` (a target of another type).
    """
    check_prefix(prefix)
    try:
        async with _connection(target) as conn, conn.transaction():
            await install_into(conn, prefix)
    except psycopg.Error as exc:
        raise SchemaError(f"installing into schema {prefix!r} failed: {one_line(exc)}") from exc


async def verify(target: Target, *, prefix: str = "public") -> list[str]:
    """The names of our tables missing from schema ``prefix`` (empty: all installed)."""
    check_prefix(prefix)
    try:
        async with _connection(target) as conn:
            cursor = await conn.execute(
                statement("verify", prefix), {"schema": prefix, "tables": list(TABLES)}
            )
            present = {row[0] for row in await cursor.fetchall()}
    except psycopg.Error as exc:
        raise SchemaError(f"checking schema {prefix!r} failed: {one_line(exc)}") from exc
    return [name for name in TABLES if name not in present]
