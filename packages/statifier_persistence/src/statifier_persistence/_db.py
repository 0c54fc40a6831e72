"""Connections: the caller's (joining its transaction) or one from the pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from ._errors import NotConnected, StoreError


@asynccontextmanager
async def transaction(
    pool: AsyncConnectionPool[Any] | None, conn: AsyncConnection[Any] | None
) -> AsyncIterator[AsyncConnection[Any]]:
    """A transaction: on ``conn`` if given (a savepoint inside the caller's transaction,
    which commits or rolls back with it), else on a connection from ``pool``.

    Leaving the block by an exception rolls it back; a psycopg error (the database failed,
    or could not be reached) surfaces as ``StoreError`` with the cause chained.
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
        raise StoreError(f"the execution store failed: {one_line(exc)}") from exc


def one_line(exc: BaseException) -> str:
    """The error's message on one line (runs of whitespace collapsed)."""
    return " ".join(str(exc).split()) or type(exc).__name__
