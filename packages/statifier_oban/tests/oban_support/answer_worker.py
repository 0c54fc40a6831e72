"""A worker process for the test of a worker killed between a child's ``done`` and its
parent's step, and the ``Executions`` it runs.

Run as a module, with the workspace's interpreter and the tests' import path
(``oban_support.processes.WorkerProcesses`` passes ``PYTHONPATH``)::

    python -m oban_support.answer_worker <conninfo> <oban name> <node> <queue>

It runs ``oban_support.executions_worker.serve`` (what ``statifier-oban worker`` runs for
durable executions, lifeline rescuing jobs left ``executing`` for 2 s) until it is killed.
Its ``Executions`` is ``Recording``: every message it applies into an execution writes a
row in ``answer_raw`` in the step's own transaction (so a row exists exactly for each
delivery whose step committed), and in a worker whose label is ``a`` a delivery into an
execution named in ``answer_plan`` stops for good where the plan says, once it has said so
in ``answer_marks``: ``before`` (the child's ``done`` waits in the mailbox, the parent's
step has not begun) or ``after`` (the parent's step committed, oban has not heard of it).
The test then kills the process.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

from oban import Oban, current_job
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import AlreadyApplied, Executions, StepResult

from oban_support.executions_worker import serve

CREATE_TABLES = """
CREATE TABLE IF NOT EXISTS answer_plan (
    execution_id text PRIMARY KEY,
    mode text NOT NULL CHECK (mode IN ('before', 'after'))
);
CREATE TABLE IF NOT EXISTS answer_marks (
    execution_id text NOT NULL,
    mode text NOT NULL,
    job_id bigint,
    pid integer NOT NULL
);
CREATE TABLE IF NOT EXISTS answer_raw (
    id bigserial PRIMARY KEY,
    job_id bigint,
    execution_id text NOT NULL,
    outcome text NOT NULL,
    pid integer NOT NULL
);
"""


class Recording(Executions):
    """``Executions`` whose ``receive`` records each committed delivery and, in worker
    ``a``, stops where ``answer_plan`` says (see the module docstring)."""

    stopping = False
    """Whether this process stops deliveries (its label is ``a``)."""

    async def receive(
        self,
        execution_id: str,
        *,
        key: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> StepResult:
        """Receive (recorded), stopping before or after as planned."""
        pool = self.pool
        assert pool is not None
        mode = await self._planned(pool, execution_id) if Recording.stopping else None
        if mode == "before":
            await self._stop_here(pool, execution_id, mode)
        job = current_job()
        async with pool.connection() as db, db.transaction():
            result = await super().receive(execution_id, key=key, conn=db)
            outcome = "already_applied" if isinstance(result, AlreadyApplied) else "applied"
            await db.execute(
                "INSERT INTO answer_raw (job_id, execution_id, outcome, pid)"
                " VALUES (%s, %s, %s, %s)",
                [job.id if job is not None else None, execution_id, outcome, os.getpid()],
            )
        if mode == "after":
            await self._stop_here(pool, execution_id, mode)
        return result

    async def _planned(self, pool: AsyncConnectionPool[Any], execution_id: str) -> str | None:
        async with pool.connection() as db:
            cursor = await db.execute(
                "SELECT mode FROM answer_plan WHERE execution_id = %s", [execution_id]
            )
            row = await cursor.fetchone()
        return None if row is None else str(row[0])

    async def _stop_here(
        self, pool: AsyncConnectionPool[Any], execution_id: str, mode: str
    ) -> None:
        job = current_job()
        async with pool.connection() as db:
            await db.execute(
                "INSERT INTO answer_marks (execution_id, mode, job_id, pid)"
                " VALUES (%s, %s, %s, %s)",
                [execution_id, mode, job.id if job is not None else None, os.getpid()],
            )
        await asyncio.Event().wait()  # until the test kills this process


def stopping(name: str) -> Callable[[AsyncConnectionPool[Any], Oban, str], Executions]:
    """The builder of this worker's ``Recording`` (which stops in worker ``a``)."""
    Recording.stopping = name.startswith("proc_a_")

    def build(pool: AsyncConnectionPool[Any], oban: Oban, queue: str) -> Executions:
        return Recording(pool, executor=ObanExecutor(execution_config(oban, timers_queue=queue)))

    return build


def main(argv: list[str]) -> None:
    """Entry point when run as ``python -m``."""
    conninfo, name, node, queue = argv
    asyncio.run(serve(conninfo, name, node, queue, stopping(name)))


if __name__ == "__main__":
    main(sys.argv[1:])
