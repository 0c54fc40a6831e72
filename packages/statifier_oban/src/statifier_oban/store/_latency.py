"""Prompt staging and lean producers (public as ``statifier_oban.latency``, which tells
the whole story)."""

from __future__ import annotations

import asyncio
from typing import Any

from oban import telemetry
from psycopg_pool import AsyncConnectionPool

from .._names import ANNOUNCE_HORIZON_MS, DUE_CHANNEL
from . import _acks, _fetch, _sql, _statements
from ._oban_compat import (
    StagerBridge,
    StagingRound,
    ack_writer,
    job_fetcher,
    set_ack_writer,
    set_job_fetcher,
    set_stager_builder,
    stager_builder,
)

__all__ = [
    "ANNOUNCE_HORIZON_S",
    "DEFAULT_INTERVAL_S",
    "MIN_GAP_S",
    "PromptStager",
    "install",
    "installed",
    "uninstall",
]

ANNOUNCE_HORIZON_S = ANNOUNCE_HORIZON_MS / 1000
"""Timers due sooner than this after they are scheduled are announced to the stagers; no
stager rests longer than this, so it finds every other timer before it is due."""

DEFAULT_INTERVAL_S = ANNOUNCE_HORIZON_S
"""The longest rest of a :class:`PromptStager` unless the host passes ``stager={"interval": ...}``
(which it can lower, not raise above :data:`ANNOUNCE_HORIZON_S`)."""

MIN_GAP_S = 0.05
"""The shortest rest between two steps: a stream of timers is staged in batches, at most
20 times a second per node; a sparse timer is staged at its time. Shorter gaps lower a
stream's lateness and cost a staging round, a fetch and an ack per gap (ADR 18)."""


class PromptStager(StagerBridge):
    """A Stager that stages each timer at its due time and wakes the producers at once."""

    def __init__(self, **options: Any) -> None:
        """oban's Stager options; ``interval`` is capped at :data:`ANNOUNCE_HORIZON_S`."""
        super().__init__(**options)
        self.cap_interval(ANNOUNCE_HORIZON_S)
        self._db_offset: float | None = None  # database epoch seconds - event-loop time
        self._last_step = 0.0

    def channels(self) -> dict[str, Any]:
        """Listen for announced timers."""
        return {DUE_CHANNEL: self._on_due}

    def _on_due(self, payload: dict[str, Any]) -> None:
        """A timer of one of our queues is due at ``payload["at"]`` (database epoch s)."""
        at = payload.get("at")
        if not self.runs(payload.get("queue")) or not isinstance(at, int | float):
            return
        offset = self._db_offset
        loop_time = asyncio.get_running_loop().time()
        when = loop_time if offset is None else at - offset
        self.rouse_at(max(when, self._last_step + MIN_GAP_S))

    async def stage(self, round: StagingRound) -> float | None:
        """Stage due jobs, announce and wake; return the rest until the next due job."""
        loop = asyncio.get_running_loop()
        with telemetry.span("oban.stager.stage", {}) as context:
            sent = loop.time()
            rows = await stage_due(round.pool, round.prefix, round.queues, round.limit)
            received = loop.time()
            self._last_step = received
            staged: dict[str, int] = {}
            waiting: list[str] = []
            next_due: float | None = None
            for kind, queue, count, db_now, due, _ in rows:
                if kind == "staged":
                    staged[queue] = int(count)
                elif kind == "available":
                    waiting.append(queue)
                else:
                    self._db_offset = db_now - (sent + received) / 2
                    next_due = due
            for queue in waiting:
                if queue not in staged:
                    round.wake(queue)
            context.add(
                {
                    "staged_count": sum(staged.values()),
                    "available_queues": sorted({*staged, *waiting}),
                }
            )
        if sum(staged.values()) >= round.limit:
            return MIN_GAP_S  # more is due than one step stages
        if next_due is None or self._db_offset is None:
            return None
        return max(MIN_GAP_S, next_due - self._db_offset - loop.time())


async def stage_due(
    pool: AsyncConnectionPool[Any], prefix: str, queues: list[str], limit: int
) -> list[tuple[Any, ...]]:
    """One staging statement (``sql/stage_jobs.sql``): make at most ``limit`` due
    scheduled and retryable jobs of ``queues`` available and announce them; its rows
    (``staged``, ``available`` and ``clock``, see the file)."""
    statement = _sql.statement("stage_jobs", prefix)
    params = {"queues": queues, "limit": limit, "channel": f"{prefix}.oban_insert"}
    async with _statements.autocommit(pool) as conn:
        return list(await (await conn.execute(statement, params)).fetchall())


def _build(config: dict[str, Any], **kwargs: Any) -> PromptStager:
    options = {"interval": DEFAULT_INTERVAL_S, **config}
    return PromptStager(**kwargs, **options)


def install() -> None:
    """Make every ``Oban`` built from now on use ``PromptStager``, and every producer in the
    process (running ones included, from their next wake-up) ack in batches and fetch in
    one statement (idempotent)."""
    if stager_builder() is not _build:
        set_stager_builder(_build)
    if ack_writer() is not _acks.write:
        set_ack_writer(_acks.write)
    if job_fetcher() is not _fetch.fetch:
        set_job_fetcher(_fetch.fetch)


def uninstall() -> None:
    """Make every ``Oban`` built from now on use oban's own Stager, and every producer in
    the process oban's own acks and fetch (idempotent)."""
    if stager_builder() is _build:
        set_stager_builder(None)
    if ack_writer() is _acks.write:
        set_ack_writer(None)
    if job_fetcher() is _fetch.fetch:
        set_job_fetcher(None)


def installed() -> bool:
    """Whether prompt staging, batched acks and the lean fetch are in effect."""
    return (
        stager_builder() is _build and ack_writer() is _acks.write and job_fetcher() is _fetch.fetch
    )
