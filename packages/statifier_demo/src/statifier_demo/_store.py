"""Read-only views of what the demo left in PostgreSQL: timer jobs, deliveries, keys.

The executions themselves are read through ``statifier_persistence.Executions``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, LiteralString

from psycopg_pool import AsyncConnectionPool
from statifier_oban.workers import TIMER_WORKER

SELECT_TIMER_JOBS: Final[LiteralString] = """
SELECT id, args->>'scope', queue, state::text, attempt, coalesce((meta->>'rescued')::int, 0),
       attempted_by, scheduled_at, completed_at, cancelled_at
FROM oban_jobs
WHERE worker = %s AND args->>'scope' = ANY(%s)
ORDER BY id
"""

SELECT_DELIVERIES: Final[LiteralString] = """
SELECT job_id, execution_id, outcome, pid, at FROM demo_deliveries
WHERE execution_id = ANY(%s) ORDER BY id
"""

SELECT_KEYS: Final[LiteralString] = """
SELECT execution_id, key FROM statifier_step_keys WHERE execution_id = ANY(%s)
"""


@dataclass(frozen=True, slots=True)
class TimerRow:
    """The parts of a timer's ``oban_jobs`` row the demo shows and checks."""

    id: int
    scope: str
    queue: str
    state: str
    attempt: int
    rescued: int
    attempted_by: tuple[str, ...]
    scheduled_at: datetime
    completed_at: datetime | None
    cancelled_at: datetime | None


@dataclass(frozen=True, slots=True)
class Delivery:
    """One ``demo_deliveries`` row: a delivery whose step committed."""

    job_id: int | None
    execution_id: str
    outcome: str
    pid: int
    at: datetime


@dataclass(frozen=True, slots=True)
class Stored:
    """Everything the demo reads back, for the tables and the checks."""

    jobs: tuple[TimerRow, ...]
    deliveries: tuple[Delivery, ...]
    keys: tuple[tuple[str, str], ...]

    def jobs_of(self, scope: str) -> list[TimerRow]:
        """The timer job rows of ``scope``."""
        return [job for job in self.jobs if job.scope == scope]

    def deliveries_of(self, job_id: int) -> list[Delivery]:
        """The committed deliveries of job ``job_id``."""
        return [d for d in self.deliveries if d.job_id == job_id]

    def keys_of(self, job_id: int) -> list[tuple[str, str]]:
        """The step keys applied for job ``job_id``."""
        return [k for k in self.keys if k[1] == f"job:{job_id}"]


async def read_stored(pool: AsyncConnectionPool[Any], scopes: Sequence[str]) -> Stored:
    """The demo's jobs, deliveries and applied keys."""
    wanted = list(scopes)
    async with pool.connection() as conn:
        jobs = await (await conn.execute(SELECT_TIMER_JOBS, [TIMER_WORKER, wanted])).fetchall()
        deliveries = await (await conn.execute(SELECT_DELIVERIES, [wanted])).fetchall()
        keys = await (await conn.execute(SELECT_KEYS, [wanted])).fetchall()
    return Stored(
        jobs=tuple(_timer_row(row) for row in jobs),
        deliveries=tuple(Delivery(*row) for row in deliveries),
        keys=tuple((row[0], row[1]) for row in keys),
    )


def _timer_row(row: Sequence[Any]) -> TimerRow:
    return TimerRow(
        id=row[0],
        scope=row[1],
        queue=row[2],
        state=row[3],
        attempt=row[4],
        rescued=row[5],
        attempted_by=tuple(row[6] or ()),
        scheduled_at=row[7],
        completed_at=row[8],
        cancelled_at=row[9],
    )
