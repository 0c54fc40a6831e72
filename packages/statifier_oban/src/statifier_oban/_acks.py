"""Batched acks: a producer's outcomes written in one autocommit statement.

oban 0.7.0 collects what its executor decided for each finished job and writes the batch
when its producer next wakes, with one ``UPDATE`` per job inside a transaction: two round
trips plus one per job. :func:`write` writes the same batch with one statement
(``sql/ack_jobs.sql``): one round trip, whatever the batch size. The batch, its guard
(only a row still ``executing`` as the attempt that was fetched) and the values written are
oban's; only the number of statements changes (ADR 18).

A failed write raises: oban keeps the batch and writes it at the producer's next wake-up,
and a process that dies first leaves the jobs ``executing`` for oban's lifeline to rescue
(a delivery then runs twice; deliveries are idempotent).
"""

from __future__ import annotations

from psycopg.types.json import Jsonb

from . import _sql, _store
from ._oban_compat import AckColumns


async def write(batch: AckColumns) -> list[int]:
    """Apply ``batch``; return the ids of the rows it changed."""
    statement = _sql.statement("ack_jobs", batch.prefix)
    acks = [
        {
            "id": job_id,
            # ISO 8601 with microseconds: read back as exactly the stored timestamp.
            "attempted_at": None if attempted is None else attempted.isoformat(),
            "state": state,
            "attempt_change": change,
            "schedule_in": schedule_in,
            "error": error,
            "meta": meta,
        }
        for job_id, attempted, state, change, schedule_in, error, meta in zip(
            batch.ids,
            batch.attempted_at,
            batch.states,
            batch.attempt_changes,
            batch.schedule_in,
            batch.errors,
            batch.metas,
            strict=True,
        )
    ]
    async with _store.autocommit(batch.pool) as conn:
        cursor = await conn.execute(statement, {"acks": Jsonb(acks)})
        return [row[0] for row in await cursor.fetchall()]
