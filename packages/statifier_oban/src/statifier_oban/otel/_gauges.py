"""``GaugeSampler``: the samples the two observable gauges report.

OpenTelemetry calls a gauge's callback on its own thread, at export time; our database is
asyncio's. So a task on the worker's loop samples every ``interval`` seconds (the queue
depth from ``oban_jobs``, the executions by status and chart from the revision registry)
and the callbacks report the last sample. A failed sample is logged and keeps the last
one. Every worker that samples reports the same totals: aggregate with ``max``, not
``sum`` (docs/tracing.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from psycopg_pool import AsyncConnectionPool
from statifier import instrumentation

from ..store import _operations
from ._metrics import Sample

logger = logging.getLogger("statifier_oban.otel")

DEFAULT_INTERVAL_S: Final = 30.0
"""How often the gauges are sampled by default."""

MAX_GAUGE_ROWS: Final = 1000
"""The most ``(queue, state)`` rows one sample reads."""


class GaugeSampler:
    """Samples queue depth (``pool`` and ``prefix``: oban's tables) and, given
    ``executions`` (a ``statifier_persistence.Executions``), executions by status."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        prefix: str = "public",
        executions: Any = None,
        interval: float = DEFAULT_INTERVAL_S,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, not {interval!r}")
        self.pool = pool
        self.prefix = prefix
        self.executions = executions
        self.interval = interval

    async def sample(self) -> Sample:
        """Read both figures now."""
        jobs = {
            (queue, state): count
            for queue, state, count in await _operations.queue_depth(
                self.pool, self.prefix, limit=MAX_GAUGE_ROWS
            )
        }
        executions: dict[tuple[str, str], int] = {}
        if self.executions is not None:
            revisions = await self.executions.revisions(limit=self.executions.limits.max_page_size)
            for revision in revisions:
                for status, count in revision.executions.items():
                    key = (status, revision.name or "")
                    executions[key] = executions.get(key, 0) + count
        return Sample(executions, jobs)

    async def sample_once(self) -> None:
        """Sample, and hand the sample to the installed instrumentation's gauges."""
        sample = await self.sample()
        installed = instrumentation.current
        metrics = getattr(installed, "metrics", None)
        if metrics is not None:
            metrics.sample = sample

    async def run(self) -> None:
        """Sample every ``interval`` seconds until cancelled."""
        while True:
            try:
                await self.sample_once()
            except Exception as exc:  # the database may be restarting: the next round retries
                logger.warning("sampling the gauges failed: %s", exc, extra={"error": str(exc)})
            await asyncio.sleep(self.interval)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[GaugeSampler]:
        """Sample in a task for the duration of the block."""
        task = asyncio.create_task(self.run(), name="statifier-otel-gauges")
        try:
            yield self
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
