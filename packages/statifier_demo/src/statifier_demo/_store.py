"""The demo's own table of session positions, and read-only views of the timer job rows.

``demo_positions`` holds the latest position of each demo session, written after every
step (``Session.start(..., on_step=...)``). It is the host's table, not this package's:
statifier_oban stores no chart state. The position is the opaque blob of
``statifier.core.position.dumps``; ``status`` and ``configuration`` are copied beside it so
the outcome can be read without the chart (a finished session's position has an empty
configuration: SCXML exits every state at the end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core.position import dumps
from statifier.runtime.session import Session
from statifier_oban.workers import TIMER_WORKER

CREATE_POSITIONS: LiteralString = """
CREATE TABLE IF NOT EXISTS demo_positions (
    session_id text PRIMARY KEY,
    chart_identity text NOT NULL,
    position bytea NOT NULL,
    status text NOT NULL,
    configuration text[] NOT NULL,
    macrostep integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""
"""The positions table (idempotent)."""

UPSERT_POSITION: LiteralString = """
INSERT INTO demo_positions
    (session_id, chart_identity, position, status, configuration, macrostep, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, clock_timestamp())
ON CONFLICT (session_id) DO UPDATE SET
    chart_identity = excluded.chart_identity, position = excluded.position,
    status = excluded.status, configuration = excluded.configuration,
    macrostep = excluded.macrostep, updated_at = excluded.updated_at
"""

SELECT_POSITIONS: LiteralString = """
SELECT session_id, chart_identity, position, status, configuration, macrostep, updated_at
FROM demo_positions WHERE session_id = ANY(%s) ORDER BY session_id
"""

SELECT_TIMER_JOBS: LiteralString = """
SELECT id, args->>'scope', args->>'send_id', state::text, attempt, max_attempts, attempted_by,
       inserted_at, scheduled_at, attempted_at, completed_at, cancelled_at, discarded_at,
       timezone('UTC', now()), errors
FROM oban_jobs
WHERE worker = %s AND args->>'scope' = ANY(%s)
ORDER BY id
"""

FINISHED_STATES = frozenset({"completed", "cancelled", "discarded"})
"""Job states a timer job does not leave again."""


@dataclass(frozen=True, slots=True)
class StoredPosition:
    """One ``demo_positions`` row."""

    session_id: str
    chart_identity: str
    position: bytes
    status: str
    configuration: tuple[str, ...]
    macrostep: int
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StoredPosition:
        """Build from a ``SELECT_POSITIONS`` row."""
        return cls(
            session_id=row[0],
            chart_identity=row[1],
            position=bytes(row[2]),
            status=row[3],
            configuration=tuple(row[4]),
            macrostep=row[5],
            updated_at=row[6],
        )


@dataclass(frozen=True, slots=True)
class TimerRow:
    """The parts of a timer's ``oban_jobs`` row the demo shows and checks."""

    id: int
    scope: str
    send_id: str
    state: str
    attempt: int
    max_attempts: int
    attempted_by: tuple[str, ...]
    inserted_at: datetime
    scheduled_at: datetime
    attempted_at: datetime | None
    completed_at: datetime | None
    cancelled_at: datetime | None
    discarded_at: datetime | None
    now: datetime
    errors: tuple[str, ...]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> TimerRow:
        """Build from a ``SELECT_TIMER_JOBS`` row."""
        return cls(
            id=row[0],
            scope=row[1],
            send_id=row[2],
            state=row[3],
            attempt=row[4],
            max_attempts=row[5],
            attempted_by=tuple(row[6]),
            inserted_at=row[7],
            scheduled_at=row[8],
            attempted_at=row[9],
            completed_at=row[10],
            cancelled_at=row[11],
            discarded_at=row[12],
            now=row[13],
            errors=tuple(str(e.get("error", e)) for e in row[14] or ()),
        )

    @property
    def node(self) -> str | None:
        """The oban node that attempted the job last (None if never attempted)."""
        return self.attempted_by[0] if self.attempted_by else None

    @property
    def due_in(self) -> float:
        """Seconds from the row's read until ``scheduled_at``, by the database clock."""
        return (self.scheduled_at - self.now).total_seconds()

    @property
    def finished_at(self) -> datetime | None:
        """When it completed, was cancelled or discarded (None while pending or running)."""
        return self.completed_at or self.cancelled_at or self.discarded_at

    @property
    def finished(self) -> bool:
        """Whether the row is in a state it does not leave again."""
        return self.state in FINISHED_STATES


async def create_positions_table(conn: AsyncConnection[Any]) -> None:
    """Create ``demo_positions`` if it does not exist."""
    await conn.execute(CREATE_POSITIONS)


async def save_position(pool: AsyncConnectionPool[Any], session: Session) -> int:
    """Store ``session``'s current position (upsert); return its size in bytes."""
    blob = dumps(session.snapshot())
    status = session.status()
    async with pool.connection() as conn:
        await conn.execute(
            UPSERT_POSITION,
            (
                session.session_id,
                session.machine.identity,
                blob,
                status.status,
                list(status.configuration),
                status.macrostep,
            ),
        )
    return len(blob)


async def load_positions(
    pool: AsyncConnectionPool[Any], session_ids: Sequence[str]
) -> dict[str, StoredPosition]:
    """The stored positions of ``session_ids`` that exist, by session id."""
    async with pool.connection() as conn:
        cursor = await conn.execute(SELECT_POSITIONS, (list(session_ids),))
        rows = await cursor.fetchall()
    return {row[0]: StoredPosition.from_row(row) for row in rows}


async def timer_rows(pool: AsyncConnectionPool[Any], scopes: Sequence[str]) -> list[TimerRow]:
    """Every timer job row of ``scopes``, by job id."""
    async with pool.connection() as conn:
        cursor = await conn.execute(SELECT_TIMER_JOBS, (TIMER_WORKER, list(scopes)))
        rows = await cursor.fetchall()
    return [TimerRow.from_row(row) for row in rows]
