"""``Clock``: time moves for the jobs of some queues, by moving their due times earlier.

The one owner of ``store/sql/advance_test_clock.sql`` (ADR 26). ``DurableEnv`` moves it
one due time at a time and runs what falls due in between; on its own, a ``Clock`` moves
the due times of the queues a running ``Oban`` serves, and that Oban's own stager and
producers fire what fell due, as they would once the time had passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.chart.durations import span_ms

from ..store import _oban_compat, _sql, _statements


@dataclass(frozen=True, slots=True)
class Move:
    """One move of the clock: how far (microseconds), whether a job is due now, and the
    database's time (UTC, naive, as oban stores times)."""

    moved_us: int
    reached: bool
    db_now: datetime


class Clock:
    """The due times of ``queues``' scheduled and retryable jobs, moved by the test.

    Built from the ``Oban`` whose queues it moves (its pool and schema prefix). For tests
    and examples only: a production database never runs its statement.
    """

    def __init__(self, oban: Oban, queues: list[str]) -> None:
        self.pool: AsyncConnectionPool[Any] = _oban_compat.pool_of(oban)
        self.prefix = _statements.prefix_of(oban)
        self.queues = list(queues)
        self.moved_us = 0
        """How far the clock has moved so far, in microseconds."""

    async def advance(self, span: str | int | timedelta) -> int:
        """Move every due time of the queues earlier by ``span`` (``"7d"``, milliseconds,
        a ``timedelta``) at once; returns the milliseconds moved. What falls due is run by
        whoever runs the queues (a running ``Oban``): a timer that a fired job schedules
        counts from the database's time, so move again for it."""
        move = await self.move(span_ms(span) * 1000, to_next_due=False)
        return move.moved_us // 1000

    async def move(self, span_us: int, *, to_next_due: bool = True) -> Move:
        """Move by at most ``span_us``; with ``to_next_due``, only as far as the earliest
        job (so it is due now) when that is closer. A span of 0 moves nothing and reads
        the database's time."""
        statement = _sql.statement("advance_test_clock", self.prefix)
        params = {"queues": self.queues, "span_us": span_us, "to_next_due": to_next_due}
        async with _statements.autocommit(self.pool) as conn:
            row = await (await conn.execute(statement, params)).fetchone()
        assert row is not None  # noqa: S101 - the statement returns exactly one row
        move = Move(int(row[0]), bool(row[1]), row[2])
        self.moved_us += move.moved_us
        return move
