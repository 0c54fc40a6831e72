"""Durable names: worker names stored on job rows, meta keys, our index names.

These strings live in the database for as long as a job row (or an installed schema)
does; renaming one orphans every stored job, so they are spelled once, here.
"""

from __future__ import annotations

from typing import Final

WORKERS_MODULE: Final = "statifier_oban.workers"
"""The module rows name the timer, invocation and child start workers by (wherever their
code lives, their ``__module__`` is this, so oban stores and resolves this path)."""

EXECUTIONS_MODULE: Final = "statifier_oban.executions"
"""The module rows name the execution deliveries by (``meta.delivery``)."""

CHILDREN_MODULE: Final = "statifier_oban.children"
"""The module rows name the fan-out's settlement and cascade workers, its child starter and
the map handler by."""

TIMER_WORKER = "statifier_oban.workers.TimerWorker"
"""``oban_jobs.worker`` of a fired-timer job (module path + class, as oban resolves it)."""

PENDING_STATES = ("scheduled", "available", "retryable")
"""Job states a cancel reaches and a pending count counts; never ``executing``.

``suspended`` is left out: oban-py's open-source engine never sets it, and its enum
value is added by oban's installer in the same transaction as our partial indexes,
where PostgreSQL refuses to use a new enum value."""

META_DELIVERY = "delivery"
META_TIMEOUT = "timeout"

INVOKE_WORKER = "statifier_oban.workers.InvokeWorker"
"""``oban_jobs.worker`` of an async invocation job (runs the host's handler)."""

CHILD_START_WORKER = "statifier_oban.workers.ChildStartWorker"
"""``oban_jobs.worker`` of a fan-out child start job."""

SETTLEMENT_WORKER = "statifier_oban.children.SettlementWorker"
"""``oban_jobs.worker`` of a fan-out's settlement: steps the settled answer into the parent
(durable executions only)."""

CASCADE_WORKER = "statifier_oban.children.CascadeWorker"
"""``oban_jobs.worker`` of a fan-out's cascade: cancels the children still running after
the fan-out failed or was abandoned (durable executions only)."""

META_TRACE: Final = "trace_context"
"""Meta key: the W3C trace context (``traceparent``, ``tracestate``) of the span that stored
the job, written only while tracing is on; the span of the job's run continues it (ADR 30).
Durable: rows written by one release are run by the next."""

MESSAGE_WORKER = "statifier_oban.executions.MessageWorker"
"""``oban_jobs.worker`` of a message's delivery between a parent execution and a chart it
invoked: steps the receiver's oldest message into it (durable executions only)."""

POST_WORKER = "statifier_oban.executions.PostWorker"
"""``oban_jobs.worker`` of a BasicHTTP POST an execution sends (``<send type="basichttp">``):
makes the POST, and raises its final failure in the execution (durable executions only)."""

META_UNRESOLVED_HANDLER = "unresolved_handler"
"""Meta key: ``"retry"`` makes an unknown handler retry; anything else (absent too) cancels."""
META_CHILD_STARTER = "child_starter"

META_ANSWER: Final = "answer"
"""The meta key of the answer a handler's ``run`` gave (``{"data": ...}``), kept on its
invocation job when the delivery snoozed it (a parked execution): a later attempt delivers
it without running the handler again."""

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

SCOPE_STATISTICS: Final = "statifier_oban_job_scope"
"""Extended statistics on ``args->>'scope'`` of ``oban_jobs`` (``sql/scope_statistics.sql``):
the planner's estimate of the jobs of one scope."""

INDEXES: Final = (
    TIMER_DEDUP_INDEX,
    TIMER_PENDING_INDEX,
    INVOKE_DEDUP_INDEX,
    CHILD_START_DEDUP_INDEX,
    INVOKE_PENDING_INDEX,
)
"""Every index of ours, in creation order."""

SESSION_LEASES: Final = "statifier_session_leases"
"""Our table: who owns each live session id, at which epoch (``sql/session_leases.sql``)."""

DUE_CHANNEL: Final = "statifier_timer_due"
"""oban notifier channel (``<prefix>.oban_statifier_timer_due`` in PostgreSQL) on which a
schedule announces a timer due within :data:`ANNOUNCE_HORIZON_MS`, with its due time, to
the prompt stagers of every node. Schedulers and stagers of different releases must agree
on it, as on the horizon."""

ANNOUNCE_HORIZON_MS: Final = 1000
"""Timers due sooner than this after their insert are announced on :data:`DUE_CHANNEL`;
no prompt stager rests longer, so it finds every later timer by itself before it is due."""
