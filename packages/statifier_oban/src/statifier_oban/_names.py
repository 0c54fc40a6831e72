"""Durable names: worker names stored on job rows, meta keys, telemetry prefix.

These strings live in the database for as long as a job row does; renaming one orphans
every stored job, so they are spelled once, here.
"""

from __future__ import annotations

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

META_UNRESOLVED_HANDLER = "unresolved_handler"
META_CHILD_STARTER = "child_starter"
