"""Reading and pruning history (ADR 25): ``Executions.history`` and ``prune_history``.

``HistoryMethods`` is a part of ``Executions`` (its base class), as ``RevisionMethods``
is. Entries are read a page at a time by ``seq``, each checked as any stored value is
(bounded in size before it crosses the wire, parsed field by field). Pruning deletes in
batches, one transaction each, so it never holds many rows locked nor one long
transaction open on a busy table.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from ._db import transaction
from ._errors import CorruptExecution, InvalidArgument, NotConnected
from ._records import Execution
from ._rows import check_execution_id, decode_json_object
from ._sql import statement
from .history import History, HistoryEntry, HistoryFormatError, HistoryPage

DEFAULT_PRUNE_BATCH: Final = 1000
"""Entries one prune transaction deletes at most, by default."""

MAX_PRUNE_BATCH: Final = 100_000
"""The largest batch ``prune_history`` takes."""


class HistoryMethods:
    """The history calls of ``Executions`` (see the module docstring)."""

    _pool: AsyncConnectionPool[Any] | None
    _prefix: str
    _history: History

    if TYPE_CHECKING:  # provided by Executions

        async def get(
            self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
        ) -> Execution: ...

    async def history(
        self,
        execution_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = 100,
        conn: AsyncConnection[Any] | None = None,
    ) -> HistoryPage:
        """The execution's history entries (``statifier_persistence.history``), by ``seq``.

        With ``after`` (a ``seq``; default 0), the first ``limit`` entries after it, oldest
        first, and the page's ``after`` continues (None once the page was not full). With
        ``before``, the last ``limit`` entries before it, still oldest first (``before=
        execution.history_seq + 1`` gives the newest). ``limit`` is 1 to
        ``History.max_page_size``. Raises ``ExecutionNotFound`` for an unknown id, and
        ``CorruptExecution`` for an entry that is not what history writes.
        """
        execution_id = check_execution_id(execution_id)
        if after is not None and before is not None:
            raise InvalidArgument("pass after= or before=, not both")
        limit = _count(limit, "limit", 1, self._history.max_page_size)
        params: dict[str, Any] = {
            "id": execution_id,
            "limit": limit,
            "max_entry": self._history.max_entry_bytes,
        }
        if before is not None:
            params["before"] = _count(before, "before", 1, None)
            name = "select_history_tail"
        else:
            params["after"] = _count(0 if after is None else after, "after", 0, None)
            name = "select_history"
        async with transaction(self._pool, conn) as db:
            cursor = await db.execute(statement(name, self._prefix), params)
            rows = await cursor.fetchall()
            if not rows:
                await self.get(execution_id, conn=db)  # ExecutionNotFound if there is none
        if before is not None:
            rows.reverse()
        entries = tuple(_decode(execution_id, row, self._history) for row in rows)
        more = before is None and len(entries) == limit
        return HistoryPage(entries, entries[-1].seq if more else None)

    async def prune_history(
        self,
        *,
        keep_last: int | None = None,
        older_than: timedelta | None = None,
        batch_size: int = DEFAULT_PRUNE_BATCH,
        max_batches: int | None = None,
    ) -> int:
        """Delete history entries beyond what retention keeps; the number deleted.

        ``keep_last`` keeps the last N entries of each execution; ``older_than`` deletes
        entries written longer ago than that (both: an entry goes if either says so).
        Keeping everything is passing neither (and needs no call). Deletes in batches of
        at most ``batch_size`` entries, one transaction each, until nothing is left to
        delete or ``max_batches`` batches ran (the rest waits for the next call). Needs
        the pool (batches are transactions of their own).
        """
        if keep_last is None and older_than is None:
            raise InvalidArgument("give keep_last= or older_than= (keeping all needs no pruning)")
        batch = _count(batch_size, "batch_size", 1, MAX_PRUNE_BATCH)
        budget = None if max_batches is None else _count(max_batches, "max_batches", 1, None)
        if self._pool is None:
            raise NotConnected("prune_history runs its batches on the pool: build with one")
        deleted = 0
        if older_than is not None:
            if not isinstance(older_than, timedelta) or older_than < timedelta(0):
                raise InvalidArgument(f"older_than must be a timedelta >= 0, not {older_than!r}")
            count, budget = await self._prune_by_age(older_than, batch, budget)
            deleted += count
        if keep_last is not None:
            keep = _count(keep_last, "keep_last", 0, None)
            count, budget = await self._prune_keep_last(keep, batch, budget)
            deleted += count
        return deleted

    async def _prune_by_age(
        self, older_than: timedelta, batch: int, budget: int | None
    ) -> tuple[int, int | None]:
        deleted = 0
        async with transaction(self._pool, None) as db:
            cursor = await db.execute("SELECT now()")
            row = await cursor.fetchone()
        assert row is not None  # noqa: S101 - SELECT now() returns a row
        cutoff: datetime = row[0] - older_than
        while budget is None or budget > 0:
            async with transaction(self._pool, None) as db:
                cursor = await db.execute(
                    statement("prune_history_by_age", self._prefix),
                    {"cutoff": cutoff, "batch": batch},
                )
                rows = await cursor.fetchall()
            deleted += len(rows)
            budget = None if budget is None else budget - 1
            if len(rows) < batch:
                break
        return deleted, budget

    async def _prune_keep_last(
        self, keep: int, batch: int, budget: int | None
    ) -> tuple[int, int | None]:
        deleted = 0
        start = ""
        while budget is None or budget > 0:
            async with transaction(self._pool, None) as db:
                cursor = await db.execute(
                    statement("prune_history_keep_last", self._prefix),
                    {"keep": keep, "batch": batch, "from": start},
                )
                rows = await cursor.fetchall()
            deleted += len(rows)
            budget = None if budget is None else budget - 1
            if len(rows) < batch:
                break
            start = max(row[0] for row in rows)
        return deleted, budget


def _count(value: Any, name: str, least: int, most: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidArgument(f"{name} must be an integer >= {least}, not {value!r}")
    if most is not None and value > most:
        raise InvalidArgument(f"{name} must be at most {most}, not {value}")
    return value


def _decode(execution_id: str, row: tuple[Any, ...], settings: History) -> HistoryEntry:
    """A stored entry, checked: its size, its JSON, every field."""
    seq, at, _kind, text, size = row

    def corrupt(message: str) -> CorruptExecution:
        return CorruptExecution(execution_id, f"history entry {seq!r}: {message}")

    body = decode_json_object(text, size, "entry", settings.max_entry_bytes, corrupt)
    if body is None or not isinstance(at, datetime):
        raise corrupt("a column is missing")
    try:
        return HistoryEntry.from_json(
            {**body, "execution_id": execution_id, "seq": seq, "at": at.isoformat()}
        )
    except (HistoryFormatError, InvalidArgument) as exc:
        raise corrupt(str(exc)) from None
