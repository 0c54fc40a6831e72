"""A worker process that traces: what ``statifier-oban worker --otel`` runs, exporting each
span to a file the test reads (``oban_support.tracing.FileExporter``).

Run as a module, with the tests' import path (``oban_support.processes.WorkerProcesses``
passes ``PYTHONPATH``) and ``STATIFIER_TEST_SPANS`` naming the file::

    python -m oban_support.otel_worker <conninfo> <oban name> <node> <timers queue>

It is ``oban_support.executions_worker`` (an ``Executions`` with an ``ObanExecutor``, a
server-mode Oban on the timers queue) with the library's own ``ExecutionDelivery``,
instrumented on a tracer provider of service ``worker`` whose spans are written as they
end, until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys

from statifier_oban import otel
from statifier_oban.executions import ExecutionDelivery
from statifier_oban.rows._resolve import path_of

from oban_support.executions_worker import serve
from oban_support.tracing import SPANS_FILE_ENV, FileExporter, providers


def main(argv: list[str]) -> None:
    """Entry point when run as ``python -m``."""
    conninfo, name, node, queue = argv
    otel.instrument(providers("worker", FileExporter(os.environ[SPANS_FILE_ENV])))
    asyncio.run(serve(conninfo, name, node, queue, delivery=path_of(ExecutionDelivery)))


if __name__ == "__main__":
    main(sys.argv[1:])
