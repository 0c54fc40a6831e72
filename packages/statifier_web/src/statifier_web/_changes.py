"""How the console learns that an execution changed: one small seam, ``ChangeFeed``.

A feed yields an execution's row whenever it changed (a step, a fired timer, a cancel, a
park), whoever made the change: a worker in another process, the API, a CLI. The live
stream of the console (server-sent events) reads nothing else, so the way changes are
noticed can be swapped without touching the stream or the pages.

``NotifyFeed`` follows the execution's history (``Executions.follow``): woken by the
``NOTIFY`` each change of a watched execution sends as it commits, it reads the row again
and yields it. It never polls, and holds a connection of its own per stream while it
watches. It ends once the execution can change no more (completed or cancelled). It
needs history written (``History.enabled``, the default).

``PollingFeed`` asks ``Executions.get`` every ``interval`` seconds and yields when the
row's step count, status or update time moved: for executions whose history is off.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Protocol

from statifier_persistence import Execution, Executions


class ChangeFeed(Protocol):
    """Yields an execution's row when it changes (see the module docstring)."""

    def watch(self, execution_id: str) -> AsyncIterator[Execution]:
        """The row now, then the row after each change, until the caller stops reading
        (or, for a feed that knows, until the execution can change no more).

        Raises what ``Executions.get`` raises (``ExecutionNotFound`` for an unknown id).
        """
        ...


def _version(execution: Execution) -> tuple[int, int, str, float]:
    updated = execution.updated_at.timestamp()
    return execution.history_seq, execution.step_count, execution.status, updated


class NotifyFeed:
    """A ``ChangeFeed`` woken by the commits of the execution's changes (see the module
    docstring)."""

    def __init__(self, executions: Executions) -> None:
        self._executions = executions

    async def watch(self, execution_id: str) -> AsyncIterator[Execution]:
        """See ``ChangeFeed.watch``."""
        execution = await self._executions.get(execution_id)
        yield execution
        seen = _version(execution)
        # Entries after the row just read: a change committed meanwhile is replayed.
        entries = self._executions.follow(execution_id, after=execution.history_seq)
        async with aclosing(entries) as changes:
            async for _ in changes:
                execution = await self._executions.get(execution_id)
                if _version(execution) != seen:
                    seen = _version(execution)
                    yield execution


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
