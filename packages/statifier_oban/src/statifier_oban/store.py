"""SQL against the host's ``oban_jobs`` table, on the host's pool or the caller's connection.

oban 0.7.0 has no unique jobs and no cancel-by-query, so the insert-if-absent, the
scoped cancel and the pending count are our own statements, backed by the indexes that
``statifier_oban.schema`` installs. The pool and schema prefix come from the host's Oban
instance (two private attributes, read here and nowhere else; the version is pinned).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from oban import Oban
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from .errors import StoreUnavailable

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def pool_of(oban: Oban) -> AsyncConnectionPool:
    """The host's connection pool."""
    pool: AsyncConnectionPool = oban._query._pool
    return pool


def prefix_of(oban: Oban) -> str:
    """The schema holding the host's oban tables (validated as a plain identifier)."""
    prefix: str = oban._prefix
    if not _IDENTIFIER.match(prefix):
        raise StoreUnavailable(f"oban prefix {prefix!r} is not a plain identifier")
    return prefix


@asynccontextmanager
async def connection(oban: Oban, conn: AsyncConnection[Any] | None) -> AsyncIterator[Any]:
    """The caller's connection as it is (its transaction), or one from the host's pool.

    Database failures surface as ``StoreUnavailable`` with the cause chained.
    """
    try:
        if conn is not None:
            yield conn
            return
        async with pool_of(oban).connection() as pooled:
            yield pooled
    except psycopg.errors.UniqueViolation:
        raise
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"the job store is unavailable: {exc}") from exc
    except Exception as exc:
        if type(exc).__module__.startswith("psycopg_pool"):
            raise StoreUnavailable(f"the job store is unavailable: {exc}") from exc
        raise


def jsonb(value: Any) -> Jsonb:
    """Wrap a value for a jsonb parameter."""
    return Jsonb(value)


INSERT_TIMER = """
WITH inserted AS (
    INSERT INTO {p}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
    VALUES (
        %(args)s, %(meta)s, %(queue)s, %(worker)s, 'scheduled',
        timezone('UTC', now()) + %(delay_ms)s * interval '1 millisecond'
    )
    ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = %(worker)s DO NOTHING
    RETURNING id, state::text, queue, scheduled_at, inserted_at
)
SELECT id, state, queue, scheduled_at, inserted_at, false FROM inserted
"""

FIND_TIMER = """
SELECT id, state::text, queue, scheduled_at, inserted_at, true
FROM {p}.oban_jobs
WHERE worker = %(worker)s AND args->>'scope' = %(scope)s AND args->>'ordinal' = %(ordinal)s
"""

CANCEL_TIMERS = """
UPDATE {p}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: ' || %(reason)s))
WHERE worker = %(worker)s AND args->>'scope' = %(scope)s AND args->>'send_id' = %(send_id)s
  AND state IN ('scheduled', 'available', 'retryable')
RETURNING id
"""

COUNT_PENDING = """
SELECT args->>'scope', count(*)
FROM {p}.oban_jobs
WHERE worker = %(worker)s AND args->>'scope' = ANY(%(scopes)s)
  AND state IN ('scheduled', 'available', 'retryable')
GROUP BY 1
"""


def sql(template: str, oban: Oban) -> str:
    """A statement with the host's schema prefix filled in."""
    return template.replace("{p}", prefix_of(oban))
