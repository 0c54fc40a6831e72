"""A worker process that traces: what ``statifier-oban worker --otel`` runs, exporting each
span to a file the test reads (``oban_support.tracing.FileExporter``).

Run as a module, with the tests' import path (``oban_support.processes.WorkerProcesses``
passes ``PYTHONPATH``) and ``STATIFIER_TEST_SPANS`` naming the file::

    python -m oban_support.otel_worker <conninfo> <oban name> <node> <timers queue>

It runs an ``Executions`` on its pool with an ``ObanExecutor`` (installed with ``use``) and
a server-mode Oban on the timers queue, instrumented on a tracer provider of service
``worker`` whose spans are written as they end, until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban import executions as execution_jobs
from statifier_oban import otel
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions

from oban_support.tracing import SPANS_FILE_ENV, FileExporter, providers

QUEUE_LIMIT = 4


async def serve(conninfo: str, name: str, node: str, queue: str) -> None:
    """Run the traced worker until the process is killed."""
    otel.instrument(providers("worker", FileExporter(os.environ[SPANS_FILE_ENV])))
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, open=False, min_size=2, max_size=QUEUE_LIMIT + 4
    )
    await pool.open()
    oban = Oban(
        pool=pool,
        name=name,
        node=node,
        queues={queue: QUEUE_LIMIT},
        stager={"interval": 0.1},
        shutdown_grace_period=1.0,
    )
    execution_jobs.use(
        Executions(pool, executor=ObanExecutor(execution_config(oban, timers_queue=queue)))
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
    asyncio.run(serve(conninfo, name, node, queue))


if __name__ == "__main__":
    main(sys.argv[1:])
