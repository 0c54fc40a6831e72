"""The "today" baseline of ``bench/timers.py``: main's timer path before issue 12, frozen.

Before issue 12, importing ``statifier_oban`` installed a prompt stager that polled every
0.1 s, each poll one staging statement in a transaction (``BEGIN``, the statement,
``COMMIT``) that woke the local producers of the queues it staged into or that already had
available jobs; the producers fetched and acked with oban 0.7.0's own statements (a fetch
in a transaction, one ``UPDATE`` per ack in a transaction). A worker started with
``--mode today`` calls :func:`install` after ``statifier_oban.latency.uninstall()``, which
brings back exactly that: this Stager, and oban's own fetch and acks.

The statement and the step are a copy of main's ``statifier_oban/store/sql/stage_jobs.sql`` and
``PromptStager.stage`` at commit c0a8a4c, kept here so that the benchmark can measure
"today" in the same run as the new path.
"""

from __future__ import annotations

from typing import Any

from oban import telemetry
from oban._stager import Stager
from statifier_oban.store import _oban_compat

INTERVAL_S = 0.1
"""The old prompt stager's poll interval."""

STAGE_SQL = """
WITH locked AS (
    SELECT id FROM {prefix}.oban_jobs
    WHERE state = ANY('{{scheduled,retryable}}')
      AND queue = ANY(%(queues)s::text[])
      AND scheduled_at <= timezone('UTC', now())
    ORDER BY scheduled_at ASC, id ASC
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
staged AS (
    UPDATE {prefix}.oban_jobs AS jobs SET state = 'available'::{prefix}.oban_job_state
    FROM locked WHERE jobs.id = locked.id
    RETURNING jobs.queue
)
SELECT queue, count(*) FROM staged GROUP BY queue
UNION ALL
SELECT q.queue, 0 FROM unnest(%(queues)s::text[]) AS q(queue)
WHERE EXISTS (SELECT 1 FROM {prefix}.oban_jobs WHERE state = 'available' AND queue = q.queue)
"""


class TodayStager(Stager):
    """main's PromptStager: poll every 0.1 s, wake the queues staged into or available."""

    async def _stage(self) -> None:
        query = self._query
        statement = STAGE_SQL.format(prefix=query._prefix)
        with telemetry.span("oban.stager.stage", {}) as context:
            async with query._pool.connection() as conn:
                rows = await (
                    await conn.execute(
                        statement, {"queues": list(self._producers), "limit": self._limit}
                    )
                ).fetchall()
            woken = {queue for queue, _ in rows}
            context.add({"staged_count": sum(int(n) for _, n in rows)})
            for queue in woken:
                self._producers[queue].notify()


def _build(config: dict[str, Any], **kwargs: Any) -> TodayStager:
    return TodayStager(**kwargs, **{"interval": INTERVAL_S, **config})


def install() -> None:
    """Make every ``Oban`` built afterwards use :class:`TodayStager`."""
    _oban_compat.set_stager_builder(_build)
