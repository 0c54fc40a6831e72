"""Batched acks: a producer's outcomes written in one autocommit statement.

oban 0.7.0 collects what its executor decided for each finished job and writes the batch
when its producer next wakes, with one ``UPDATE`` per job inside a transaction: two round
trips plus one per job. :func:`write` writes the same batch with one statement
(``sql/ack_jobs.sql``): one round trip, whatever the batch size. The batch, its guard
(only a row still ``executing`` as the attempt that was fetched) and the values written are
oban's; only the number of statements changes (ADR 18).

A failed write raises: oban keeps the batch and writes it at the producer's next wake-up,
and a process that dies first leaves the jobs ``executing`` for oban's lifeline to rescue
(a delivery then runs twice; deliveries are idempotent). So a batch must never be one
PostgreSQL refuses: an error's text (a traceback, whose message a handler may have made
of event data) is made storable first, see :func:`storable`.
"""

from __future__ import annotations

from typing import Any, Final

from psycopg.types.numeric import Int8

from . import _sql, _statements
from ._oban_compat import AckColumns


async def write(batch: AckColumns) -> list[int]:
    """Apply ``batch``; return the ids of the rows it changed."""
    # A batch of one (most, when jobs come one at a time) names its row by its id: a
    # statement PostgreSQL plans once (``acked_id.sql``).
    only = batch.ids[0] if len(batch.ids) == 1 else None
    statement = _sql.statement("ack_jobs", batch.prefix, acked="ids" if only is None else "id")
    acks = [
        {
            "id": job_id,
            # ISO 8601 with microseconds: read back as exactly the stored timestamp.
            "attempted_at": None if attempted is None else attempted.isoformat(),
            "state": state,
            "attempt_change": change,
            "schedule_in": schedule_in,
            "error": storable(error),
            "meta": storable(meta),
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
    async with _statements.autocommit(batch.pool) as conn:
        # orjson, not the standard encoder: a NaN (a recorded result's) becomes null where
        # ``NaN`` would make PostgreSQL refuse this batch and every later one.
        rows: dict[str, Any] = {"id": Int8(only)} if only is not None else {"ids": batch.ids}
        params = {"acks": _statements.plain_jsonb(acks), **rows}
        cursor = await conn.execute(statement, params)
        return [row[0] for row in await cursor.fetchall()]


MAX_TEXT_CHARS: Final = 32 * 1024
"""The longest string an ack writes (an error's traceback): its start and end are kept."""


def storable(value: Any) -> Any:
    """``value`` with every string one jsonb holds, and of at most ``MAX_TEXT_CHARS``.

    A NUL character or a lone surrogate would make PostgreSQL refuse the whole batch, and
    every later one of the producer with it (the batch is kept and written again): both
    are written escaped (``\\x00``, ``\\ud800``). A longer string keeps its start and its
    end (where a traceback's message is) and says how much was cut.
    """
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            half = MAX_TEXT_CHARS // 2
            cut = len(value) - 2 * half
            value = f"{value[:half]}\n... {cut} characters cut ...\n{value[-half:]}"
        if "\x00" in value:
            value = value.replace("\x00", "\\x00")
        if not value.isascii():
            value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value
