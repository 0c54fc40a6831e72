"""The oban workers that run durable jobs. Their import paths are stored on every row.

Public because it is durable: a process that runs the queues imports it (importing
registers the workers with oban), and ``TIMER_WORKER``, ``INVOKE_WORKER`` and
``CHILD_START_WORKER`` are the ``oban_jobs.worker`` values of the rows, for a host's or an
operator's own queries. Rows name each worker by this module's path, so the path stays
whatever module the code lives in: ``TimerWorker`` is ``statifier_oban.timers``'s, the
other two ``statifier_oban.invocations``'s (see their docstrings for the outcomes).
"""

from __future__ import annotations

from ._names import CHILD_START_WORKER, INVOKE_WORKER, TIMER_WORKER
from .invocations._worker import ChildStartWorker, InvokeWorker
from .timers._worker import TimerWorker

__all__ = [
    "CHILD_START_WORKER",
    "INVOKE_WORKER",
    "TIMER_WORKER",
    "ChildStartWorker",
    "InvokeWorker",
    "TimerWorker",
]
