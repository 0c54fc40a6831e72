"""What ``statifier-oban worker`` adds to oban for crashes and stops (docs/operations.md).

oban 0.7.0 rescues an ``executing`` job only by its age (Lifeline's ``rescue_after``, 300 s
by default, run by the leader, whose lease lasts 30 s), so a killed worker's timers
come back minutes late, and a graceful stop leaves the jobs it cut short ``executing``
for that same rescue. Two statements of ours close both gaps:

* :func:`rescue_orphans` moves back the jobs of workers that are gone (their producer row
  deleted, or not refreshed for a while), run by every worker node, no leader needed;
* :func:`return_jobs` puts back, at once and without spending an attempt, the jobs a
  stopping worker cut short at the end of its grace period.

Both are idempotent and safe to run from several nodes at once (each row is updated
under its row lock, and re-checked against the statement's conditions).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from psycopg_pool import AsyncConnectionPool

from . import _sql


async def rescue_orphans(
    pool: AsyncConnectionPool[Any], prefix: str, *, name: str, after_s: float
) -> list[int]:
    """Rescue executing jobs whose producer is gone (``sql/rescue_orphans.sql``).

    ``name`` is the oban instance name whose producers refresh often enough to be judged
    by their heartbeat; ``after_s`` how long a heartbeat may be missing. Returns the ids.
    """
    async with pool.connection() as conn:
        cursor = await conn.execute(
            _sql.statement("rescue_orphans", prefix), {"name": name, "after_s": after_s}
        )
        return [int(row[0]) for row in await cursor.fetchall()]


async def return_jobs(
    pool: AsyncConnectionPool[Any], prefix: str, *, node: str, ids: Iterable[int]
) -> list[int]:
    """Put back the jobs ``ids`` that ``node`` left executing (``sql/return_jobs.sql``)."""
    wanted = sorted({int(job_id) for job_id in ids})
    if not wanted:
        return []
    async with pool.connection() as conn:
        cursor = await conn.execute(
            _sql.statement("return_jobs", prefix), {"ids": wanted, "node": node}
        )
        return [int(row[0]) for row in await cursor.fetchall()]


async def queue_depth(
    pool: AsyncConnectionPool[Any], prefix: str, *, limit: int
) -> list[tuple[str, str, int]]:
    """``(queue, state, jobs)`` of the jobs not finished yet, at most ``limit`` rows
    (``sql/queue_depth.sql``)."""
    async with pool.connection() as conn:
        cursor = await conn.execute(_sql.statement("queue_depth", prefix), {"limit": limit})
        return [(str(row[0]), str(row[1]), int(row[2])) for row in await cursor.fetchall()]
