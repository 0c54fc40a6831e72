"""Chart revisions of durable executions (ADR 16): list them, move executions between
them, park and unpark them in bulk, retire them.

Every revision of a chart stays in the registry, and each execution runs the one its row
names. ``migrate`` moves one execution to another revision in one transaction with its
row: export its position by state id, import it against the new revision (renaming
states through ``state_map``, changing variables through ``datamodel``), store it; a
refusal changes nothing. The execution id stays, so its pending timers and invocations
keep their keys (chart identity is never part of a key) and fire into the migrated
execution. ``migrate_all``, ``park_all`` and ``unpark_all`` work through a revision's
executions a page at a time (``migrate_many``, ``park_many`` and ``unpark_many``
through the ids given), each execution in a transaction of its own, and can be dry
runs. ``retire`` marks a revision retired once no pin source counts anything on it.

``RevisionMethods`` is a part of ``Executions`` (its base class); it uses the store, the
registry and the loading of positions ``Executions`` owns.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier import Machine, instrumentation
from statifier.core import position
from statifier.core.state import MachineState

from . import _journal
from ._charts import Charts
from ._db import transaction
from ._errors import (
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    CorruptExecution,
    ExecutionNotFound,
    IdentityMismatch,
    InvalidArgument,
    InvalidTransition,
    MigrationRefused,
    PositionTooLarge,
    RetirementRefused,
    UnstorablePosition,
)
from ._executor import EffectExecutor, HostHook
from ._journal import Draft
from ._limits import MAX_IDENTITY_LENGTH, Limits
from ._pins import ExecutionPins, LinkPins, PinReport, PinSource, ask, label_of
from ._records import Execution, ExecutionStatus
from ._rows import StoredPosition, check_execution_id, decode_execution
from ._settlement import FanOutPins
from ._sql import statement
from ._traced import traced
from .history import History, HistoryEntry

MAX_BULK: Final = 10_000
"""The most executions one ``migrate_all``, ``park_all`` or ``unpark_all`` call handles."""

PIN_PAGE: Final = 500
"""Execution ids per question to the pin sources."""

_MIGRATABLE: Final[tuple[ExecutionStatus, ...]] = ("active", "needs_migration")


@dataclass(frozen=True, slots=True)
class Revision:
    """One registered chart revision.

    ``source_identity`` is the identity of its source bytes (what identities were before
    canonical forms; None for a revision registered under it). ``executions`` counts the
    executions that run it, by status (statuses with none are left out).
    """

    identity: str
    name: str | None
    version: str | None
    source_identity: str | None
    registered_at: datetime
    retired_at: datetime | None
    executions: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Migrated:
    """An execution moved to another revision (or, with ``dry_run``, would have been).

    ``execution`` is its row as stored (as it was, for a dry run), ``state`` the imported
    position, ``from_identity`` the revision it ran before, ``entry`` the history entry
    the migration wrote (None for a dry run, or with history off).
    """

    execution: Execution
    state: MachineState
    from_identity: str
    dry_run: bool
    entry: HistoryEntry | None = None

    def __repr__(self) -> str:
        done = "would migrate" if self.dry_run else "migrated"
        return (
            f"<Migrated {self.execution.id} {done} from {self.from_identity[:24]} "
            f"to {self.execution.chart_identity[:24]}>"
        )


@dataclass(frozen=True, slots=True)
class Bulk:
    """What a bulk call did (or, with ``dry_run``, would do) to one page of executions.

    ``done`` lists the execution ids migrated, parked or unparked; ``refused`` pairs the
    id of each one that was not with the reason. Pass ``after`` to the next call for the
    next page (None: none is left).
    """

    done: tuple[str, ...]
    refused: tuple[tuple[str, str], ...]
    after: str | None
    dry_run: bool

    def __repr__(self) -> str:
        run = " (dry run)" if self.dry_run else ""
        return (
            f"<Bulk {len(self.done)} done, {len(self.refused)} refused{run}, after={self.after!r}>"
        )


class _DryRun(Exception):
    """Leaves a dry run's transaction: it rolls back whatever the run wrote."""

    def __init__(self, result: Migrated) -> None:
        super().__init__("dry run")
        self.result = result


_PER_EXECUTION: Final = (
    MigrationRefused,
    ExecutionNotFound,
    InvalidTransition,
    IdentityMismatch,
    CorruptExecution,
    UnstorablePosition,
)
"""What refuses one execution of a bulk call without stopping the others."""


class RevisionMethods:
    """The revision calls of ``Executions`` (see the module docstring)."""

    _pool: AsyncConnectionPool[Any] | None
    _prefix: str
    _limits: Limits
    _charts: Charts
    _executor: EffectExecutor
    _host: HostHook
    _position_key: bytes | None
    _history: History

    if TYPE_CHECKING:  # provided by Executions

        def _bounds(self) -> dict[str, int]: ...

        def _routes(self, execution: Execution) -> Container[str]: ...

        def _journal(self, draft: Draft | None) -> dict[str, Any]: ...

        async def _locked(
            self,
            db: AsyncConnection[Any],
            execution_id: str,
            key: str | None = None,
            *,
            with_position: bool = True,
        ) -> tuple[Execution, StoredPosition, bool]: ...

        async def _position(
            self,
            db: AsyncConnection[Any],
            execution: Execution,
            stored: StoredPosition,
            routes: Any,
        ) -> MachineState: ...

        async def park(
            self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
        ) -> Execution: ...

        async def unpark(
            self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
        ) -> Execution: ...

        async def register(
            self, chart: Machine, *, conn: AsyncConnection[Any] | None = None
        ) -> str: ...

        async def get(
            self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
        ) -> Execution: ...

    # -- reading ---------------------------------------------------------------------

    async def revision(
        self, identity: str, *, conn: AsyncConnection[Any] | None = None
    ) -> Revision:
        """The revision with this identity, or whose source bytes have it
        (``ChartNotRegistered`` if none)."""
        async with transaction(self._pool, conn) as db:
            return await self._revision(db, _identity(identity), "")

    async def revisions(
        self,
        *,
        name: str | None = None,
        limit: int = 100,
        conn: AsyncConnection[Any] | None = None,
    ) -> tuple[Revision, ...]:
        """Registered revisions, oldest first (of the chart ``name``, if given), each with
        its executions counted by status; at most ``limit`` (1 to ``Limits.max_page_size``).
        """
        if name is not None and (not isinstance(name, str) or len(name) > MAX_IDENTITY_LENGTH):
            raise InvalidArgument(f"name must be a chart name, not {name!r}")
        _check_limit(limit, self._limits.max_page_size)
        async with transaction(self._pool, conn) as db:
            cursor = await db.execute(
                statement("list_revisions", self._prefix), {"name": name, "limit": limit}
            )
            rows = await cursor.fetchall()
        return tuple(_decode_revision(row) for row in rows)

    # -- one execution -----------------------------------------------------------------

    async def migrate(
        self,
        execution_id: str,
        to: Machine | str,
        *,
        state_map: Mapping[str, str] | None = None,
        datamodel: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        conn: AsyncConnection[Any] | None = None,
    ) -> Migrated:
        """Move an ``active`` or parked execution to revision ``to`` in one transaction.

        ``to`` is a compiled chart (registered here if it is not yet) or the identity of a
        registered revision. The position is exported by state id and imported against
        ``to`` with ``state_map`` (old state id -> new) and ``datamodel`` (variables to
        set); see ``statifier.core.position.import_position``. The status stays (a parked
        execution stays parked until ``unpark``); the migration counts as a step.

        Raises ``MigrationRefused`` (finished execution, or a position that cannot cross:
        the engine's refusal chained, e.g. ``UnknownStates`` naming the states),
        ``ChartRetired``, ``ChartNotRegistered``, or the errors of loading a position;
        nothing changes then. With ``dry_run`` everything is checked and nothing stored.
        """
        tracer = instrumentation.current
        if tracer is not None:
            work = self._migrate_once(execution_id, to, state_map, datamodel, dry_run, conn)
            return await traced(tracer, instrumentation.MIGRATE, work, execution_id=execution_id)
        return await self._migrate_once(execution_id, to, state_map, datamodel, dry_run, conn)

    async def _migrate_once(
        self,
        execution_id: str,
        to: Machine | str,
        state_map: Mapping[str, str] | None,
        datamodel: Mapping[str, Any] | None,
        dry_run: bool,
        conn: AsyncConnection[Any] | None,
    ) -> Migrated:
        execution_id = check_execution_id(execution_id)
        _check_target(to)
        try:
            async with transaction(self._pool, conn) as db:
                migrated = await self._migrate(db, execution_id, to, state_map, datamodel, dry_run)
                if dry_run:
                    raise _DryRun(migrated)
        except _DryRun as run:
            return run.result
        return migrated

    async def _migrate(
        self,
        db: AsyncConnection[Any],
        execution_id: str,
        to: Machine | str,
        state_map: Mapping[str, str] | None,
        datamodel: Mapping[str, Any] | None,
        dry_run: bool,
    ) -> Migrated:
        execution, persisted, _ = await self._locked(db, execution_id)
        if execution.status not in _MIGRATABLE:
            raise MigrationRefused(execution_id, f"it is {execution.status}")
        machine, identity = await self._target(db, to, execution_id)
        routes = self._routes(execution)
        state = await self._position(db, execution, persisted, routes)
        try:
            moved = position.import_position(
                position.export_position(state),
                machine,
                state_map=state_map,
                datamodel=datamodel,
                invoke_types=self._executor.invoke_types,
                routes=routes,
            )
        except position.PositionError as exc:
            raise MigrationRefused(execution_id, str(exc)) from exc
        try:
            stored = position.dumps(moved, key=self._position_key)
        except position.PositionError as exc:
            raise UnstorablePosition(execution_id, str(exc)) from exc
        if len(stored) > self._limits.max_position_bytes:
            raise PositionTooLarge(execution_id, len(stored), self._limits.max_position_bytes)
        if dry_run:
            return Migrated(execution, moved, execution.chart_identity, True)
        draft = None
        if self._history.enabled:
            draft = _journal.draft(
                execution,
                "migrated",
                before=state,
                after=moved,
                status=execution.status,
                detail={"from": execution.chart_identity, "to": identity},
            )
        params = {
            **self._bounds(),
            **self._journal(draft),
            "id": execution_id,
            "identity": identity,
            "name": machine.name,
            "version": machine.version,
            "position": stored,
            "macrostep": moved.macrostep,
            "round": moved.round,
        }
        cursor = await db.execute(statement("migrate_execution", self._prefix), params)
        row = await cursor.fetchone()
        assert row is not None  # noqa: S101 - the row is locked by this very transaction
        migrated = decode_execution(row, self._limits)
        written = _journal.stored(draft, migrated)
        entry = None if written is None else written.read()
        return Migrated(migrated, moved, execution.chart_identity, False, entry)

    async def _target(
        self, db: AsyncConnection[Any], to: Machine | str, execution_id: str
    ) -> tuple[Machine, str]:
        """The machine of revision ``to`` and the identity of its registry row (a row
        registered under a source identity keeps it), locked against retirement."""
        if isinstance(to, Machine):
            await self._charts.register(db, to)
            return to, to.identity
        revision = await self._revision(db, to, "FOR SHARE")
        if revision.retired_at is not None:
            raise ChartRetired(revision.identity)
        return await self._charts.machine(db, revision.identity, execution_id), revision.identity

    # -- a revision's executions, a page at a time ---------------------------------------

    async def migrate_all(
        self,
        from_identity: str,
        to: Machine | str,
        *,
        state_map: Mapping[str, str] | None = None,
        datamodel: Mapping[str, Any] | None = None,
        dry_run: bool = False,
        limit: int = 1000,
        after: str | None = None,
    ) -> Bulk:
        """``migrate`` every ``active`` or parked execution of revision ``from_identity``
        (up to ``limit``, by id after ``after``), each in its own transaction. An execution
        that cannot move is listed in ``refused`` and left as it was; a retired or unknown
        target raises before any moves.
        """
        source = await self.revision(from_identity)
        ids = await self._page(source.identity, _MIGRATABLE, after, limit)
        done = await self.migrate_many(
            ids, to, state_map=state_map, datamodel=datamodel, dry_run=dry_run
        )
        return _paged(done, ids, limit)

    async def migrate_many(
        self,
        execution_ids: Sequence[str],
        to: Machine | str,
        *,
        state_map: Mapping[str, str] | None = None,
        datamodel: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> Bulk:
        """``migrate`` each of ``execution_ids`` (at most ``MAX_BULK``) in its own
        transaction, as ``migrate_all`` does."""
        ids = _ids(execution_ids)
        _check_target(to)
        if isinstance(to, str):
            target = await self.revision(to)
            if target.retired_at is not None:
                raise ChartRetired(target.identity)
            to = target.identity
        elif not dry_run:
            await self.register(to)

        async def move(execution_id: str) -> None:
            await self.migrate(
                execution_id, to, state_map=state_map, datamodel=datamodel, dry_run=dry_run
            )

        return await _each(ids, move, dry_run)

    async def park_all(
        self, identity: str, *, dry_run: bool = False, limit: int = 1000, after: str | None = None
    ) -> Bulk:
        """``park`` every ``active`` execution of the revision (a page, as ``migrate_all``):
        each takes no event, and its timers snooze, until ``unpark``."""
        revision = await self.revision(identity)
        ids = await self._page(revision.identity, ("active",), after, limit)
        return _paged(await self.park_many(ids, dry_run=dry_run), ids, limit)

    async def unpark_all(
        self, identity: str, *, dry_run: bool = False, limit: int = 1000, after: str | None = None
    ) -> Bulk:
        """``unpark`` every parked execution of the revision (a page, as ``migrate_all``)."""
        revision = await self.revision(identity)
        ids = await self._page(revision.identity, ("needs_migration",), after, limit)
        return _paged(await self.unpark_many(ids, dry_run=dry_run), ids, limit)

    async def park_many(self, execution_ids: Sequence[str], *, dry_run: bool = False) -> Bulk:
        """``park`` each of ``execution_ids`` (at most ``MAX_BULK``), as ``park_all``."""
        return await self._set_each(_ids(execution_ids), "active", "needs_migration", dry_run)

    async def unpark_many(self, execution_ids: Sequence[str], *, dry_run: bool = False) -> Bulk:
        """``unpark`` each of ``execution_ids`` (at most ``MAX_BULK``), as ``unpark_all``."""
        return await self._set_each(_ids(execution_ids), "needs_migration", "active", dry_run)

    async def _set_each(
        self,
        ids: list[str],
        expected: ExecutionStatus,
        wanted: ExecutionStatus,
        dry_run: bool,
    ) -> Bulk:
        change = self.park if wanted == "needs_migration" else self.unpark

        async def set_one(execution_id: str) -> None:
            if not dry_run:
                await change(execution_id)
                return
            status = (await self.get(execution_id)).status
            if status != expected:
                raise InvalidTransition(execution_id, status, wanted)

        return await _each(ids, set_one, dry_run)

    async def _page(
        self,
        identity: str,
        statuses: Sequence[ExecutionStatus] | None,
        after: str | None,
        limit: int,
        db: AsyncConnection[Any] | None = None,
    ) -> list[str]:
        """Ids of the revision's executions of ``statuses`` (all if None), after ``after``."""
        _check_limit(limit, MAX_BULK)
        params = {
            "identity": identity,
            "statuses": list(statuses) if statuses is not None else None,
            "after": check_execution_id(after) if after is not None else None,
            "limit": limit,
        }
        async with transaction(self._pool, db) as conn:
            cursor = await conn.execute(statement("revision_executions", self._prefix), params)
            return [row[0] for row in await cursor.fetchall()]

    # -- retiring ----------------------------------------------------------------------

    async def pins(
        self,
        identity: str,
        *,
        pin_sources: Iterable[PinSource] = (),
        conn: AsyncConnection[Any] | None = None,
    ) -> PinReport:
        """What pins the revision: ``ExecutionPins`` (its unfinished executions) and every
        source of ``pin_sources``, asked about all of its executions (see ``retire``)."""
        sources = _sources(pin_sources)
        async with transaction(self._pool, conn) as db:
            revision = await self._revision(db, _identity(identity), "")
            return await self._collect(db, revision.identity, sources)

    async def retire(
        self,
        identity: str,
        *,
        pin_sources: Iterable[PinSource] = (),
        conn: AsyncConnection[Any] | None = None,
    ) -> Revision:
        """Retire the revision: it takes no new execution and no migration any more; its
        row (and source) stays for the finished executions that name it.

        Asks ``ExecutionPins`` and every source of ``pin_sources`` about every execution of
        the revision, with the revision locked (a ``create`` or ``migrate`` onto it waits).
        Any count above zero, a source that raises and a source that answers something
        else than counts refuse with ``RetirementRefused`` (its ``pins`` is the
        ``PinReport``); nothing changes then. Retiring a retired revision returns it.
        """
        sources = _sources(pin_sources)
        async with transaction(self._pool, conn) as db:
            revision = await self._revision(db, _identity(identity), "FOR UPDATE")
            if revision.retired_at is not None:
                return revision
            report = await self._collect(db, revision.identity, sources)
            if report.pinned:
                raise RetirementRefused(revision.identity, report, report.describe())
            await db.execute(
                statement("retire_chart", self._prefix), {"identity": revision.identity}
            )
            return await self._revision(db, revision.identity, "")

    async def _collect(
        self, db: AsyncConnection[Any], identity: str, extra: list[PinSource]
    ) -> PinReport:
        sources: dict[str, PinSource] = {}
        ours: list[PinSource] = [
            ExecutionPins(prefix=self._prefix, conn=db),
            FanOutPins(prefix=self._prefix, conn=db),  # counts once per question
            LinkPins(prefix=self._prefix, conn=db),  # counts once per question
        ]
        for source in (*ours, *extra):
            sources[label_of(source, sources)] = source
        counts: dict[str, dict[str, int]] = {label: {} for label in sources}
        after: str | None = None
        while True:
            page = await self._page(identity, None, after, PIN_PAGE, db)
            for label, source in sources.items():
                answer = await ask(source, identity, page)
                if isinstance(answer, str):
                    return PinReport(identity, counts, (label, answer))
                for kind, count in answer.items():
                    counts[label][kind] = counts[label].get(kind, 0) + count
            if len(page) < PIN_PAGE:
                return PinReport(identity, counts)
            after = page[-1]

    async def _revision(self, db: AsyncConnection[Any], identity: str, lock: str) -> Revision:
        cursor = await db.execute(
            statement("select_revision", self._prefix, lock=lock), {"identity": identity}
        )
        row = await cursor.fetchone()
        if row is None:
            raise ChartNotRegistered(identity)
        return _decode_revision(row)


def _identity(identity: Any) -> str:
    if not isinstance(identity, str) or not identity or len(identity) > MAX_IDENTITY_LENGTH:
        raise InvalidArgument(f"a chart identity is a non-empty string, not {identity!r:.100}")
    return identity


def _check_target(to: Any) -> None:
    if isinstance(to, str):
        _identity(to)
    elif not isinstance(to, Machine):
        raise InvalidArgument(f"to must be a compiled Machine or a chart identity, not {to!r}")


def _check_limit(limit: Any, most: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= most:
        raise InvalidArgument(f"limit must be an integer in 1..{most}, not {limit!r}")


def _sources(pin_sources: Iterable[PinSource]) -> list[PinSource]:
    sources = list(pin_sources)
    for source in sources:
        if not isinstance(source, PinSource):
            raise InvalidArgument(f"{source!r} is not a PinSource (no async pins method)")
    return sources


def _reason(exc: Exception) -> str:
    if isinstance(exc, MigrationRefused):
        return exc.reason
    return " ".join(str(exc).split())


async def _each(ids: list[str], act: Callable[[str], Awaitable[None]], dry_run: bool) -> Bulk:
    """``act`` on each id in turn; what one refuses is listed, the others go on."""
    done: list[str] = []
    refused: list[tuple[str, str]] = []
    for execution_id in ids:
        try:
            await act(execution_id)
        except _PER_EXECUTION as exc:
            refused.append((execution_id, _reason(exc)))
        else:
            done.append(execution_id)
    return Bulk(tuple(done), tuple(refused), None, dry_run)


def _paged(bulk: Bulk, ids: list[str], limit: int) -> Bulk:
    """``bulk`` of one page of ``ids``, with the ``after`` of the next page."""
    return dataclasses.replace(bulk, after=ids[-1] if len(ids) == limit else None)


def _ids(execution_ids: Any) -> list[str]:
    if isinstance(execution_ids, str) or not isinstance(execution_ids, Sequence):
        raise InvalidArgument("execution_ids must be a sequence of execution ids")
    if len(execution_ids) > MAX_BULK:
        raise InvalidArgument(f"at most {MAX_BULK} execution ids per call")
    return [check_execution_id(execution_id) for execution_id in execution_ids]


def _decode_revision(row: tuple[Any, ...]) -> Revision:
    identity, name, version, source_identity, registered_at, retired_at, counts = row
    if not isinstance(identity, str) or not isinstance(registered_at, datetime):
        raise ChartUnusable(repr(identity)[:80], "its registry row is not one this package wrote")
    executions = json.loads(counts) if isinstance(counts, str) else None
    if not isinstance(executions, dict):
        executions = {}
    return Revision(
        identity=identity,
        name=name,
        version=version,
        source_identity=source_identity,
        registered_at=registered_at,
        retired_at=retired_at,
        executions={str(k): int(v) for k, v in executions.items()},
    )
