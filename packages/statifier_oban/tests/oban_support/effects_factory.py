"""Shared helpers of the timer tests: effects, configs, job-row SQL and a telemetry recorder."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import oban.oban as oban_module
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool
from statifier.core.effects import Cancel, SendDelayed
from statifier_oban._config import Config
from statifier_oban._names import TIMER_WORKER

TIMERS_QUEUE = "timers"

ARGS_KEYS = frozenset(
    {
        "scope",
        "ordinal",
        "send_id",
        "event",
        "target",
        "type",
        "delay_ms",
        "c_index",
        "owner",
        "macrostep",
        "microstep",
        "round",
        "id_from_author",
        "data",
        "caller_context",
    }
)
"""The documented key set of a timer job's args (spec 3.1, ``timer_args``)."""

OTHER_WORKER = "statifier_oban.workers.SomethingElse"


def send_delayed(**overrides: Any) -> SendDelayed:
    """A schedulable ``SendDelayed`` (self target, ordinal 1); any field can be overridden."""
    values: dict[str, Any] = {
        "event": "reminder.due",
        "target": None,
        "type": None,
        "data": {"user": 7, "note": "hello"},
        "send_id": "reminder",
        "delay_ms": 60_000,
        "c_index": 3,
        "owner": ("onentry", 2, 0),
        "ordinal": 1,
        "id_from_author": True,
        "caller_context": None,
        "macrostep": 4,
        "microstep": 1,
        "round": 0,
    }
    values.update(overrides)
    return SendDelayed(**values)


def cancel_effect(**overrides: Any) -> Cancel:
    """A ``Cancel`` of send id ``reminder``; any field can be overridden."""
    values: dict[str, Any] = {
        "send_id": "reminder",
        "c_index": 5,
        "owner": ("onexit", 2, 0),
        "ordinal": 9,
        "caller_context": None,
        "macrostep": 6,
        "microstep": 0,
        "round": 1,
    }
    values.update(overrides)
    return Cancel(**values)


def with_ordinal(effect: SendDelayed, ordinal: int, **changes: Any) -> SendDelayed:
    """``effect`` with another ordinal (and any other field changes)."""
    return replace(effect, ordinal=ordinal, **changes)


def make_config(oban: Oban, **overrides: Any) -> Config:
    """A ``Config`` on ``oban`` with the ``timers`` queue."""
    options: dict[str, Any] = {"oban": oban, "timers_queue": TIMERS_QUEUE}
    options.update(overrides)
    return Config(**options)


def forget(instance: Oban) -> None:
    """Drop an ``Oban`` built by a test from oban's global name registry (private API)."""
    registry = getattr(oban_module, "_instances", None)
    name = getattr(instance, "_name", None)
    if isinstance(registry, dict) and registry.get(name) is instance:
        del registry[name]


@contextmanager
def unopened_oban() -> Iterator[Oban]:
    """A real client-mode ``Oban`` whose pool is never opened, for code paths that must
    refuse before touching the database (no database is created for it)."""
    instance = Oban(
        pool=AsyncConnectionPool("", open=False), name=f"unopened_{uuid.uuid4().hex[:16]}"
    )
    try:
        yield instance
    finally:
        forget(instance)


# --- job rows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRow:
    """The columns of one ``oban_jobs`` row that the timer tests look at."""

    id: int
    state: str
    queue: str
    worker: str
    args: dict[str, Any]
    meta: dict[str, Any]
    errors: list[Any]
    max_attempts: int
    inserted_at: datetime
    scheduled_at: datetime
    cancelled_at: datetime | None


SELECT_JOBS = """
SELECT id, state::text, queue, worker, args, meta, errors, max_attempts,
       inserted_at, scheduled_at, cancelled_at
FROM oban_jobs ORDER BY id
"""


async def all_jobs(pool: AsyncConnectionPool) -> list[JobRow]:
    """Every row of ``oban_jobs``, by id."""
    async with pool.connection() as conn:
        rows = await (await conn.execute(SELECT_JOBS)).fetchall()
    return [JobRow(*row) for row in rows]


async def job(pool: AsyncConnectionPool, job_id: int) -> JobRow:
    """The row with id ``job_id``."""
    rows = [row for row in await all_jobs(pool) if row.id == job_id]
    assert len(rows) == 1, f"no job {job_id}"
    return rows[0]


async def states(pool: AsyncConnectionPool) -> dict[int, str]:
    """``{job id: state}`` of every row."""
    return {row.id: row.state for row in await all_jobs(pool)}


async def set_state(pool: AsyncConnectionPool, job_id: int, state: str) -> None:
    """Move one row to ``state`` directly in SQL (as a runner or operator would)."""
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE oban_jobs SET state = %s::oban_job_state WHERE id = %s", [state, job_id]
        )


async def raw_args(pool: AsyncConnectionPool, job_id: int) -> Any:
    """The args of row ``job_id`` as stored (jsonb, parsed by psycopg)."""
    async with pool.connection() as conn:
        row = await (
            await conn.execute("SELECT args FROM oban_jobs WHERE id = %s", [job_id])
        ).fetchone()
    assert row is not None
    return row[0]


async def insert_raw(
    pool: AsyncConnectionPool,
    *,
    args: dict[str, Any],
    state: str = "scheduled",
    worker: str = TIMER_WORKER,
    queue: str = TIMERS_QUEUE,
) -> int:
    """Insert a row with exactly these args (bypassing ``schedule``); returns its id."""
    async with pool.connection() as conn:
        row = await (
            await conn.execute(
                "INSERT INTO oban_jobs (worker, queue, args, state) "
                "VALUES (%s, %s, %s, %s::oban_job_state) RETURNING id",
                [worker, queue, Jsonb(args), state],
            )
        ).fetchone()
    assert row is not None
    return int(row[0])


# --- telemetry ----------------------------------------------------------------------------


@dataclass
class Recorder:
    """Events received by an attached handler, as ``(name, meta)`` pairs."""

    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def __call__(self, name: str, meta: dict[str, Any]) -> None:
        self.events.append((name, meta))

    def named(self, name: str) -> list[dict[str, Any]]:
        """The metas of every event called ``name``, in order."""
        return [meta for event, meta in self.events if event == name]


@contextmanager
def recording(names: list[str]) -> Iterator[Recorder]:
    """Attach a recorder to ``names`` for the duration of the block (always detached)."""
    recorder = Recorder()
    handler_id = f"test-{uuid.uuid4().hex}"
    oban_telemetry.attach(handler_id, names, recorder)
    try:
        yield recorder
    finally:
        oban_telemetry.detach(handler_id)
