"""The database schema: oban's own tables plus the two timer indexes statifier_oban needs.

oban 0.7.0 (open source) has no unique jobs and no cancel-by-query, so timers rely on
two indexes of ours on ``<prefix>.oban_jobs``, both partial on the timer worker name:

``statifier_oban_timers_dedup`` (:data:`TIMER_DEDUP_INDEX`)
    UNIQUE on ``(args->>'scope', args->>'ordinal')`` in *every* state, so a timer row
    can be inserted at most once for as long as the row exists (until oban's pruner
    deletes it). Rows whose args lack ``scope`` or ``ordinal`` are not constrained.
``statifier_oban_timers_pending`` (:data:`TIMER_PENDING_INDEX`)
    on ``(args->>'scope', args->>'send_id')`` for the pending states, so a cancel by
    ``(scope, send_id)`` is an index scan.

:func:`install_sql` returns the SQL (for migration tools); :func:`install` applies it in
one transaction and works around oban's non-``public`` prefix bug; :func:`verify` lists
what is missing.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final, LiteralString

import psycopg
from oban.schema import install_sql as oban_install_sql
from psycopg import AsyncConnection, sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from ._errors import InvalidPrefix, InvalidTarget, SchemaError
from ._names import CHILD_START_WORKER, INVOKE_WORKER, PENDING_STATES, TIMER_WORKER

__all__ = [
    "CHILD_START_DEDUP_INDEX",
    "INDEXES",
    "INVOKE_DEDUP_INDEX",
    "INVOKE_PENDING_INDEX",
    "OBAN_TABLES",
    "TIMER_DEDUP_INDEX",
    "TIMER_PENDING_INDEX",
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

TIMER_DEDUP_INDEX: Final = "statifier_oban_timers_dedup"
"""Unique index: one timer row per ``(scope, ordinal)``, whatever its state."""

TIMER_PENDING_INDEX: Final = "statifier_oban_timers_pending"
"""Index backing a cancel by ``(scope, send_id)`` among pending timer rows."""

INVOKE_DEDUP_INDEX: Final = "statifier_oban_invoke_dedup"
"""Unique index: one invocation job per ``(scope, invoke_id, macrostep)``, any state."""

CHILD_START_DEDUP_INDEX: Final = "statifier_oban_child_start_dedup"
"""Unique index: one child start job per ``(scope, invoke_id, macrostep, index)``."""

INVOKE_PENDING_INDEX: Final = "statifier_oban_invoke_pending"
"""Index backing a cancel by ``(scope, invoke_id)`` among pending invocation/start jobs."""

INDEXES: Final = (
    TIMER_DEDUP_INDEX,
    TIMER_PENDING_INDEX,
    INVOKE_DEDUP_INDEX,
    CHILD_START_DEDUP_INDEX,
    INVOKE_PENDING_INDEX,
)
"""Every index of ours, in creation order."""

OBAN_TABLES: Final = ("oban_jobs", "oban_leaders", "oban_producers")
"""The tables an oban server needs before it starts its queues."""

DEFAULT_CONNECT_TIMEOUT_S: Final = 10
"""``connect_timeout`` used for a conninfo target that sets none (nor ``PGCONNECT_TIMEOUT``)."""

type Target = str | AsyncConnection[Any] | AsyncConnectionPool[Any]
"""Where to install: a conninfo string or URL, an open connection, or an open pool."""

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_MAX_IDENTIFIER = 63  # NAMEDATALEN - 1

# SQL key words that cannot name a schema unquoted (pg_get_keywords() catcode 'R' and 'T',
# PostgreSQL 18). oban writes the prefix unquoted, so these would break its statements.
_NOT_SCHEMA_NAMES: Final = frozenset(
    """
    all analyse analyze and any array as asc asymmetric both case cast check collate column
    constraint create current_catalog current_date current_role current_time
    current_timestamp current_user default deferrable desc distinct do else end except false
    fetch for foreign from grant group having in initially intersect into lateral leading
    limit localtime localtimestamp not null offset on only or order placing primary
    references returning select session_user some symmetric system_user table then to
    trailing true union unique user using variadic when where window with
    authorization binary collation concurrently cross current_schema freeze full ilike inner
    is isnull join left like natural notnull outer overlaps right similar tablesample verbose
    """.split()  # noqa: SIM905 (a word list reads better as text)
)


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a plain schema name oban can use unquoted; else ValueError.

    Plain means lowercase ASCII letters, digits and underscores, not starting with a digit,
    at most 63 characters, and not a reserved SQL key word. (oban interpolates the prefix
    into its SQL unquoted, which folds case, but checks its tables by exact name, so a
    prefix with capitals could never work.)
    """
    if not isinstance(prefix, str):
        raise InvalidPrefix(f"schema prefix must be a string, not {type(prefix).__name__}")
    if not _IDENTIFIER.fullmatch(prefix):
        raise InvalidPrefix(
            f"schema prefix {prefix!r} is not a plain identifier "
            "(lowercase letters, digits and underscores, not starting with a digit)"
        )
    if len(prefix) > _MAX_IDENTIFIER:
        raise InvalidPrefix(f"schema prefix {prefix!r} is longer than {_MAX_IDENTIFIER} characters")
    if prefix in _NOT_SCHEMA_NAMES:
        raise InvalidPrefix(f"schema prefix {prefix!r} is a reserved SQL key word")
    return prefix


def _render(composable: sql.Composable) -> str:
    """SQL text of a composed statement; needs no connection for identifiers and literals."""
    return composable.as_string(None)


def timer_indexes_sql(prefix: str = "public") -> str:
    """SQL creating only our two timer indexes on ``<prefix>.oban_jobs`` (idempotent)."""
    table = sql.SQL("{}.oban_jobs").format(sql.Identifier(check_prefix(prefix)))
    worker = sql.Literal(TIMER_WORKER)
    states = sql.SQL(", ").join(sql.Literal(state) for state in PENDING_STATES)
    dedup = sql.SQL(
        "CREATE UNIQUE INDEX IF NOT EXISTS {name}\n"
        "ON {table} ((args->>'scope'), (args->>'ordinal'))\n"
        "WHERE worker = {worker};\n"
    ).format(name=sql.Identifier(TIMER_DEDUP_INDEX), table=table, worker=worker)
    pending = sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name}\n"
        "ON {table} ((args->>'scope'), (args->>'send_id'))\n"
        "WHERE worker = {worker} AND state IN ({states});\n"
    ).format(name=sql.Identifier(TIMER_PENDING_INDEX), table=table, worker=worker, states=states)
    return "-- statifier_oban timer indexes\n\n" + _render(dedup) + "\n" + _render(pending)


def invoke_indexes_sql(prefix: str = "public") -> str:
    """SQL creating our invocation and fan-out indexes on ``<prefix>.oban_jobs``."""
    table = sql.SQL("{}.oban_jobs").format(sql.Identifier(check_prefix(prefix)))
    invoke = sql.Literal(INVOKE_WORKER)
    child = sql.Literal(CHILD_START_WORKER)
    states = sql.SQL(", ").join(sql.Literal(state) for state in PENDING_STATES)
    statements = [
        sql.SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS {name}\n"
            "ON {table} ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'))\n"
            "WHERE worker = {worker};\n"
        ).format(name=sql.Identifier(INVOKE_DEDUP_INDEX), table=table, worker=invoke),
        sql.SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS {name}\n"
            "ON {table} ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'),"
            " (args->>'index'))\n"
            "WHERE worker = {worker};\n"
        ).format(name=sql.Identifier(CHILD_START_DEDUP_INDEX), table=table, worker=child),
        sql.SQL(
            "CREATE INDEX IF NOT EXISTS {name}\n"
            "ON {table} ((args->>'scope'), (args->>'invoke_id'))\n"
            "WHERE worker IN ({invoke}, {child}) AND state IN ({states});\n"
        ).format(
            name=sql.Identifier(INVOKE_PENDING_INDEX),
            table=table,
            invoke=invoke,
            child=child,
            states=states,
        ),
    ]
    return "-- statifier_oban invocation indexes\n\n" + "\n".join(_render(x) for x in statements)


def install_sql(prefix: str = "public") -> str:
    """oban's schema SQL (``oban.schema.install_sql``) followed by our two timer indexes.

    For migration tools. Every statement is idempotent. For a prefix other than
    ``public``, run it with ``search_path`` set to that schema (created first), as
    :func:`install` does: oban's type check looks in ``current_schema()``, so it skips
    creating ``<prefix>.oban_job_state`` when ``public`` already has one, and its
    ``oban_count_estimate`` function lands in ``current_schema()``.

    Raises:
        ValueError: ``prefix`` is not a plain identifier (see :func:`check_prefix`).
    """
    check_prefix(prefix)
    return (
        oban_install_sql(prefix).rstrip()
        + "\n\n"
        + timer_indexes_sql(prefix)
        + "\n"
        + invoke_indexes_sql(prefix)
    )


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
    assert row is not None
    return row[0]


async def install(target: Target, *, prefix: str = "public") -> None:
    """Install oban's schema and our timer indexes into schema ``prefix``, in one transaction.

    Idempotent (safe to run again, also concurrently: installs into one schema take an
    advisory lock). ``target`` is a conninfo string (connected and closed here), an
    ``AsyncConnection`` (used as is: inside the caller's transaction this is a savepoint
    and commits with it) or an open ``AsyncConnectionPool``.

    The schema is created if missing, and ``search_path`` is set to it for the duration
    (then restored), which works around oban 0.7.0 installing into the wrong schema for a
    non-``public`` prefix.

    Raises:
        ValueError: ``prefix`` is not a plain identifier.
        SchemaError: the database is unreachable or a statement failed (cause chained).
        TypeError: ``target`` is none of the above.
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


_VERIFY = """
SELECT c.relname
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_catalog.pg_class AS t ON t.oid = i.indrelid
WHERE n.nspname = %(prefix)s
  AND (
    (c.relkind IN ('r', 'p') AND c.relname = ANY(%(tables)s))
    OR (c.relkind = 'i' AND i.indisvalid AND t.relname = 'oban_jobs'
        AND c.relname = ANY(%(indexes)s))
  )
"""


async def verify(target: Target, *, prefix: str = "public") -> list[str]:
    """Names of the missing pieces in schema ``prefix``; empty when all is installed.

    Checks oban's three tables (:data:`OBAN_TABLES`) and our two indexes (which must be
    valid indexes on ``oban_jobs``), reported in that order. It checks names, not
    definitions.

    Raises:
        ValueError: ``prefix`` is not a plain identifier.
        SchemaError: the database is unreachable or the query failed (cause chained).
    """
    check_prefix(prefix)
    indexes = list(INDEXES)
    async with _connection(target) as conn:
        try:
            async with conn.transaction():
                cursor = await conn.execute(
                    _VERIFY, {"prefix": prefix, "tables": list(OBAN_TABLES), "indexes": indexes}
                )
                present = {row[0] for row in await cursor.fetchall()}
        except psycopg.Error as exc:
            raise SchemaError(f"checking the schema {prefix!r} failed: {_one_line(exc)}") from exc
    return [name for name in (*OBAN_TABLES, *indexes) if name not in present]
