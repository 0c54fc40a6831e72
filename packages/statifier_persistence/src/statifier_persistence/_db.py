"""Connections: the caller's (joining its transaction) or one from the pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from ._errors import NotConnected, NotInstalled, StoreError

STEP_KEY_CONSTRAINT = "statifier_step_keys_unique"
"""The primary key of ``statifier_step_keys`` (``install.sql``)."""


class KeyRace(Exception):
    """A step's key was applied by a concurrent step first: storing it met the key's
    primary key (``store_executions.sql``) and the transaction rolled back. The step is
    tried again, and its locked read then sees the key."""


INSTALL_HINT = (
    "run `statifier-oban install --database-url URL` (or statifier_persistence.install) "
    "against this database; it installs and upgrades the tables"
)


@asynccontextmanager
async def transaction(
    pool: AsyncConnectionPool[Any] | None, conn: AsyncConnection[Any] | None
) -> AsyncIterator[AsyncConnection[Any]]:
    """A transaction: on ``conn`` if given (a savepoint inside the caller's transaction,
    which commits or rolls back with it), else on a connection from ``pool``.

    Leaving the block by an exception rolls it back; a psycopg error (the database failed,
    or could not be reached) surfaces as ``StoreError`` with the cause chained, a missing
    table or column (nothing installed, or by an older release) as ``NotInstalled``, and
    a step key applied first by a concurrent step as ``KeyRace``.
    """
    try:
        if conn is not None:
            async with conn.transaction():
                yield conn
            return
        if pool is None:
            raise NotConnected("pass conn= or build Executions with a pool")
        async with pool.connection() as pooled, pooled.transaction():
            yield pooled
    except psycopg.Error as exc:
        if (
            isinstance(exc, psycopg.errors.UniqueViolation)
            and exc.diag.constraint_name == STEP_KEY_CONSTRAINT
        ):
            raise KeyRace(exc.diag.message_detail) from exc
        raise store_error(exc) from exc


def store_error(exc: psycopg.Error) -> StoreError:
    """The error a psycopg error surfaces as (raise it ``from exc``): ``NotInstalled`` for
    a missing table or column (nothing installed, or by an older release), else
    ``StoreError``."""
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        missing = exc.diag.message_primary or one_line(exc)
        return NotInstalled(f"the execution tables are not installed ({missing}): {INSTALL_HINT}")
    return StoreError(f"the execution store failed: {one_line(exc)}")


def one_line(exc: BaseException) -> str:
    """The error's message on one line (runs of whitespace collapsed)."""
    return " ".join(str(exc).split()) or type(exc).__name__
