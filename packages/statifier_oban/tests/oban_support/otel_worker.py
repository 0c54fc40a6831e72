"""A worker process that traces: what ``statifier-oban worker --otel`` runs, exporting each
span to a file the test reads (``tests.spans.FileExporter``).

Run as a module, with the tests' import path (``oban_support.processes.WorkerProcesses``
passes ``PYTHONPATH``) and ``STATIFIER_TEST_SPANS`` naming the file::

    python -m oban_support.otel_worker <conninfo> <oban name> <node> <timers queue>

It is ``oban_support.executions_worker`` (a server-mode Oban on the timers queue, an
``Executions`` installed with ``use``) whose ``Executions`` delivers with the library's
own ``ExecutionDelivery``, instrumented on a tracer provider of service ``worker`` whose
spans are written as they end, until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban import otel
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions

from oban_support.executions_worker import serve
from tests.spans import SPANS_FILE_ENV, FileExporter, providers


def plain(pool: AsyncConnectionPool[Any], oban: Oban, queue: str) -> Executions:
    """The ``Executions`` this worker runs: the default deliveries of executions."""
    return Executions(pool, executor=ObanExecutor(execution_config(oban, timers_queue=queue)))


def main(argv: list[str]) -> None:
    """Entry point when run as ``python -m``."""
    conninfo, name, node, queue = argv
    otel.instrument(providers("worker", FileExporter(os.environ[SPANS_FILE_ENV])))
    asyncio.run(serve(conninfo, name, node, queue, build=plain))


if __name__ == "__main__":
    main(sys.argv[1:])
