"""Prompt staging: timers fire within about 100 ms of their time with default settings.

oban 0.7.0 moves due ``scheduled`` jobs to ``available`` in its Stager, polling every
``stager.interval`` (1 s by default). Its staging statement decides which queues to wake
from a snapshot taken *before* its own update, so a job it just staged waits for the next
tick: up to twice the interval late (see ``docs/adr/0006-prompt-staging.md``).

``install()`` registers, through oban's ``stager.build`` hook, a Stager whose statement
(``sql/stage_jobs.sql``) returns the queues it actually staged into (plus those that
already had available jobs) and wakes exactly those, and whose default interval is 0.1 s
unless the host sets one. It runs when ``statifier_oban`` is imported, so import the
package before constructing the ``Oban`` instance that runs the timers queue.

Public because it changes every ``Oban`` built afterwards in the process: a host can
check it (:func:`installed`) or go back to oban's own Stager (:func:`uninstall`).
"""

from __future__ import annotations

from typing import Any

from oban import telemetry

from . import _sql
from ._oban_compat import StagerBridge, StagingRound, set_stager_builder, stager_builder

DEFAULT_INTERVAL_S = 0.1


class PromptStager(StagerBridge):
    """A Stager that wakes the producers of the queues it has just staged jobs into."""

    async def stage(self, round: StagingRound) -> None:
        """Stage due jobs of this node's queues; wake the queues that have available jobs."""
        statement = _sql.statement("stage_jobs", round.prefix)
        with telemetry.span("oban.stager.stage", {}) as context:
            async with round.pool.connection() as conn:
                rows = await (
                    await conn.execute(statement, {"queues": round.queues, "limit": round.limit})
                ).fetchall()
            woken = {queue for queue, _ in rows}
            staged = sum(int(count) for _, count in rows)
            context.add({"staged_count": staged, "available_queues": sorted(woken)})
            for queue in woken:
                round.wake(queue)


def _build(config: dict[str, Any], **kwargs: Any) -> PromptStager:
    options = {"interval": DEFAULT_INTERVAL_S, **config}
    return PromptStager(**kwargs, **options)


def install() -> None:
    """Make every ``Oban`` built from now on use ``PromptStager`` (idempotent)."""
    if stager_builder() is not _build:
        set_stager_builder(_build)


def uninstall() -> None:
    """Make every ``Oban`` built from now on use oban's own Stager again (idempotent)."""
    if stager_builder() is _build:
        set_stager_builder(None)


def installed() -> bool:
    """Whether prompt staging is in effect for new ``Oban`` instances."""
    return stager_builder() is _build
