"""Waiting on an execution: ``Executions.wait`` and ``Executions.follow`` (ADR 25).

A waiter never polls. On a connection of its own (autocommit, not the pool's) it
``LISTEN``s on ``statifier_executions`` and records a *watch* of the execution
(``statifier_watches``); every transaction that changes a watched execution sends a
``NOTIFY`` as it commits (``sql/journal.sql``), and the waiter reads the execution again
when one arrives for it. Unwatched executions notify no one: a notifying commit takes a
database-wide lock, which steps nobody waits on should not pay.

No change can slip between the watch and the first look: the watch commits first, then
the waiter reads the row ``FOR SHARE``, which waits for a step holding it. A step that
locked the row before the watch committed is waited for and its result read; any later
step sees the watch and notifies. A watch carries an expiry, renewed while the waiter
waits, so one left behind by a waiter that died stops costing notifications.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Collection
from contextlib import aclosing, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier.core.state import MachineState

from ._db import store_error
from ._errors import (
    InvalidArgument,
    NotConnected,
    WaitTimeout,
    WaitUnreachable,
)
from ._executor import HostHook
from ._limits import MAX_ID_LENGTH
from ._records import STATUSES, Execution, ExecutionStatus
from ._rows import StoredPosition, check_execution_id, check_text
from ._sql import statement
from .history import HistoryEntry, HistoryPage

CHANNEL: Final = "statifier_executions"
"""The ``LISTEN`` channel; a notification's payload is ``<schema> <execution id>``."""

WATCH_TTL_S: Final = 120
"""How long a watch lives unless its waiter renews it (every half of it)."""

MAX_WAIT_S: Final = 7 * 86_400
"""The longest ``timeout`` ``wait`` and ``follow`` take (a week)."""

_ENDED: Final[frozenset[ExecutionStatus]] = frozenset({"completed", "cancelled"})
"""Statuses after which an execution never changes again."""


class WaitMethods:
    """The waiting calls of ``Executions`` (see the module docstring)."""

    _pool: AsyncConnectionPool[Any] | None
    _prefix: str
    _host: HostHook

    if TYPE_CHECKING:  # provided by Executions

        async def _read(
            self,
            db: AsyncConnection[Any],
            execution_id: str,
            *,
            lock: str,
            with_position: bool,
            key: str | None = None,
        ) -> tuple[Execution, StoredPosition, bool]: ...

        async def _position(
            self,
            db: AsyncConnection[Any],
            execution: Execution,
            stored: StoredPosition,
            routes: Any,
        ) -> MachineState: ...

        async def history(
            self,
            execution_id: str,
            *,
            after: int | None = None,
            before: int | None = None,
            limit: int = 100,
            conn: AsyncConnection[Any] | None = None,
        ) -> HistoryPage: ...

    async def wait(
        self,
        execution_id: str,
        *,
        state: str | None = None,
        status: ExecutionStatus | Collection[ExecutionStatus] | None = None,
        timeout: float,
    ) -> Execution:
        """Return the execution's row once it is in state ``state`` (among its active
        states, or among those active when it ended) and has ``status`` (one, or any of
        several); both must hold when both are given. Returns at once if they hold now.

        Woken by the commit of each change (LISTEN/NOTIFY; see the module docstring),
        never by polling. Raises ``WaitTimeout`` after ``timeout`` seconds (at most a
        week), ``WaitUnreachable`` when the execution ended elsewhere (``completed``,
        ``cancelled``, or ``failed`` unless ``cancelled`` is wanted), and
        ``ExecutionNotFound``. Needs the pool: it holds a connection of its own (not one
        of the pool's) while it waits.
        """
        execution_id = check_execution_id(execution_id)
        if state is None and status is None:
            raise InvalidArgument("wait for a state=, a status= or both")
        if state is not None:
            state = check_text(state, "state", MAX_ID_LENGTH)
        wanted = _statuses(status)
        seconds = _timeout(timeout)
        goal = _describe(state, wanted)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        async with self._watching(execution_id) as watch:
            execution, active = await self._observe(watch.conn, execution_id, state, locked=True)
            while True:
                if _reached(execution, active, state, wanted):
                    return execution
                if _over(execution, wanted):
                    raise WaitUnreachable(execution, goal)
                if not await watch.changed(deadline):
                    raise WaitTimeout(execution, goal, seconds)
                execution, active = await self._observe(watch.conn, execution_id, state)

    async def follow(
        self,
        execution_id: str,
        *,
        after: int | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerator[HistoryEntry]:
        """Yield the execution's history entries as their transactions commit.

        From the entry after ``after`` (a ``seq``; 0 replays the whole history first;
        None, the default, starts with the next change). Ends once the execution is
        ``completed`` or ``cancelled`` and its last entry was yielded, or after
        ``timeout`` seconds (None: no end). Woken as ``wait`` is; use it in ``async with
        contextlib.aclosing(...)`` so that its connection closes when you stop early.
        """
        execution_id = check_execution_id(execution_id)
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
            raise InvalidArgument(f"after must be a seq (an integer), not {after!r}")
        loop = asyncio.get_running_loop()
        deadline = math.inf if timeout is None else loop.time() + _timeout(timeout)
        async with self._watching(execution_id) as watch:
            execution, page = await self._entries(watch.conn, execution_id, after, locked=True)
            seq = page.entries[-1].seq if page.entries else after or execution.history_seq
            while True:
                for entry in page.entries:
                    yield entry
                    seq = entry.seq
                if page.after is not None:
                    page = await self.history(execution_id, after=seq, conn=watch.conn)
                    continue
                if execution.status in _ENDED:
                    return
                if not await watch.changed(deadline):
                    return
                execution, page = await self._entries(watch.conn, execution_id, seq)

    async def _entries(
        self,
        conn: AsyncConnection[Any],
        execution_id: str,
        after: int | None,
        *,
        locked: bool = False,
    ) -> tuple[Execution, HistoryPage]:
        """The row and the page of entries after ``after`` (None: after its latest), read
        together (``locked``: once a step holding the row committed, see the module
        docstring)."""
        try:
            async with conn.transaction():
                execution, _, _ = await self._read(
                    conn, execution_id, lock="FOR SHARE" if locked else "", with_position=False
                )
                seq = execution.history_seq if after is None else after
                return execution, await self.history(execution_id, after=seq, conn=conn)
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    async def _observe(
        self,
        conn: AsyncConnection[Any],
        execution_id: str,
        state: str | None,
        *,
        locked: bool = False,
    ) -> tuple[Execution, tuple[str, ...]]:
        """The row and, when a state is waited for, its active state ids (for an ended
        execution, those active when it ended)."""
        try:
            async with conn.transaction():
                execution, stored, _ = await self._read(
                    conn,
                    execution_id,
                    lock="FOR SHARE" if locked else "",
                    with_position=state is not None,
                )
                if state is None:
                    return execution, ()
                if execution.status in _ENDED:
                    outcome = execution.outcome or {}
                    ended = outcome.get("configuration")
                    return execution, tuple(s for s in ended or () if isinstance(s, str))
                position = await self._position(
                    conn, execution, stored, self._host.routes(execution)
                )
                return execution, position.configuration_ids()
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    @asynccontextmanager
    async def _watching(self, execution_id: str) -> AsyncIterator[_Watch]:
        """A connection of the waiter's own, listening, with a watch of the execution."""
        pool = self._pool
        if pool is None:
            raise NotConnected("waiting listens on a connection of its own: build with a pool")
        try:
            conninfo = await _resolved(pool.conninfo)
            options = {**(await _resolved(pool.kwargs) or {}), "autocommit": True}
            conn = await AsyncConnection.connect(conninfo, **options)
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        watch = _Watch(conn, self._prefix, execution_id)
        try:
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
                await watch.renew()
            except psycopg.Error as exc:
                raise store_error(exc) from exc
            yield watch
        finally:
            await watch.close()


class _Watch:
    """One waiter's listening connection and its watch row."""

    def __init__(self, conn: AsyncConnection[Any], prefix: str, execution_id: str) -> None:
        self.conn = conn
        self._prefix = prefix
        self._params = {"id": execution_id, "watcher": uuid.uuid4(), "ttl_s": WATCH_TTL_S}
        self._payload = f"{prefix} {execution_id}"
        self._renew_at = 0.0

    async def renew(self) -> None:
        """Record (or prolong) the watch."""
        await self.conn.execute(statement("watch", self._prefix), self._params)
        self._renew_at = asyncio.get_running_loop().time() + WATCH_TTL_S / 2

    async def changed(self, deadline: float) -> bool:
        """Wait for the commit of a change of the execution: True when one came, False
        when ``deadline`` (the loop's clock) passed first."""
        loop = asyncio.get_running_loop()
        try:
            while True:
                now = loop.time()
                if now >= deadline:
                    return False
                if now >= self._renew_at:
                    await self.renew()
                timeout = min(deadline, self._renew_at) - now
                notifies = self.conn.notifies(timeout=max(timeout, 0.0))
                async with aclosing(notifies) as received:
                    async for notify in received:
                        if notify.payload == self._payload:
                            return True
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    async def close(self) -> None:
        """Drop the watch (and expired ones) and close the connection; a watch that cannot
        be dropped (the database went away) expires by itself."""
        try:
            if not self.conn.closed:
                await self.conn.execute(statement("unwatch", self._prefix), self._params)
        except psycopg.Error:
            pass  # it expires within WATCH_TTL_S; the caller's own error (if any) matters
        finally:
            await self.conn.close()


async def _resolved(setting: Any) -> Any:
    """A pool's conninfo or kwargs: the value, or what its callable (sync or async) gives."""
    if not callable(setting):
        return setting
    value = setting()
    return await value if inspect.isawaitable(value) else value


def _statuses(status: Any) -> frozenset[ExecutionStatus] | None:
    if status is None:
        return None
    found = (status,) if isinstance(status, str) else tuple(status)
    if not found or any(s not in STATUSES for s in found):
        raise InvalidArgument(
            f"status must be one or more of {', '.join(STATUSES)}, not {status!r:.200}"
        )
    return frozenset(found)


def _timeout(timeout: Any) -> float:
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_WAIT_S
    ):
        raise InvalidArgument(f"timeout must be seconds in (0, {MAX_WAIT_S}], not {timeout!r}")
    return float(timeout)


def _describe(state: str | None, wanted: frozenset[ExecutionStatus] | None) -> str:
    parts = []
    if state is not None:
        parts.append(f"state {state!r}")
    if wanted is not None:
        parts.append("status " + " or ".join(sorted(wanted)))
    return " with ".join(parts)


def _reached(
    execution: Execution,
    active: tuple[str, ...],
    state: str | None,
    wanted: frozenset[ExecutionStatus] | None,
) -> bool:
    if wanted is not None and execution.status not in wanted:
        return False
    return state is None or state in active


def _over(execution: Execution, wanted: frozenset[ExecutionStatus] | None) -> bool:
    """Whether the execution can change no more in a way the waiter waits for."""
    if execution.status in _ENDED:
        return True
    # A failed execution takes no event; only a cancel still changes it.
    return execution.status == "failed" and (wanted is None or "cancelled" not in wanted)
