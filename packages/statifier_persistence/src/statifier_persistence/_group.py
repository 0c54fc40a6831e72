"""Group commit: keyed steps of different executions that arrive together share one
transaction (ADR 32).

A worker's producer fetches several jobs at once and starts them together; each fires a
timer into its own execution with the job's key. Alone, each step is a transaction of
its own: its locked read, its timer insert, its store, its commit, each a round trip
and each a statement for PostgreSQL to run. Together, the steps that start in the same
turn of the event loop join one group, and the group runs one transaction for all of
them: one statement locks every row (in id order), one stores every timer, one stores
every row with its key and history entry, one commit.

Each step still does its own part in its own task, so whatever it reads from its
context (who triggered it, for history; a tracing span) is its own: when the group has
locked the rows, it hands each step its row in turn (``Member.turn``); the step checks
it, loads its position, drives it and reports what it has ready to store
(``Member.report``); the group stores everything, commits, and answers each step
(``Member.committed``), which then answers its caller as a step alone would.

What does not change: the row lock (held from the locked read to the commit, as alone),
exactly once per key (the key is checked under the lock and inserted with the store),
and every answer. A step whose execution does not take it (already applied, discarded,
declined, missing, parked, unreadable) answers at once and stores nothing. If anything
fails once a step has begun its drive (its own error, or the group's statements, or the
commit), the whole transaction rolls back and every step of the group is tried again
alone, where it meets its own outcome; a step applied by a commit whose answer was lost
is seen by its key. Only keyed steps join a group: a keyless step cannot be tried again
safely, and runs alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ._db import KeyRace, transaction
from ._stepping import Begun, Locked, Ready

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from ._drive import Drive
    from ._executions import Executions
    from ._records import Decline, Execution, StepResult
    from .history import EntryKind

logger = logging.getLogger("statifier_persistence")

MAX_GROUP: Final = 64
"""The most steps in one group; more arriving together start another one."""


class _Retry(Exception):
    """The group rolled back: the step is tried again alone."""


class _Failed:
    """What a step reports when it failed after it began its drive."""


_FAILED: Final = _Failed()


@dataclass(eq=False, slots=True)
class Member:
    """One step of a group: its execution and key, and the three hand-overs."""

    execution_id: str
    key: str
    turn: asyncio.Future[tuple[AsyncConnection[Any], Locked]]
    """Set by the group: the step's locked row and the connection of the transaction."""
    report: asyncio.Future[Ready | _Failed | None]
    """Set by the step: its row ready to store, None (it answered without a change), or
    ``_FAILED`` (the group must roll back)."""
    committed: asyncio.Future[Execution]
    """Set by the group: the row as stored, once committed."""


@dataclass(eq=False, slots=True)
class _Group:
    members: dict[str, Member] = field(default_factory=dict)
    started: bool = False
    stored: list[Member] = field(default_factory=list)
    """The steps whose rows the group stores (they wait for the commit)."""


class StepGroups:
    """The groups of one ``Executions``: which one is open to join, and their leaders."""

    def __init__(self, executions: Executions) -> None:
        self._executions = executions
        self._open: _Group | None = None
        self._leaders: set[asyncio.Task[None]] = set()

    async def step(
        self,
        execution_id: str,
        key: str,
        action: Callable[[Drive], Awaitable[Decline | None]],
        kind: EntryKind,
    ) -> StepResult:
        """The keyed step ``Executions._single`` would take, in the open group if it can
        join one (else alone: its execution is in the group already)."""
        executions = self._executions
        member = self._join(execution_id, key)
        if member is None:
            return await executions._single(execution_id, action, key, None, kind)
        try:
            answer = await self._take_part(member, action, kind)
        except _Retry:
            answer = None
        finally:
            if not member.report.done():  # cancelled or failed before it reported
                member.report.set_result(_FAILED)
        if answer is None:
            return await executions._single(execution_id, action, key, None, kind)
        return answer

    async def _take_part(
        self,
        member: Member,
        action: Callable[[Drive], Awaitable[Decline | None]],
        kind: EntryKind,
    ) -> StepResult | None:
        """The step's own part in the group: its answer, or None when it is to be tried
        again alone (it failed after it began its drive: the group rolls back)."""
        executions = self._executions
        key = member.key
        db, locked = await member.turn
        try:
            begun = await executions._begin(db, locked, key)
        except BaseException:
            member.report.set_result(None)  # it only read: the others go on
            raise
        if not isinstance(begun, Begun):
            member.report.set_result(None)
            return begun
        try:
            ready = await executions._run(db, begun, action, kind, key)
        except Exception:
            # It may have written on the group's connection: everything rolls back, and
            # the step, tried alone, meets its error (or not) on its own.
            return None
        if not isinstance(ready, Ready):
            member.report.set_result(None)
            return ready
        member.report.set_result(ready)
        stored = await member.committed
        return executions._stepped(stored, ready.drive, ready.draft)

    def _join(self, execution_id: str, key: str) -> Member | None:
        group = self._open
        if group is None or group.started or len(group.members) >= MAX_GROUP:
            group = self._open = _Group()
            leader = asyncio.get_running_loop().create_task(self._lead(group))
            self._leaders.add(leader)
            leader.add_done_callback(self._leaders.discard)
        if execution_id in group.members:
            return None
        loop = asyncio.get_running_loop()
        member = Member(
            execution_id, key, loop.create_future(), loop.create_future(), loop.create_future()
        )
        group.members[execution_id] = member
        return member

    async def _lead(self, group: _Group) -> None:
        """Run the group's transaction; it starts after every step that joined in the
        turn of the event loop that opened it."""
        group.started = True
        if self._open is group:
            self._open = None
        members = sorted(group.members.values(), key=lambda m: m.execution_id)
        try:
            stored = await self._transact(group, members)
        except BaseException as exc:
            for member in members:
                _retry(member.turn)
            for member in group.stored:
                _retry(member.committed)
            if not isinstance(exc, Exception):
                raise
            if not isinstance(exc, _Retry | KeyRace):  # not a step's failure, nor a race
                logger.warning(
                    "a group commit of %d steps rolled back, each is tried alone: %s",
                    len(members),
                    exc,
                )
            return
        for member in members:
            row = stored.get(member.execution_id)
            if row is not None and not member.committed.done():
                member.committed.set_result(row)

    async def _transact(self, group: _Group, members: Sequence[Member]) -> dict[str, Execution]:
        executions = self._executions
        ready: list[tuple[Member, Ready]] = []
        async with transaction(executions.pool, None) as db:
            asked = [(member.execution_id, member.key) for member in members]
            found = await executions._locked_many(db, asked)
            for member in members:
                if member.turn.done():  # its caller gave up before its turn
                    continue
                read = found[member.execution_id]
                if isinstance(read, Exception):
                    member.turn.set_exception(read)
                    continue
                member.turn.set_result((db, read))
                outcome = await member.report  # one step at a time on the connection
                if isinstance(outcome, _Failed):
                    raise _Retry
                if outcome is not None:
                    ready.append((member, outcome))
                    group.stored.append(member)
            if not ready:
                return {}
            rows = await executions._store_ready(db, [each for _, each in ready])
            for (_, each), row in zip(ready, rows, strict=True):
                await executions._settlement.after_store(db, each.drive.execution.status, row)
        return {member.execution_id: row for (member, _), row in zip(ready, rows, strict=True)}


def _retry(future: asyncio.Future[Any]) -> None:
    """Tell a waiting step that the group rolled back (it is tried again alone)."""
    if not future.done():
        future.set_exception(_Retry())


__all__ = ["MAX_GROUP", "Member", "StepGroups"]
