"""The demo's timer delivery, run inside the ``statifier-oban worker`` processes.

``DemoDelivery`` is ``statifier_oban.executions.ExecutionDelivery`` (the fired timer is
stepped into its execution with the job's id as the step key) plus two things a demo
needs:

* every delivery is recorded in ``demo_deliveries`` *in the step's own transaction*, so a
  row exists exactly for each delivery whose step committed: applied, or found already
  applied. That is how the demo shows a timer delivered twice but applied once;
* on the ``midflight`` queue, a delivery that applied its step then stalls before oban
  can acknowledge the job, so that the demo can kill the worker at the worst moment: the
  chart has changed, the job is still ``executing``.

Each delivery is logged (``statifier_demo.delivery``, INFO), and the worker's log shows
it: that is the demo's view into the worker processes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Final, LiteralString

from oban import current_job
from statifier.core.events import Event
from statifier_oban.executions import ExecutionDelivery
from statifier_persistence import (
    AlreadyApplied,
    Declined,
    Discarded,
    EventBuilder,
    Executions,
    Stepped,
    StepResult,
)

MIDFLIGHT_QUEUE: Final = "midflight"
"""The queue whose deliveries stall once applied (only the worker to be killed runs it)."""

STALL_S: Final = 60.0
"""How long a mid-flight delivery stalls at most (the demo kills its worker long before)."""

CREATE_DELIVERIES: Final[LiteralString] = """
CREATE TABLE IF NOT EXISTS demo_deliveries (
    id bigserial PRIMARY KEY,
    job_id bigint,
    execution_id text NOT NULL,
    outcome text NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""
"""One row per delivery whose step transaction committed (idempotent DDL)."""

RECORD_DELIVERY: Final[LiteralString] = """
INSERT INTO demo_deliveries (job_id, execution_id, outcome, pid) VALUES (%s, %s, %s, %s)
"""

logger = logging.getLogger("statifier_demo.delivery")


def outcome_of(result: StepResult) -> str:
    """``applied``, ``already applied``, ``discarded`` or ``declined``."""
    match result:
        case Stepped():
            return "applied"
        case AlreadyApplied():
            return "already applied"
        case Discarded():
            return "discarded"
        case Declined():
            return "declined"


class DemoDelivery(ExecutionDelivery):
    """``ExecutionDelivery``, recording each delivery; stalling mid-flight on its queue."""

    async def step(
        self,
        executions: Executions,
        execution_id: str,
        event: Event | EventBuilder,
        key: str | None,
    ) -> StepResult:
        """The step and its ``demo_deliveries`` row in one transaction; then the log line."""
        pool = executions.pool
        if pool is None:
            raise RuntimeError("the worker's Executions has no pool")
        job = current_job()
        job_id = job.id if job is not None else None
        async with pool.connection() as conn, conn.transaction():
            result = await executions.step(execution_id, event, key=key, conn=conn)
            outcome = outcome_of(result)
            await conn.execute(RECORD_DELIVERY, [job_id, execution_id, outcome, os.getpid()])
        attempt = job.attempt if job is not None else "?"
        where = f"job {job_id} (attempt {attempt}) into {execution_id}"
        if isinstance(result, Stepped):
            ended = result.execution.outcome or {}
            states = " ".join(ended.get("configuration", ())) or "-"
            logger.info("%s: applied, %s ended in %s", where, execution_id, states)
        else:
            logger.info("%s: %s, nothing driven", where, outcome)
        if isinstance(result, Stepped) and job is not None and job.queue == MIDFLIGHT_QUEUE:
            logger.info("%s: committed; stalling before oban acknowledges the job", where)
            await asyncio.sleep(STALL_S)
        return result
