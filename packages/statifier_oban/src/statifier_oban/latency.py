"""Prompt staging: timers fire within about 100 ms of their time with default settings.

oban 0.7.0 moves due ``scheduled`` jobs to ``available`` in its Stager, polling every
``stager.interval`` (1 s by default). Its staging statement decides which queues to wake
from a snapshot taken *before* its own update, so a job it just staged waits for the next
tick: up to twice the interval late (see ``docs/adr/0006-prompt-staging.md``).

``install()`` registers, through oban's ``stager.build`` extension point, a Stager whose
statement returns the queues it actually staged into (plus those that already had
available jobs) and wakes exactly those, and whose default interval is 0.1 s unless the
host sets one. It runs when ``statifier_oban`` is imported, so import the package before
constructing the ``Oban`` instance that runs the timers queue.
"""

from __future__ import annotations

from typing import Any

from oban import telemetry
from oban._extensions import get_ext, put_ext
from oban._stager import Stager

DEFAULT_INTERVAL_S = 0.1

_STAGE = """
WITH locked AS (
    SELECT id FROM {p}.oban_jobs
    WHERE state = ANY('{scheduled,retryable}')
      AND queue = ANY(%(queues)s::text[])
      AND scheduled_at <= timezone('UTC', now())
    ORDER BY scheduled_at ASC, id ASC
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
staged AS (
    UPDATE {p}.oban_jobs AS jobs SET state = 'available'::{p}.oban_job_state
    FROM locked WHERE jobs.id = locked.id
    RETURNING jobs.queue
)
SELECT queue, count(*) FROM staged GROUP BY queue
UNION ALL
SELECT q.queue, 0 FROM unnest(%(queues)s::text[]) AS q(queue)
WHERE EXISTS (SELECT 1 FROM {p}.oban_jobs WHERE state = 'available' AND queue = q.queue)
"""


class PromptStager(Stager):
    """A Stager that wakes the producers of the queues it has just staged jobs into."""

    async def _stage(self) -> None:
        query = self._query
        statement = _STAGE.replace("{p}", query._prefix)
        with telemetry.span("oban.stager.stage", {}) as context:
            queues = list(self._producers.keys())
            async with query._pool.connection() as conn:
                rows = await (
                    await conn.execute(statement, {"queues": queues, "limit": self._limit})
                ).fetchall()
            woken = {queue for queue, _ in rows}
            staged = sum(int(count) for _, count in rows)
            context.add({"staged_count": staged, "available_queues": sorted(woken)})
            for queue in woken:
                producer = self._producers.get(queue)
                if producer is not None:
                    producer.notify()


def _build(config: dict[str, Any], **kwargs: Any) -> Stager:
    options = {"interval": DEFAULT_INTERVAL_S, **config}
    return PromptStager(**kwargs, **options)


def _absent(*args: Any, **kwargs: Any) -> Any:
    raise LookupError("no stager extension")


def install() -> None:
    """Make every ``Oban`` built from now on use ``PromptStager`` (idempotent)."""
    if get_ext("stager.build", _absent) is not _build:
        put_ext("stager.build", _build)


def installed() -> bool:
    """Whether prompt staging is in effect for new ``Oban`` instances."""
    return get_ext("stager.build", _absent) is _build
