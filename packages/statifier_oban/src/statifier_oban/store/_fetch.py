"""A producer's fetch in one autocommit statement (``sql/fetch_jobs.sql``).

oban 0.7.0 fetches inside a transaction (three round trips). The statement is the same
take-and-mark as oban's; it also tells whether the queue ran dry (fewer available jobs than
the demand), which lets ``_oban_compat`` skip the producer's next fetch until new jobs are
announced: after a sparse timer completes, its producer acks and does not look again for
jobs nobody has staged (ADR 18).
"""

from __future__ import annotations

from typing import Any

from oban.job import Job
from psycopg.rows import dict_row

from . import _sql, _statements
from ._oban_compat import Fetched, FetchRequest


async def fetch(request: FetchRequest) -> Fetched:
    """Take up to ``request.demand`` available jobs of the queue, marked executing."""
    statement = _sql.statement("fetch_jobs", request.prefix)
    params = {
        "queue": request.queue,
        "demand": request.demand,
        "attempted_by": [request.node, request.uuid],
    }
    async with _statements.autocommit(request.pool) as conn:
        cursor = conn.cursor(row_factory=dict_row)
        _statements.read_jsonb_fast(cursor)
        await cursor.execute(statement, params)
        rows: list[dict[str, Any]] = await cursor.fetchall()
    available = int(rows[0].pop("available")) if rows else 0
    jobs = []
    for row in rows:
        row.pop("available", None)
        if row["id"] is not None:
            jobs.append(Job(**row))
    return Fetched(jobs=jobs, exhausted=available < request.demand)
