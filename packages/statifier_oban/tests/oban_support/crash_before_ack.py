"""A timer worker process that dies between a delivery and the ack of its outcome.

Run as a module, with the workspace's interpreter and the tests' import path
(``oban_support.processes.WorkerProcesses`` passes ``PYTHONPATH``)::

    python -m oban_support.crash_before_ack <conninfo> <oban name> <node> <queue>

It starts a server-mode Oban running ``<queue>`` without leadership (so its lifeline never
runs and its lease never blocks the test's own Oban), and serves until it dies. Timer jobs
scheduled with ``delivery=CrashAfterDelivery`` (stored as
``oban_support.crash_before_ack:CrashAfterDelivery``) are delivered by inserting one row into
``crash_deliveries`` (committed), then answering ``Delivered()``; in this process (the
environment has :data:`CRASH_ENV`) the delivery first arranges a SIGKILL on the event loop's
next turn. That turn comes after oban's executor has put the job's outcome into its producer's
pending batch and before the producer wakes up to write it: the job stays ``executing``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import ClassVar

import psycopg
from oban import Oban, current_job
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import SendDelayed
from statifier_oban import Delivered, register_plugin

CRASH_ENV = "STATIFIER_TEST_CRASH_AFTER_DELIVERY"
"""Set in the worker process: the delivery kills it right after answering."""

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS crash_deliveries (
    scope text NOT NULL,
    ordinal integer NOT NULL,
    pid integer NOT NULL,
    attempt integer NOT NULL
)
"""

RECORD = "INSERT INTO crash_deliveries (scope, ordinal, pid, attempt) VALUES (%s, %s, %s, %s)"


class CrashAfterDelivery:
    """Records the delivery (committed); in the worker process, then dies before the ack."""

    conninfo: ClassVar[str | None] = None

    async def deliver(self, scope: str, effect: SendDelayed) -> Delivered:
        """Insert one ``crash_deliveries`` row; arrange the SIGKILL where asked."""
        conninfo = CrashAfterDelivery.conninfo
        if conninfo is None:
            raise RuntimeError("CrashAfterDelivery.conninfo is not set")
        job = current_job()
        attempt = job.attempt if job is not None else 0
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
            await conn.execute(RECORD, (scope, effect.ordinal, os.getpid(), attempt))
        if os.environ.get(CRASH_ENV):
            asyncio.get_running_loop().call_soon(os.kill, os.getpid(), signal.SIGKILL)
        return Delivered()


async def serve(conninfo: str, name: str, node: str, queue: str) -> None:
    """Run the worker until the process dies."""
    CrashAfterDelivery.conninfo = conninfo
    pool = AsyncConnectionPool(conninfo, open=False, min_size=1, max_size=5)
    await pool.open()
    oban = Oban(pool=pool, name=name, node=node, queues={queue: 5}, leadership=False)
    await oban.start()
    try:
        await asyncio.Event().wait()
    finally:
        await oban.stop()
        await pool.close()


def main(argv: list[str]) -> None:
    """Entry point when run with ``-m``."""
    conninfo, name, node, queue = argv
    # Run with ``-m``, this module is ``__main__``; the job rows name
    # ``oban_support.crash_before_ack``. Make that name this module and register its
    # delivery under it, as a host module would (ADR 13).
    sys.modules.setdefault("oban_support.crash_before_ack", sys.modules[__name__])
    register_plugin(CrashAfterDelivery, path="oban_support.crash_before_ack:CrashAfterDelivery")
    asyncio.run(serve(conninfo, name, node, queue))


if __name__ == "__main__":
    main(sys.argv[1:])
