"""A worker process for the multi-process executions test, and the delivery it runs.

Run as a module, with the workspace's interpreter and the tests' import path
(``oban_support.processes.WorkerProcesses`` passes ``PYTHONPATH``)::

    python -m oban_support.executions_worker <conninfo> <oban name> <node> <timers queue>

It runs what ``statifier-oban worker`` runs for durable executions (an ``Executions`` on
its pool with an ``ObanExecutor``, installed with ``use``; a server-mode Oban on the
timers queue), with oban's lifeline rescuing jobs left ``executing`` for 2 s, until it is
killed. Its timer delivery, ``RecordingDelivery``, is ``ExecutionDelivery`` plus one row
in ``exec_raw`` per delivery, written in the step's own transaction: so a row exists
exactly for every delivery whose step committed (applied, or found already applied),
and redeliveries (at-least-once) show beside the applied steps (exactly-once).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

from oban import Oban, current_job
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import SendDelayed
from statifier_oban import executions as execution_jobs
from statifier_oban.executions import ExecutionDelivery, ObanExecutor, execution_config
from statifier_persistence import AlreadyApplied, Executions, StepResult

DELIVERY_PATH = "oban_support.executions_worker:RecordingDelivery"
"""The delivery named on the timer jobs of this test."""

QUEUE_LIMIT = 10
RESCUE_AFTER_S = 2

CREATE_TABLES = """
CREATE TABLE IF NOT EXISTS exec_raw (
    id bigserial PRIMARY KEY,
    job_id bigint,
    execution_id text NOT NULL,
    outcome text NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""


class RecordingDelivery(ExecutionDelivery):
    """``ExecutionDelivery`` recording each committed delivery in ``exec_raw``."""

    async def fire(
        self,
        executions: Executions,
        execution_id: str,
        delayed: SendDelayed,
        key: str | None,
    ) -> StepResult:
        """The fired step and its ``exec_raw`` row, in one transaction."""
        pool = executions.pool
        assert pool is not None
        job = current_job()
        async with pool.connection() as conn, conn.transaction():
            result = await executions.fire(execution_id, delayed, key=key, conn=conn)
            outcome = "already_applied" if isinstance(result, AlreadyApplied) else "applied"
            await conn.execute(
                "INSERT INTO exec_raw (job_id, execution_id, outcome, pid) VALUES (%s, %s, %s, %s)",
                [job.id if job is not None else None, execution_id, outcome, os.getpid()],
            )
        return result


def recording(pool: AsyncConnectionPool[Any], oban: Oban, queue: str) -> Executions:
    """The ``Executions`` this worker runs: its timers delivered by ``RecordingDelivery``."""
    # By module name, not by class: run with ``-m``, this class's module is ``__main__``.
    config = execution_config(oban, timers_queue=queue, delivery=DELIVERY_PATH)
    return Executions(pool, executor=ObanExecutor(config))


async def serve(
    conninfo: str,
    name: str,
    node: str,
    queue: str,
    build: Callable[[AsyncConnectionPool[Any], Oban, str], Executions] = recording,
) -> None:
    """Run the worker until the process is killed: ``build(pool, oban, queue)`` is the
    ``Executions`` it installs (the other worker modules of executions reuse this)."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        conninfo, open=False, min_size=2, max_size=QUEUE_LIMIT + 6
    )
    await pool.open()
    oban = Oban(
        pool=pool,
        name=name,
        node=node,
        queues={queue: QUEUE_LIMIT},
        stager={"interval": 0.1},
        lifeline={"interval": 0.5, "rescue_after": RESCUE_AFTER_S},
        shutdown_grace_period=1.0,
    )
    execution_jobs.use(build(pool, oban, queue))
    await oban.start()
    try:
        await asyncio.Event().wait()
    finally:
        await oban.stop()
        await pool.close()


def main(argv: list[str]) -> None:
    """Entry point when run as ``python -m``."""
    conninfo, name, node, queue = argv
    # Run with ``-m``, this module is ``__main__``; the job rows name it by its module name.
    sys.modules.setdefault("oban_support.executions_worker", sys.modules[__name__])
    asyncio.run(serve(conninfo, name, node, queue))


if __name__ == "__main__":
    main(sys.argv[1:])
