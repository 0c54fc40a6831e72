"""The database schema: oban's own tables plus the indexes statifier_oban needs.

oban 0.7.0 (open source) has no unique jobs and no cancel-by-query, so our jobs rely on
indexes of ours on ``<prefix>.oban_jobs``, each partial on our worker names. For timers:

``statifier_oban_timers_dedup`` (:data:`TIMER_DEDUP_INDEX`)
    UNIQUE on ``(args->>'scope', args->>'ordinal')`` in *every* state, so a timer row
    can be inserted at most once for as long as the row exists (until oban's pruner
    deletes it). Rows whose args lack ``scope`` or ``ordinal`` are not constrained.
``statifier_oban_timers_pending`` (:data:`TIMER_PENDING_INDEX`)
    on ``(args->>'scope', args->>'send_id')`` for the pending states, so a cancel by
    ``(scope, send_id)`` is an index scan.

Invocations and fan-out child starts have the same pair (:data:`INVOKE_DEDUP_INDEX`,
:data:`CHILD_START_DEDUP_INDEX`, :data:`INVOKE_PENDING_INDEX`). The DDL is in
``sql/timer_indexes.sql`` and ``sql/invoke_indexes.sql``. One table of ours sits beside
oban's: :data:`SESSION_LEASES` (``sql/session_leases.sql``), who owns each live session.

:func:`install_sql` returns the SQL (for migration tools); :func:`install` applies it in
one transaction and works around oban's non-``public`` prefix bug; :func:`verify` lists
what is missing. With statifier_persistence installed (``statifier-oban[persistence]``),
the durable-execution tables (``statifier_persistence.schema``) are part of all three.

The code lives in ``statifier_oban.store._schema``, in the oban seam.
"""

from __future__ import annotations

from .store._schema import (
    CHILD_START_DEDUP_INDEX,
    INDEXES,
    INVOKE_DEDUP_INDEX,
    INVOKE_PENDING_INDEX,
    OBAN_TABLES,
    SESSION_LEASES,
    TIMER_DEDUP_INDEX,
    TIMER_PENDING_INDEX,
    InvalidPrefix,
    InvalidTarget,
    SchemaError,
    Target,
    check_prefix,
    describe,
    install,
    install_sql,
    invoke_indexes_sql,
    timer_indexes_sql,
    verify,
)

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
