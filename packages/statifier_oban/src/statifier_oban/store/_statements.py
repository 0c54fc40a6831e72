"""Our statements against the host's ``oban_jobs``, on the host's pool or the caller's
connection.

oban 0.7.0 has no unique jobs and no cancel-by-query, so the insert-if-absent, the scoped
cancel and the pending count are our own statements (``sql/*.sql``, loaded by
``statifier_oban.store._sql``), backed by the indexes that ``statifier_oban.schema`` installs.
The pool and schema prefix come from the host's Oban instance (through
``statifier_oban.store._oban_compat``; the version is pinned).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, LiteralString

import orjson
import psycopg
from oban import Oban
from psycopg import AsyncConnection, AsyncCursor
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.values import brief

from .._errors import InvalidPrefix, StoreUnavailable, ValueRefused
from .._names import DUE_CHANNEL
from . import _oban_compat, _sql


def prefix_of(oban: Oban) -> str:
    """The schema holding the host's oban tables (checked: a plain identifier)."""
    prefix = _oban_compat.prefix_of(oban)
    try:
        return _sql.check_prefix(prefix)
    except InvalidPrefix as exc:
        raise StoreUnavailable(f"oban prefix {prefix!r} is unusable: {exc}") from exc


def statement(oban: Oban, name: str, **choices: str) -> LiteralString:
    """Statement ``sql/<name>.sql`` for the host's schema (``choices``: see ``_sql``)."""
    return _sql.statement(name, prefix_of(oban), **choices)


@asynccontextmanager
async def connection(oban: Oban, conn: AsyncConnection[Any] | None) -> AsyncIterator[Any]:
    """The caller's connection as it is (its transaction), or one from the host's pool.

    Database failures surface as ``StoreUnavailable`` with the cause chained.
    """
    try:
        if conn is not None:
            yield conn
            return
        async with _oban_compat.pool_of(oban).connection() as pooled:
            yield pooled
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        # psycopg_pool's PoolTimeout and PoolClosed are OperationalErrors too.
        raise StoreUnavailable(f"the job store is unavailable: {exc}") from exc


@asynccontextmanager
async def autocommit(pool: AsyncConnectionPool[Any]) -> AsyncIterator[AsyncConnection[Any]]:
    """A connection of ``pool`` in autocommit mode, given back as it was lent.

    One statement on it is one round trip: no ``BEGIN`` before it, no ``COMMIT`` after
    (a single statement is atomic on its own). Errors are psycopg's, unchanged.
    """
    async with pool.connection() as conn:
        if conn.autocommit:
            yield conn
            return
        await conn.set_autocommit(True)
        try:
            yield conn
        finally:
            try:
                if not conn.closed:
                    await conn.set_autocommit(False)
            except psycopg.Error:
                # A broken connection goes back closed: the pool replaces it, and no
                # caller ever gets an autocommit connection it did not ask for.
                await conn.close()


def jsonb(value: Any) -> Jsonb:
    """Wrap a value for a jsonb parameter."""
    return Jsonb(value)


def plain_jsonb(value: Any) -> Jsonb:
    """Wrap a value made only of strings, ints, bools, None, lists and dicts with string
    keys (floats only where a NaN written as null is better than a refused statement) for
    a jsonb parameter, encoded by orjson.

    For such a value orjson writes the JSON ``json.dumps`` writes, up to whitespace and
    the escaping of non-ASCII characters, which jsonb does not keep, in a tenth of the
    time. The caller vouches for the types: orjson writes a float NaN as null where the
    standard encoder writes ``NaN`` (which PostgreSQL refuses), and it serializes types
    (dates, dataclasses) the standard encoder refuses. An int beyond 64 bits or a lone
    surrogate, which orjson refuses, falls back to the standard encoder.
    """
    return Jsonb(value, dumps=_plain_dumps)


def _plain_dumps(value: Any) -> bytes | str:
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a big int or a lone surrogate
        return json.dumps(value)


class _JsonText(Loader):
    """A json or jsonb column as its text, undecoded."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


def read_json_as_text(cursor: AsyncCursor[Any]) -> None:
    """Make ``cursor`` return its json and jsonb columns (text format) as their undecoded
    text, for the caller to read row by row: a decoder's error in one row would otherwise
    fail the whole ``fetchall``, the rows that read well with it."""
    cursor.adapters.register_loader("jsonb", _JsonText)
    cursor.adapters.register_loader("json", _JsonText)


def check_texts(fields: Mapping[str, str | None], **context: Any) -> None:
    """Refuse (``ValueRefused``, with ``context``) a field jsonb cannot hold as a string.

    A jsonb string is UTF-8 text: a NUL character or a lone surrogate (both reach a chart
    in event data, e.g. JSON from anyone) makes PostgreSQL refuse the whole row, and on
    a caller's connection that aborts the caller's transaction. Checked first, nothing
    is sent.
    """
    for name, text in fields.items():
        why = None if text is None else unstorable(text)
        if why is not None:
            raise ValueRefused(
                f"the {name} {brief(text)} holds {why}, which PostgreSQL cannot store", **context
            )


def unstorable(text: str) -> str | None:
    """What in ``text`` PostgreSQL cannot store as text (``a NUL character``, ``a lone
    surrogate``), or None."""
    if "\x00" in text:
        return "a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate"
    return None


def insert_channel(oban: Oban) -> str:
    """The NOTIFY channel oban listens on for newly available jobs."""
    return f"{prefix_of(oban)}.oban_insert"


def due_channel(oban: Oban) -> str:
    """The NOTIFY channel on which prompt stagers hear of timers due soon."""
    return f"{prefix_of(oban)}.oban_{DUE_CHANNEL}"


async def cancel_pending(
    db: Any, oban: Oban, *, worker: str, key: str, scope: str, value: str, reason: str
) -> int:
    """Cancel ``worker``'s pending jobs whose args hold ``scope`` and ``key = value``.

    One statement for every kind of job (``sql/cancel_jobs.sql``): a timer's ``send_id``,
    an invocation's or its child starts' ``invoke_id``. ``reason`` goes to the rows'
    errors. Returns how many rows were cancelled.
    """
    cursor = await db.execute(
        statement(oban, "cancel_jobs", worker=worker, key=key),
        {"scope": scope, "value": value, "reason": reason},
    )
    return len(await cursor.fetchall())
