"""A timer worker process for the SIGKILL test, and the delivery it runs.

Run as a module, with the workspace's interpreter and the tests' import path
(``oban_support.processes.WorkerProcesses`` passes ``PYTHONPATH``)::

    python -m oban_support.sigkill <conninfo> <oban name> <node> <queue>

It starts a server-mode Oban running ``<queue>`` (stager every 0.1 s, lifeline every 0.5 s
rescuing jobs left ``executing`` for 2 s) and serves until it is killed. Timer jobs
scheduled with ``delivery=RecordingDelivery`` (stored as ``oban_support.sigkill:RecordingDelivery``)
are delivered by writing to two tables:

* ``sigkill_delivered``: one row per ``(scope, ordinal)`` (``ON CONFLICT DO NOTHING``): what
  an idempotent host keeps; a timer delivered twice still has one row;
* ``sigkill_raw``: one row per delivery, no constraint, so at-least-once redeliveries show.

Both inserts commit together, before the worker returns and long before oban's batched ack:
a SIGKILL in between leaves a delivered timer ``executing``, to be rescued and delivered again.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, ClassVar

from oban import Oban, current_job
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import SendDelayed
from statifier_oban import Delivered, register_plugin

QUEUE_LIMIT = 20
RESCUE_AFTER_S = 2
DELIVERY_S = 0.02
"""How long a delivery takes after its records commit: at the test's 500 timers/s about ten
jobs are executing at any moment, so the kill always strands some (acks are batched and the
fetch is one statement, so with instant deliveries a kill can find none in flight)."""

CREATE_TABLES = """
CREATE TABLE IF NOT EXISTS sigkill_delivered (
    scope text NOT NULL,
    ordinal integer NOT NULL,
    PRIMARY KEY (scope, ordinal)
);
CREATE TABLE IF NOT EXISTS sigkill_raw (
    id bigserial PRIMARY KEY,
    scope text NOT NULL,
    ordinal integer NOT NULL,
    pid integer NOT NULL,
    job_id bigint,
    attempt integer,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""

RECORD_RAW = """
INSERT INTO sigkill_raw (scope, ordinal, pid, job_id, attempt)
VALUES (%(scope)s, %(ordinal)s, %(pid)s, %(job_id)s, %(attempt)s)
"""

RECORD_ONCE = """
INSERT INTO sigkill_delivered (scope, ordinal) VALUES (%(scope)s, %(ordinal)s)
ON CONFLICT DO NOTHING
"""


class RecordingDelivery:
    """Records each delivered ``(scope, ordinal)`` (deduplicated) and each raw delivery."""

    pool: ClassVar[AsyncConnectionPool | None] = None

    async def deliver(self, scope: str, effect: SendDelayed) -> Delivered:
        """Write both records in one transaction, then answer delivered."""
        pool = RecordingDelivery.pool
        if pool is None:
            raise RuntimeError("RecordingDelivery.pool is not set: not a sigkill worker process")
        job = current_job()
        params: dict[str, Any] = {
            "scope": scope,
            "ordinal": effect.ordinal,
            "pid": os.getpid(),
            "job_id": job.id if job is not None else None,
            "attempt": job.attempt if job is not None else None,
        }
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(RECORD_RAW, params)
            await conn.execute(RECORD_ONCE, params)
        await asyncio.sleep(DELIVERY_S)
        return Delivered()


async def serve(conninfo: str, name: str, node: str, queue: str) -> None:
    """Run the worker until the process is killed."""
    pool = AsyncConnectionPool(conninfo, open=False, min_size=2, max_size=QUEUE_LIMIT + 6)
    await pool.open()
    RecordingDelivery.pool = pool
    oban = Oban(
        pool=pool,
        name=name,
        node=node,
        queues={queue: QUEUE_LIMIT},
        stager={"interval": 0.1},
        lifeline={"interval": 0.5, "rescue_after": RESCUE_AFTER_S},
        shutdown_grace_period=1.0,
    )
    await oban.start()
    try:
        await asyncio.Event().wait()
    finally:
        await oban.stop()
        await pool.close()


def main(argv: list[str]) -> None:
    """Entry point when run as ``python -m``."""
    conninfo, name, node, queue = argv
    # Run with ``-m``, this module is ``__main__``; the job rows name ``oban_support.sigkill``.
    # Make that name this very module, so the worker finds the pool set here, and register
    # its delivery as a host module would (ADR 13).
    sys.modules.setdefault("oban_support.sigkill", sys.modules[__name__])
    register_plugin(RecordingDelivery, path="oban_support.sigkill:RecordingDelivery")
    asyncio.run(serve(conninfo, name, node, queue))


if __name__ == "__main__":
    main(sys.argv[1:])
