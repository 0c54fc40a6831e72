"""SQL against the host's ``oban_jobs`` table, on the host's pool or the caller's connection.

oban 0.7.0 has no unique jobs and no cancel-by-query, so the insert-if-absent, the
scoped cancel and the pending count are our own statements, backed by the indexes that
``statifier_oban.schema`` installs. The pool and schema prefix come from the host's Oban
instance (two private attributes, read here and nowhere else; the version is pinned).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from oban import Oban
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from ._errors import StoreUnavailable
from ._names import CHILD_START_WORKER, INVOKE_WORKER, PENDING_STATES, TIMER_WORKER
from .schema import check_prefix

WORKERS = frozenset({TIMER_WORKER, INVOKE_WORKER, CHILD_START_WORKER})
_PENDING = ", ".join(f"'{state}'" for state in PENDING_STATES)


def pool_of(oban: Oban) -> AsyncConnectionPool:
    """The host's connection pool."""
    pool: AsyncConnectionPool = oban._query._pool
    return pool


def prefix_of(oban: Oban) -> str:
    """The schema holding the host's oban tables (validated as a plain identifier)."""
    prefix: str = oban._prefix
    try:
        return check_prefix(prefix)
    except ValueError as exc:
        raise StoreUnavailable(f"oban prefix {prefix!r} is unusable: {exc}") from exc


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
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        # psycopg_pool's PoolTimeout and PoolClosed are OperationalErrors too.
        raise StoreUnavailable(f"the job store is unavailable: {exc}") from exc


def jsonb(value: Any) -> Jsonb:
    """Wrap a value for a jsonb parameter."""
    return Jsonb(value)


INSERT_TIMER = """
WITH inserted AS (
    INSERT INTO {p}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
    VALUES (
        %(args)s, %(meta)s, %(queue)s, {worker}, 'scheduled',
        timezone('UTC', now()) + %(delay_ms)s * interval '1 millisecond'
    )
    ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = {worker} DO NOTHING
    RETURNING id, state::text, queue, scheduled_at, inserted_at
)
SELECT id, state, queue, scheduled_at, inserted_at, false FROM inserted
"""

INSERT_TIMERS = """
WITH rows AS (
    SELECT r.args, r.meta, r.delay_ms
    FROM unnest(%(args)s::jsonb[], %(metas)s::jsonb[], %(delays)s::bigint[])
        AS r(args, meta, delay_ms)
),
inserted AS (
    INSERT INTO {p}.oban_jobs (args, meta, queue, worker, state, scheduled_at)
    SELECT args, meta, %(queue)s, {worker}, 'scheduled',
           timezone('UTC', now()) + delay_ms * interval '1 millisecond'
    FROM rows
    ON CONFLICT ((args->>'scope'), (args->>'ordinal')) WHERE worker = {worker} DO NOTHING
    RETURNING id, state::text, queue, scheduled_at, inserted_at, args->>'ordinal' AS ordinal
)
SELECT id, state, queue, scheduled_at, inserted_at, false, ordinal FROM inserted
"""

FIND_TIMERS = """
SELECT id, state::text, queue, scheduled_at, inserted_at, true, args->>'ordinal'
FROM {p}.oban_jobs
WHERE worker = {worker} AND args->>'scope' = %(scope)s AND args->>'ordinal' = ANY(%(ordinals)s)
"""

FIND_TIMER = """
SELECT id, state::text, queue, scheduled_at, inserted_at, true
FROM {p}.oban_jobs
WHERE worker = {worker} AND args->>'scope' = %(scope)s AND args->>'ordinal' = %(ordinal)s
"""

CANCEL_TIMERS = """
UPDATE {p}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: ' || %(reason)s))
WHERE worker = {worker} AND args->>'scope' = %(scope)s AND args->>'send_id' = %(send_id)s
  AND state IN ({pending})
RETURNING id
"""

COUNT_PENDING = """
SELECT args->>'scope', count(*)
FROM {p}.oban_jobs
WHERE worker = {worker} AND args->>'scope' = ANY(%(scopes)s)
  AND state IN ({pending})
GROUP BY 1
"""


def sql(template: str, oban: Oban, worker: str) -> str:
    """A statement with the host's schema prefix and the worker name filled in.

    The worker name is a literal in the text, never a parameter: the partial indexes'
    predicates (``worker = '...'``) must be provable when a plan is built, including a
    generic plan of a prepared statement, or PostgreSQL can neither use them for the
    cancel nor infer them as the ``ON CONFLICT`` arbiter.
    """
    if worker not in WORKERS:
        raise ValueError(f"unknown worker {worker!r}")
    return (
        template.replace("{p}", prefix_of(oban))
        .replace("{worker}", f"'{worker}'")
        .replace("{pending}", _PENDING)
    )


INSERT_INVOCATION = """
WITH inserted AS (
    INSERT INTO {p}.oban_jobs (args, meta, queue, worker, state, max_attempts)
    VALUES (%(args)s, %(meta)s, %(queue)s, {worker}, 'available', %(max_attempts)s)
    ON CONFLICT ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'))
        WHERE worker = {worker} DO NOTHING
    RETURNING id, state::text, queue
)
SELECT id, state, queue, false, pg_notify(%(channel)s, json_build_object('queue', queue)::text)
FROM inserted
"""

FIND_INVOCATION = """
SELECT id, state::text, queue, true, NULL
FROM {p}.oban_jobs
WHERE worker = {worker} AND args->>'scope' = %(scope)s AND args->>'invoke_id' = %(invoke_id)s
  AND args->>'macrostep' = %(macrostep)s
"""

CANCEL_BY_INVOKE_ID = """
UPDATE {p}.oban_jobs
SET state = 'cancelled', cancelled_at = timezone('UTC', now()),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'at', timezone('UTC', now()), 'attempt', attempt,
        'error', 'cancelled: ' || %(reason)s))
WHERE worker = {worker} AND args->>'scope' = %(scope)s AND args->>'invoke_id' = %(invoke_id)s
  AND state IN ({pending})
RETURNING id
"""

INSERT_CHILD_STARTS = """
WITH inserted AS (
    INSERT INTO {p}.oban_jobs (args, meta, queue, worker, state)
    SELECT r.args, %(meta)s, %(queue)s, {worker}, 'available'
    FROM unnest(%(args)s::jsonb[]) AS r(args)
    ON CONFLICT ((args->>'scope'), (args->>'invoke_id'), (args->>'macrostep'), (args->>'index'))
        WHERE worker = {worker} DO NOTHING
    RETURNING id
)
SELECT count(*), pg_notify(%(channel)s, json_build_object('queue', %(queue)s::text)::text)
FROM inserted
"""


def insert_channel(oban: Oban) -> str:
    """The NOTIFY channel oban listens on for newly available jobs."""
    return f"{prefix_of(oban)}.oban_insert"
