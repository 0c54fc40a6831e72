"""How the console learns that an execution changed: one small seam, ``ChangeFeed``.

A feed yields an execution's row whenever it changed (a step, a fired timer, a cancel, a
park), whoever made the change: a worker in another process, the API, a CLI. The live
stream of the console (server-sent events) reads nothing else, so the way changes are
noticed can be swapped without touching the stream or the pages.

``PollingFeed`` asks ``Executions.get`` every ``interval`` seconds and yields when the
row's step count, status or update time moved. It is the stand-in until the library
publishes its own change notifications (PostgreSQL ``LISTEN/NOTIFY``, through
``Executions.wait``); a feed over those takes its place here.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Protocol

from statifier_persistence import Execution, Executions


class ChangeFeed(Protocol):
    """Yields an execution's row when it changes (see the module docstring)."""

    def watch(self, execution_id: str) -> AsyncIterator[Execution]:
        """The row now, then the row after each change, until the caller stops reading.

        Raises what ``Executions.get`` raises (``ExecutionNotFound`` for an unknown id).
        """
        ...


def _version(execution: Execution) -> tuple[int, str, float]:
    return execution.step_count, execution.status, execution.updated_at.timestamp()


class PollingFeed:
    """A ``ChangeFeed`` that reads the row every ``interval`` seconds."""

    def __init__(self, executions: Executions, interval: float) -> None:
        self._executions = executions
        self._interval = interval

    async def watch(self, execution_id: str) -> AsyncIterator[Execution]:
        """See ``ChangeFeed.watch``."""
        execution = await self._executions.get(execution_id)
        yield execution
        seen = _version(execution)
        while True:
            await asyncio.sleep(self._interval)
            execution = await self._executions.get(execution_id)
            if _version(execution) != seen:
                seen = _version(execution)
                yield execution
