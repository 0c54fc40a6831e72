"""A producer's fetch in one autocommit statement (``sql/fetch_jobs.sql``).

oban 0.7.0 fetches inside a transaction (three round trips). The statement is the same
take-and-mark as oban's; it also tells whether the queue ran dry (fewer available jobs than
the demand), which lets ``_oban_compat`` skip the producer's next fetch until new jobs are
announced: after a sparse timer completes, its producer acks and does not look again for
jobs nobody has staged (ADR 18).

The statement has marked every row it returns ``executing`` by the time a row is read, so
one row must never keep the others from their producer: each row's JSON is read on its
own, and a row whose JSON cannot be read is cancelled (``sql/cancel_unreadable_job.sql``)
while the rest run.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import psycopg
from oban.job import Job
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from statifier.values import clip, read_json

from . import _sql, _statements
from ._oban_compat import Fetched, FetchRequest

logger = logging.getLogger("statifier_oban.fetch")

JSON_COLUMNS: Final = ("args", "meta", "errors")
"""The jsonb columns of a fetched row, read row by row."""

REASON_LENGTH: Final = 200
"""The most characters of a decoder's message kept in an unreadable row's reason."""


async def fetch(request: FetchRequest) -> Fetched:
    """Take up to ``request.demand`` available jobs of the queue, marked executing.

    A taken row whose JSON cannot be read is cancelled and logged, not returned; a failure
    to cancel it is logged too, and leaves it executing for a rescue to return."""
    statement = _sql.statement("fetch_jobs", request.prefix)
    attempted_by = [request.node, request.uuid]
    params = {"queue": request.queue, "demand": request.demand, "attempted_by": attempted_by}
    async with _statements.autocommit(request.pool) as conn:
        cursor = conn.cursor(row_factory=dict_row)
        _statements.read_json_as_text(cursor)
        await cursor.execute(statement, params)
        rows: list[dict[str, Any]] = await cursor.fetchall()
        available = int(rows[0].pop("available")) if rows else 0
        jobs = []
        for row in rows:
            row.pop("available", None)
            if row["id"] is None:
                continue  # the one row of a fetch that took nothing
            reason = _read_json_columns(row)
            if reason is None:
                jobs.append(Job(**row))
            else:
                await _cancel_unreadable(conn, request, int(row["id"]), reason)
    return Fetched(jobs=jobs, exhausted=available < request.demand)


def _read_json_columns(row: dict[str, Any]) -> str | None:
    """Decode ``row``'s json columns in place; None, or why one cannot be read."""
    for column in JSON_COLUMNS:
        text = row[column]
        try:
            row[column] = read_json(text)
        except RecursionError:
            return f"its {column} column holds JSON nested too deeply to read"
        except ValueError as exc:  # an integer of too many digits, or not JSON at all
            return f"its {column} column cannot be read as JSON: {clip(str(exc), REASON_LENGTH)}"
    return None


async def _cancel_unreadable(
    conn: AsyncConnection[Any], request: FetchRequest, job_id: int, reason: str
) -> None:
    statement = _sql.statement("cancel_unreadable_job", request.prefix)
    params = {"id": job_id, "reason": reason, "attempted_by": [request.node, request.uuid]}
    try:
        await conn.execute(statement, params)
    except psycopg.Error:
        logger.exception(
            "job %s of queue %s cannot be read (%s) and could not be cancelled: it stays"
            " executing until a rescue returns it",
            job_id,
            request.queue,
            reason,
        )
        return
    logger.warning("job %s of queue %s cancelled: %s", job_id, request.queue, reason)
