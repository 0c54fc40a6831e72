"""The schema installer (public as ``statifier_oban.schema``, whose docstring says what is
installed and how)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any, Final, LiteralString

import psycopg
from oban.schema import install_sql as oban_install_sql
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from .._errors import InvalidPrefix, InvalidTarget, SchemaError
from .._names import (
    CHILD_START_DEDUP_INDEX,
    INDEXES,
    INVOKE_DEDUP_INDEX,
    INVOKE_PENDING_INDEX,
    SESSION_LEASES,
    TIMER_DEDUP_INDEX,
    TIMER_PENDING_INDEX,
)
from . import _sql
from ._sql import check_prefix

__all__ = [
    "CHILD_START_DEDUP_INDEX",
    "INDEXES",
    "INVOKE_DEDUP_INDEX",
    "INVOKE_PENDING_INDEX",
    "OBAN_TABLES",
    "SESSION_LEASES",
    "TIMER_DEDUP_INDEX",
    "TIMER_PENDING_INDEX",
    "InvalidPrefix",
    "InvalidTarget",
    "SchemaError",
    "Target",
    "check_prefix",
    "describe",
    "install",
    "install_sql",
    "invoke_indexes_sql",
    "timer_indexes_sql",
    "verify",
]

OBAN_TABLES: Final = ("oban_jobs", "oban_leaders", "oban_producers")
"""The tables an oban server needs before it starts its queues."""

DEFAULT_CONNECT_TIMEOUT_S: Final = 10
"""``connect_timeout`` used for a conninfo target that sets none (nor ``PGCONNECT_TIMEOUT``)."""

type Target = str | AsyncConnection[Any] | AsyncConnectionPool[Any]
"""Where to install: a conninfo string or URL, an open connection, or an open pool."""


def _render(composable: sql.Composable) -> str:
    """SQL text of a composed statement; needs no connection for identifiers and literals."""
    return composable.as_string(None)


def timer_indexes_sql(prefix: str = "public") -> str:
    """SQL creating only our two timer indexes on ``<prefix>.oban_jobs`` (idempotent).

    The text of ``sql/timer_indexes.sql`` with the prefix filled in.
    """
    return _sql.statement("timer_indexes", prefix)


def invoke_indexes_sql(prefix: str = "public") -> str:
    """SQL creating our invocation and fan-out indexes on ``<prefix>.oban_jobs``.

    The text of ``sql/invoke_indexes.sql`` with the prefix filled in.
    """
    return _sql.statement("invoke_indexes", prefix)


def install_sql(prefix: str = "public") -> str:
    """oban's schema SQL (``oban.schema.install_sql``) followed by our indexes, the
    planner statistics of a job's scope and our table.

    For migration tools. Every statement is idempotent. For a prefix other than
    ``public``, run it with ``search_path`` set to that schema (created first), as
    :func:`install` does: oban's type check looks in ``current_schema()``, so it skips
    creating ``<prefix>.oban_job_state`` when ``public`` already has one, and its
    ``oban_count_estimate`` function lands in ``current_schema()``.

    Raises:
        InvalidPrefix: ``prefix`` is not a plain identifier (see :func:`check_prefix`).
    """
    check_prefix(prefix)
    text = (
        oban_install_sql(prefix).rstrip()
        + "\n\n"
        + timer_indexes_sql(prefix)
        + "\n"
        + invoke_indexes_sql(prefix)
        + "\n"
        + _sql.statement("scope_statistics", prefix)
        + "\n"
        + _sql.statement("session_leases", prefix)
    )
    persistence = _persistence_schema()
    if persistence is not None:
        text += "\n" + persistence.install_sql(prefix)
    return text


def _persistence_schema() -> ModuleType | None:
    """``statifier_persistence.schema`` when that package is installed, else None.

    Durable executions are optional (``statifier-oban[persistence]``): with them, one
    install creates the job schema and the execution tables together.
    """
    try:
        from statifier_persistence import schema
    except ImportError:
        return None
    return schema


def describe(conninfo: str) -> str:
    """A password-free ``host=… port=… dbname=…`` summary of a connection string."""
    try:
        params = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "<unparsable connection string>"
    shown = {key: params[key] for key in ("host", "port", "dbname") if params.get(key)}
    return make_conninfo("", **shown) if shown else "<default connection>"


def _one_line(exc: BaseException) -> str:
    """The error's message with newlines and runs of spaces collapsed."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _with_connect_timeout(conninfo: str) -> str:
    """``conninfo`` plus ``connect_timeout`` unless it (or its environment variable) sets one."""
    params = conninfo_to_dict(conninfo)
    if params.get("connect_timeout") or os.environ.get("PGCONNECT_TIMEOUT"):
        return conninfo
    return make_conninfo(conninfo, connect_timeout=DEFAULT_CONNECT_TIMEOUT_S)


@asynccontextmanager
async def _connection(target: Target) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection for ``target``; failing to get one raises :class:`SchemaError`.

    A caller's connection is used as it is (in its transaction, if any) and left open.
    """
    if isinstance(target, AsyncConnection):
        yield target
    elif isinstance(target, AsyncConnectionPool):
        try:
            conn = await target.getconn()
        except psycopg.Error as exc:  # PoolTimeout and PoolClosed are OperationalErrors
            raise SchemaError(f"cannot get a connection from the pool: {_one_line(exc)}") from exc
        try:
            yield conn
        finally:
            await target.putconn(conn)
    elif isinstance(target, str):
        try:
            conn = await AsyncConnection.connect(_with_connect_timeout(target))
        except psycopg.Error as exc:
            raise SchemaError(f"cannot connect to {describe(target)}: {_one_line(exc)}") from exc
        try:
            yield conn
        finally:
            await conn.close()
    else:
        raise InvalidTarget(
            "target must be a conninfo string, a psycopg AsyncConnection or a "
            f"psycopg_pool AsyncConnectionPool, not {type(target).__name__}"
        )


def _lock_key(prefix: str) -> int:
    """A stable signed 64-bit advisory lock key serialising installs into one schema."""
    digest = hashlib.blake2b(f"statifier_oban.install:{prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def _scalar(conn: AsyncConnection[Any], query: LiteralString, params: list[Any]) -> Any:
    """The first column of the first row of ``query``."""
    row = await (await conn.execute(query, params)).fetchone()
    assert row is not None  # noqa: S101 - callers pass scalar SELECTs: always one row
    return row[0]


async def install(target: Target, *, prefix: str = "public") -> None:
    """Install oban's schema and our indexes (and, with statifier_persistence installed,
    the execution tables) into schema ``prefix``, in one transaction.

    Idempotent (safe to run again, also concurrently: installs into one schema take an
    advisory lock). ``target`` is a conninfo string (connected and closed here), an
    ``AsyncConnection`` (used as is: inside the caller's transaction this is a savepoint
    and commits with it) or an open ``AsyncConnectionPool``.

    The schema is created if missing, and ``search_path`` is set to it for the duration
    (then restored), which works around oban 0.7.0 installing into the wrong schema for a
    non-``public`` prefix.

    Raises:
        InvalidPrefix: ``prefix`` is not a plain identifier (a ValueError).
        SchemaError: the database is unreachable or a statement failed (cause chained).
        InvalidTarget: ``target`` is none of the above (a TypeError).
    """
    statements = install_sql(prefix)
    schema = sql.Identifier(prefix)
    async with _connection(target) as conn:
        try:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_key(prefix)])
                saved_path = await _scalar(conn, "SELECT current_setting('search_path')", [])
                saved_level = await _scalar(
                    conn, "SELECT current_setting('client_min_messages')", []
                )
                exists = await _scalar(
                    conn,
                    "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = %s",
                    [prefix],
                )
                if not exists:  # IF NOT EXISTS alone would still need CREATE on the database
                    await conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
                await conn.execute(
                    "SELECT set_config('search_path', %s, true), "
                    "set_config('client_min_messages', 'warning', true)",
                    [_render(schema)],
                )
                await conn.execute(statements)
                await conn.execute(
                    "SELECT set_config('search_path', %s, true), "
                    "set_config('client_min_messages', %s, true)",
                    [saved_path, saved_level],
                )
        except psycopg.Error as exc:
            raise SchemaError(
                f"installing the schema into {prefix!r} failed: {_one_line(exc)}"
            ) from exc


async def verify(target: Target, *, prefix: str = "public") -> list[str]:
    """Names of the missing pieces in schema ``prefix``; empty when all is installed.

    Checks oban's three tables (:data:`OBAN_TABLES`), our table (:data:`SESSION_LEASES`),
    the execution tables when statifier_persistence is installed, and our indexes (which
    must be valid indexes on ``oban_jobs``), reported in that order. It checks names, not
    definitions.

    Raises:
        InvalidPrefix: ``prefix`` is not a plain identifier (a ValueError).
        SchemaError: the database is unreachable or the query failed (cause chained).
    """
    check_prefix(prefix)
    indexes = list(INDEXES)
    persistence = _persistence_schema()
    tables = [
        *OBAN_TABLES,
        SESSION_LEASES,
        *(persistence.TABLES if persistence is not None else ()),
    ]
    async with _connection(target) as conn:
        try:
            async with conn.transaction():
                cursor = await conn.execute(
                    _sql.statement("verify_schema", prefix),
                    {"prefix": prefix, "tables": tables, "indexes": indexes},
                )
                present = {row[0] for row in await cursor.fetchall()}
        except psycopg.Error as exc:
            raise SchemaError(f"checking the schema {prefix!r} failed: {_one_line(exc)}") from exc
    return [name for name in (*tables, *indexes) if name not in present]
