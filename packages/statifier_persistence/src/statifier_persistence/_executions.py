"""``Executions``: create, step, cancel, read and list durable executions.

Every call that changes an execution is one PostgreSQL transaction (a savepoint inside
the caller's, with ``conn=``): lock the row, check liveness, load the position against
the registered chart, drive, perform the durable effects through the executor on the
same connection, store the position, status and step count (and the step's key),
commit. A failure anywhere rolls all of it back: the previous position, and no job.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Container, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, overload

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from statifier import Machine, initialize, instrumentation, new_session_id
from statifier._slots import builder
from statifier.basichttp import Locations
from statifier.build import Chart
from statifier.chart.compiler import host_functions
from statifier.core import planner, position
from statifier.core.effects import SendDelayed
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.datamodel.host import HostFunction, HostFunctionError

from . import _journal
from ._answers import SUPERSEDED, LiveAnswer
from ._armed import CANCELLED, Armed, decode_armed
from ._charts import Charts
from ._children import ChildStart, check_fan_out, start_child
from ._db import KeyRace, transaction
from ._drive import Drive
from ._errors import (
    ChartNotRegistered,
    ChartRetired,
    CorruptExecution,
    ExecutionExists,
    ExecutionIdNotFree,
    ExecutionNotFound,
    IdentityMismatch,
    InvalidArgument,
    InvalidTransition,
    NeedsMigration,
    PositionTooLarge,
    StalePosition,
    UnstorablePosition,
)
from ._executor import (
    EarlierTimers,
    EffectExecutor,
    HostHook,
    LoggingHost,
    TimerBatches,
    TimersSent,
)
from ._group import StepGroups
from ._history_reads import HistoryMethods
from ._invoked import NOT_FROM_PARENT, InvokedCharts, from_parent, invoked_by
from ._journal import Draft
from ._limits import MAX_ID_LENGTH, MAX_IDENTITY_LENGTH, Limits
from ._messages import FROM_PARENT, NO_MESSAGE, Mailbox, MailboxExecutor
from ._records import (
    STATUSES,
    TERMINAL,
    AlreadyApplied,
    Decline,
    Declined,
    Discarded,
    Execution,
    ExecutionStatus,
    Page,
    ParentLink,
    Stepped,
    StepResult,
)
from ._revisions import RevisionMethods
from ._rows import (
    StoredPosition,
    check_execution_id,
    check_key,
    check_text,
    decode_execution,
    decode_position,
    decode_stored,
    encode_json_object,
)
from ._settlement import FanOut, FanOutExecutor, FanOutKey, Policy, Settlement
from ._sql import check_prefix, statement
from ._stepping import (
    STORE_ARRAYS,
    Begun,
    Locked,
    Ready,
    begun_record,
    one_row_values,
    ready_record,
)
from ._traced import event_name, traced
from ._wait import WaitMethods
from .history import EntryKind, History, TriggerSource, current_trigger, triggered_by

_DriveAction = Callable[[Drive], Awaitable[Decline | None]]
"""What a keyed step does with the locked execution's drive (None: store it)."""

StepObserver = Callable[[Stepped], None]
"""Called with every drive this ``Executions`` committed (create, step, cancel), whichever
caller or worker made it: the row, the new position and every effect in order. For audit
trails, tracing and tests; it runs after the transaction (with ``conn=``: after the
savepoint), and what it raises is logged, never undoes the step."""

logger = logging.getLogger("statifier_persistence")

EventBuilder = Callable[[MachineState], Event | Decline]
"""Builds the event from the locked position, or declines (e.g. a late invocation answer)."""


@dataclass(frozen=True, slots=True)
class _Tree:
    """Where a new execution sits in its tree of invoked charts (a top by default), the
    caller context of the ``<invoke>`` that started it, and whether its chart is
    registered under its name (inline ``<content>`` is not)."""

    root: str | None = None
    depth: int = 0
    invoke_context: str | None = None
    named: bool = True


class _WithParent:
    """The routes of an invoked chart: its host's, and ``#_parent`` (its parent's mailbox)."""

    __slots__ = ("_routes",)

    def __init__(self, routes: Container[str]) -> None:
        self._routes = routes

    def __contains__(self, target: object) -> bool:
        return target == planner.PARENT or target in self._routes


MIN_POSITION_KEY_BYTES = 16
"""The shortest position key ``statifier.core.position`` accepts."""

_NO_POSITION = -1
"""A position bound no position meets: reads that need no position do not transfer it."""

_NO_KEY: Final = ""
"""The step key a keyless read asks about: none is empty (``check_key``)."""

_SteppedBuilder: Final = builder(Stepped)

_UNREAD = StoredPosition(b"", None, None)
"""What a read that did not transfer the position has of it."""


class Executions(RevisionMethods, HistoryMethods, WaitMethods):
    """Durable executions in PostgreSQL (tables from ``statifier_persistence.install``).

    ``pool`` gives connections to calls without ``conn=`` (None: every call passes one).
    ``executor`` performs durable effects in each step's transaction (``statifier_oban``
    ships one for oban jobs); ``host`` gets the rest (default ``LoggingHost``). ``prefix``
    is the schema of the tables; ``limits`` bounds what charts, callers and storage control.
    ``position_key`` (the host's secret, at least 16 bytes) makes every stored position's
    digest an HMAC only a holder of the key can recompute, so a position written into the
    table by anyone else is refused (``CorruptExecution``); every process stepping the
    executions needs the same key. ``functions`` are the host functions registered charts
    are compiled with (see ``statifier.compile``): every process stepping the executions
    needs the same ones, and a chart calling any other is refused when registered
    (``ChartUnusable``). ``observer`` (a ``StepObserver``) sees every drive
    this instance commits, with its effects. ``history`` (a
    ``statifier_persistence.history.History``, or a bool) says whether every change writes
    a history entry (on by default). ``basichttp`` (a ``statifier.basichttp.Locations``)
    gives every execution it creates a BasicHTTP location,
    ``_ioprocessors['basichttp']['location']`` (SCXML D.2), fixed for its life: the URL
    at which the host's app (``statifier_web``) takes POSTs for it; every process that
    creates executions needs the same one. ``group_commit`` (on by default) lets keyed
    steps without ``conn=`` that arrive together (a worker's jobs fetched at once) share
    one transaction, each still answered as if alone (ADR 32). Chart revisions
    (``revisions``, ``migrate``, ``park_all``, ``retire``...) are ``RevisionMethods``';
    ``history`` and ``prune_history`` are ``HistoryMethods``'; ``wait`` and ``follow``
    ``WaitMethods``'.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any] | None = None,
        *,
        executor: EffectExecutor,
        host: HostHook | None = None,
        prefix: str = "public",
        limits: Limits | None = None,
        position_key: bytes | None = None,
        observer: StepObserver | None = None,
        functions: Mapping[str, HostFunction] | None = None,
        history: History | bool = True,
        basichttp: Locations | None = None,
        group_commit: bool = True,
    ) -> None:
        if not isinstance(executor, EffectExecutor):
            raise InvalidArgument(f"executor must implement EffectExecutor, not {executor!r}")
        self._pool = pool
        self._executor = executor
        self._host: HostHook = host if host is not None else LoggingHost()
        self._prefix = check_prefix(prefix)
        self._limits = limits if limits is not None else Limits()
        try:
            registry = host_functions(functions)
        except HostFunctionError as exc:
            raise InvalidArgument(f"functions: {exc}") from None
        self._charts = Charts(self._prefix, self._limits, registry)
        if position_key is not None and (
            not isinstance(position_key, bytes) or len(position_key) < MIN_POSITION_KEY_BYTES
        ):
            raise InvalidArgument(
                f"position_key must be bytes, at least {MIN_POSITION_KEY_BYTES} of them"
            )
        self._position_key = position_key
        self._observer = observer
        self._settlement = Settlement(self._prefix, self._limits, executor)
        if isinstance(history, bool):
            history = History(enabled=history)
        if not isinstance(history, History):
            raise InvalidArgument(f"history must be a History or a bool, not {history!r}")
        self._history = history
        if basichttp is not None and not isinstance(basichttp, Locations):
            raise InvalidArgument(f"basichttp must be a basichttp Locations, not {basichttp!r}")
        self._basichttp = basichttp
        self._mailbox: Mailbox | None = None
        self._invoked: InvokedCharts | None = None
        if isinstance(executor, MailboxExecutor):
            self._mailbox = Mailbox(self._prefix, self._limits, executor)
            self._invoked = InvokedCharts(self, self._mailbox)
        self._batches = executor if isinstance(executor, TimerBatches) else None
        self._earlier = executor if isinstance(executor, EarlierTimers) else None
        self._groups = StepGroups(self) if group_commit else None

    @property
    def pool(self) -> AsyncConnectionPool[Any] | None:
        """The pool calls without ``conn=`` take their connection from."""
        return self._pool

    @property
    def prefix(self) -> str:
        """The schema holding the tables."""
        return self._prefix

    @property
    def limits(self) -> Limits:
        """The bounds in force."""
        return self._limits

    @property
    def executor(self) -> EffectExecutor:
        """The executor performing every step's durable effects."""
        return self._executor

    @property
    def basichttp(self) -> Locations | None:
        """The BasicHTTP locations of the executions this instance creates (None: none)."""
        return self._basichttp

    @property
    def history_settings(self) -> History:
        """Whether changes write history, and the bounds of reading it."""
        return self._history

    # -- charts ----------------------------------------------------------------------

    async def register(self, chart: Machine, *, conn: AsyncConnection[Any] | None = None) -> str:
        """Store ``chart`` in the registry (idempotent) and return its identity.

        ``create`` registers its chart itself; this is for registering ahead of time.
        """
        _check_machine(chart)
        async with transaction(self._pool, conn) as db:
            await self._charts.register(db, chart)
        return chart.identity

    # -- create, step, cancel --------------------------------------------------------

    @overload
    async def create(
        self,
        chart: Machine | str,
        *,
        execution_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        datamodel: Mapping[str, Any] | None = None,
        parent: ParentLink | None = None,
        caller_context: Any = None,
        trace: bool = False,
        key: None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> Stepped: ...

    @overload
    async def create(
        self,
        chart: Machine | str,
        *,
        execution_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        datamodel: Mapping[str, Any] | None = None,
        parent: ParentLink | None = None,
        caller_context: Any = None,
        trace: bool = False,
        key: str,
        conn: AsyncConnection[Any] | None = None,
    ) -> Stepped | AlreadyApplied: ...

    async def create(
        self,
        chart: Machine | str,
        *,
        execution_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        datamodel: Mapping[str, Any] | None = None,
        parent: ParentLink | None = None,
        caller_context: Any = None,
        trace: bool = False,
        key: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> Stepped | AlreadyApplied:
        """Run the chart's initial drive as execution ``execution_id`` (a fresh
        ``sess_...`` id by default; it is the chart's ``_sessionid``) and store it.

        ``chart`` is a compiled ``Machine`` (registered here if it is not yet), the
        identity of a registered revision (or of its source bytes), or the name of a
        registered chart: its most recently registered revision that is not retired
        (``ChartNotRegistered`` if there is none, ``ChartRetired`` for a retired identity).
        ``metadata`` is the host's JSON object (queryable by ``list``); ``datamodel`` seeds
        variables; ``parent`` links a child execution to its invocation; ``caller_context``
        is the first macrostep's opaque host term. ``trace`` makes every step of the
        execution also produce the core's trace effects (microsteps, dequeued events), for
        an ``observer`` to see. Raises ``ExecutionExists`` for a taken id (nothing written).

        ``key`` (an idempotency key, as ``step`` takes; it needs an ``execution_id``) is
        recorded as the key of the initial drive: a create of the same id with the same key
        answers ``AlreadyApplied`` (a retried request) instead of raising
        ``ExecutionExists``. Without ``key`` the answer is always ``Stepped``.
        """
        tracer = instrumentation.current
        if tracer is not None:
            work = self._create_checked(
                chart, execution_id, metadata, datamodel, parent, caller_context, trace, key, conn
            )
            name = chart.name if isinstance(chart, Machine) else None
            return await traced(tracer, instrumentation.CREATE, work, chart=name)
        return await self._create_checked(
            chart, execution_id, metadata, datamodel, parent, caller_context, trace, key, conn
        )

    async def _create_checked(
        self,
        chart: Machine | str,
        execution_id: str | None,
        metadata: Mapping[str, Any] | None,
        datamodel: Mapping[str, Any] | None,
        parent: ParentLink | None,
        caller_context: Any,
        trace: bool,
        key: str | None,
        conn: AsyncConnection[Any] | None,
    ) -> Stepped | AlreadyApplied:
        if not isinstance(chart, str):
            _check_machine(chart)
        elif not chart or len(chart) > MAX_IDENTITY_LENGTH:
            raise InvalidArgument(f"chart must be a chart name or identity, not {chart!r:.100}")
        if key is not None:
            if execution_id is None:
                raise InvalidArgument("a keyed create needs an execution_id")
            key = check_key(key)
        execution_id = (
            new_session_id() if execution_id is None else check_execution_id(execution_id)
        )
        meta = encode_json_object(metadata or {}, "metadata", self._limits.max_metadata_bytes)
        seed = dict(datamodel) if datamodel is not None else None
        if parent is not None:
            _check_parent(parent)
        stepped = await self._create(
            chart, execution_id, meta, seed, parent, caller_context, trace, conn, _Tree(), key=key
        )
        assert stepped is not None  # noqa: S101 - answered at once without ``after``
        return stepped

    async def _create_child(
        self,
        machine: Machine,
        child_id: str,
        parent: ParentLink,
        datamodel: Mapping[str, Any],
        tree: tuple[str, int],
        invoke_context: str | None,
        trace: bool,
        drive: Drive,
    ) -> None:
        """Create an invoked chart's child execution in the step of ``drive``, its parent
        (``_invoked``): in a savepoint, placed in its tree, its chart registered by
        identity only (inline content: its name is not the host's; a chart a ``src``
        names is registered already). Its history entry is ``created`` by the ``parent``;
        its reports wait for the parent's commit."""
        root, depth = tree
        place = _Tree(root, depth, invoke_context, named=False)
        with triggered_by(replace(current_trigger(), source="parent")):
            await self._create(
                machine, child_id, "{}", dict(datamodel), parent, None, trace, drive.conn,
                place, after=drive.started,
            )  # fmt: skip

    async def _create(
        self,
        chart: Machine | str,
        execution_id: str,
        meta: str,
        seed: dict[str, Any] | None,
        parent: ParentLink | None,
        caller_context: Any,
        trace: bool,
        conn: AsyncConnection[Any] | None,
        tree: _Tree,
        after: list[tuple[Execution, Drive, Draft | None]] | None = None,
        key: str | None = None,
    ) -> Stepped | AlreadyApplied | None:
        """Create and store the execution; its answer (None when ``after`` is given: the
        drive is added to it, to be answered once the enclosing step commits). With
        ``key``, a taken id whose creation applied that key answers ``AlreadyApplied``."""
        async with transaction(self._pool, conn) as db:
            machine, identity = await self._chart_for(db, chart, execution_id, tree.named)
            params = {
                **self._bounds(),
                "id": execution_id,
                "identity": identity,
                "name": machine.name,
                "version": machine.version,
                "metadata": meta,
                "parent_id": parent.execution_id if parent else None,
                "parent_invoke_id": parent.invoke_id if parent else None,
                "child_index": parent.index if parent else None,
                "tree_root": tree.root,
                "tree_depth": tree.depth,
                "invoke_context": tree.invoke_context,
            }
            cursor = await db.execute(statement("insert_execution", self._prefix), params)
            row = await cursor.fetchone()
            if row is None:
                if key is not None:
                    existing, _, applied = await self._read(
                        db, execution_id, lock="", with_position=False, key=key
                    )
                    if applied:
                        return AlreadyApplied(existing, key)
                raise ExecutionExists(execution_id)
            if self._earlier is not None and await self._earlier.earlier_timers(db, execution_id):
                raise ExecutionIdNotFree(execution_id)
            execution = decode_execution(row, self._limits)
            routes = self._routes(execution)
            state, effects = initialize(
                machine,
                session_id=execution_id,
                max_macrostep_rounds=self._limits.max_macrostep_rounds,
                datamodel=seed,
                invoke_types=self._executor.invoke_types,
                routes=routes,
                caller_context=caller_context,
                trace=trace,
                basichttp_location=(
                    self._basichttp.location(execution_id) if self._basichttp else None
                ),
            )
            drive = self._drive(db, execution, state, routes)
            await drive.initial(effects)
            chart_detail = {"identity": identity, "name": machine.name, "version": machine.version}
            draft = self._draft(drive, "created", detail={"chart": chart_detail})
            [stored] = await self._store_ready(db, [self._ready(drive, draft, key)])
            await self._settlement.after_store(db, execution.status, stored)
        if after is not None:
            after.append((stored, drive, draft))
            return None
        return self._stepped(stored, drive, draft)

    async def _chart_for(
        self,
        db: AsyncConnection[Any],
        chart: Machine | str,
        execution_id: str,
        named: bool = True,
    ) -> tuple[Machine, str]:
        """The machine ``create`` runs and the identity its row names, the revision locked
        against retirement until the transaction ends (``named``: see ``Charts.register``)."""
        if isinstance(chart, Machine):
            await self._charts.register(db, chart, named=named)
            return chart, chart.identity
        try:
            revision = await self._revision(db, chart, "FOR SHARE")
        except ChartNotRegistered:
            latest = await self._charts.latest(db, chart)
            revision = await self._revision(db, latest, "FOR SHARE")
        if revision.retired_at is not None:
            raise ChartRetired(revision.identity)
        machine = await self._charts.machine(db, revision.identity, execution_id)
        return machine, revision.identity

    async def step(
        self,
        execution_id: str,
        event: Event | EventBuilder,
        *,
        key: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> StepResult:
        """Drive ``event`` into the execution in one transaction; see the module docstring.

        ``event`` is an ``Event``, or a builder called with the locked position that
        returns the event or a ``Decline``. With ``key`` (a fired job's id, a caller's
        idempotency key; at most 200 characters), a key applied before answers
        ``AlreadyApplied`` and nothing is driven; otherwise the key is recorded with the
        step. A terminal execution answers ``Discarded``; an unknown id raises
        ``ExecutionNotFound``, a parked one ``NeedsMigration``, a chart or position that
        is not the row's ``IdentityMismatch``; an executor's failure is raised as it is.
        """
        if not isinstance(event, Event) and not callable(event):
            raise InvalidArgument(f"event must be an Event or a builder, not {event!r}")

        async def drive_event(drive: Drive) -> Decline | None:
            built = event if isinstance(event, Event) else event(drive.state)
            if isinstance(built, Decline):
                return built
            if not isinstance(built, Event):
                raise InvalidArgument(f"the event builder returned {built!r}, not an Event")
            if isinstance(event, LiveAnswer) and await self._superseded(drive, event):
                return Decline(SUPERSEDED)
            await drive.event(built)
            return None

        tracer = instrumentation.current
        if tracer is not None:
            work = self._keyed(execution_id, key, conn, drive_event, "event")
            name = event_name(event)
            return await traced(
                tracer, instrumentation.STEP, work, execution_id=execution_id, event=name
            )
        return await self._keyed(execution_id, key, conn, drive_event, "event")

    async def fire(
        self,
        execution_id: str,
        delayed: SendDelayed,
        *,
        key: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> StepResult:
        """A delayed send the execution armed has fired: deliver it, in one transaction.

        It goes where ``statifier.core.planner.fire`` says, as an immediate send would: to
        the execution itself (a macrostep), its internal queue (``#_internal``), a live
        invocation, or the host hook (``#_parent``, ``#_scxml_<id>``). Only a send the
        execution still has armed is delivered, checked under the row lock: one cancelled
        since it was armed (a ``<cancel>``, its state left, re-armed after a cancel) answers
        ``Declined(reason="cancelled")`` and drives nothing (SCXML 6.3), whenever its job
        ran. Keys, liveness and refusals as for ``step``.
        """
        if not isinstance(delayed, SendDelayed):
            raise InvalidArgument(f"delayed must be a SendDelayed, not {delayed!r}")

        async def drive_fired(drive: Drive) -> Decline | None:
            return None if await drive.fired(delayed) else Decline(CANCELLED)

        tracer = instrumentation.current
        if tracer is not None:
            work = self._keyed(execution_id, key, conn, drive_fired, "fired")
            facts = {"send_id": delayed.send_id, "ordinal": delayed.ordinal}
            return await traced(
                tracer,
                instrumentation.FIRE,
                work,
                execution_id=execution_id,
                event=delayed.event,
                **facts,
            )
        return await self._keyed(execution_id, key, conn, drive_fired, "fired")

    async def send_failed(
        self,
        execution_id: str,
        failure: Event,
        *,
        key: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> StepResult:
        """A send the execution made failed after the step that made it (a BasicHTTP POST
        that was refused or failed for good): raise ``failure``, an ``error.*`` event from
        ``statifier.core.planner`` (``post_failed``), in the chart, in one transaction
        (SCXML 6.2: on its internal queue). Keys, liveness and refusals as for ``step``;
        the history entry is an ``event``."""
        if not isinstance(failure, Event) or not failure.name.startswith("error."):
            raise InvalidArgument(f"failure must be an error event, not {failure!r:.200}")

        async def drive_failed(drive: Drive) -> Decline | None:
            await drive.failed(failure)
            return None

        return await self._keyed(execution_id, key, conn, drive_failed, "event")

    async def receive(
        self,
        execution_id: str,
        *,
        key: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> StepResult:
        """Apply the oldest message in the execution's mailbox, in one transaction: an
        event or the ``done`` of a chart it invoked, an event or the ``cancel`` of the
        parent that invoked it (see ``_invoked``). The message is taken (deleted) by the
        transaction that applies it, so it applies once, in the order it was sent. Its
        history entry is an ``event`` (or ``cancelled``) triggered by the ``parent``, or
        by the ``invocation`` for a child's message, the job's id kept.

        Answers ``Declined("no_message")`` when the mailbox is empty (another delivery took
        it), ``Declined`` with ``invocation_not_live`` or ``invocation_superseded`` for a
        message from a child that is no longer its invocation's (the message is dropped),
        ``Discarded`` when the execution finished (its mailbox is emptied). A parked
        execution raises ``NeedsMigration`` (the message waits). Keys as for ``step``.
        """
        execution_id = check_execution_id(execution_id)
        if key is not None:
            key = check_key(key)
        if self._invoked is None:
            raise InvalidArgument(
                "the executor does not run invoked charts (it implements no MailboxExecutor)"
            )
        try:
            try:
                return await self._receive(execution_id, key, conn)
            except KeyRace:
                return await self._receive(execution_id, key, conn)
        except ExecutionNotFound:
            async with transaction(self._pool, conn) as db:
                await self._invoked.mailbox.purge(db, execution_id)
            raise

    async def _receive(
        self, execution_id: str, key: str | None, conn: AsyncConnection[Any] | None
    ) -> StepResult:
        assert self._invoked is not None  # noqa: S101 - receive checked it
        mailbox = self._invoked.mailbox
        async with transaction(self._pool, conn) as db:
            execution, persisted, applied = await self._locked(db, execution_id, key)
            if key is not None and applied:
                return AlreadyApplied(execution, key)
            message = await mailbox.take(db, execution_id)
            if message is None:
                return Declined(execution, NO_MESSAGE)
            if execution.status == "needs_migration":
                raise NeedsMigration(execution)  # rolled back: the message waits
            cancel = message.kind == "cancel"
            ended = ("completed", "cancelled") if cancel else TERMINAL
            if execution.status in ended:
                await mailbox.purge(db, execution_id)
                return Discarded(execution, execution.status)
            routes = self._routes(execution)
            state = await self._position(db, execution, persisted, routes)
            drive = self._drive(db, execution, state, routes, persisted)
            if cancel:
                if not from_parent(execution, message):
                    return Declined(execution, NOT_FROM_PARENT)
                await drive.cancel()
            else:
                built = self._invoked.accept(drive, message)
                if isinstance(built, Decline):
                    return Declined(execution, built.reason)
                await drive.event(built)
            source: TriggerSource = "parent" if message.kind in FROM_PARENT else "invocation"
            with triggered_by(replace(current_trigger(), source=source)):
                draft = self._draft(drive, "cancelled" if cancel else "event", key=key)
            [stored] = await self._store_ready(db, [self._ready(drive, draft, key)])
            await self._settlement.after_store(db, execution.status, stored)
        return self._stepped(stored, drive, draft)

    async def _keyed(
        self,
        execution_id: str,
        key: str | None,
        conn: AsyncConnection[Any] | None,
        action: _DriveAction,
        kind: EntryKind,
    ) -> StepResult:
        execution_id = check_execution_id(execution_id)
        if key is not None:
            key = check_key(key)
            if conn is None and self._groups is not None:
                return await self._groups.step(execution_id, key, action, kind)
        return await self._single(execution_id, action, key, conn, kind)

    async def _single(
        self,
        execution_id: str,
        action: _DriveAction,
        key: str | None,
        conn: AsyncConnection[Any] | None,
        kind: EntryKind,
    ) -> StepResult:
        """A step in a transaction of its own (a savepoint of the caller's, with ``conn``)."""
        try:
            return await self._step(execution_id, action, key, conn, kind)
        except KeyRace:
            # A concurrent step applied this key while this one waited for the row lock
            # (the key check read the snapshot from before the wait). This transaction
            # rolled back; checked again, the key is seen.
            return await self._step(execution_id, action, key, conn, kind)

    async def _step(
        self,
        execution_id: str,
        action: _DriveAction,
        key: str | None,
        conn: AsyncConnection[Any] | None,
        kind: EntryKind,
    ) -> StepResult:
        async with transaction(self._pool, conn) as db:
            locked = await self._locked(db, execution_id, key)
            begun = await self._begin(db, locked, key)
            if not isinstance(begun, Begun):
                return begun
            ready = await self._run(db, begun, action, kind, key)
            if not isinstance(ready, Ready):
                return ready
            [stored] = await self._store_ready(db, [ready])
            await self._settlement.after_store(db, begun.execution.status, stored)
        return self._stepped(stored, ready.drive, ready.draft)

    async def _begin(
        self, db: AsyncConnection[Any], locked: Locked, key: str | None
    ) -> Begun | AlreadyApplied | Discarded:
        """Whether the locked execution takes the step, and its position if it does.
        Reads only: what it raises concerns this execution alone."""
        execution, persisted, applied = locked
        if key is not None and applied:
            return AlreadyApplied(execution, key)
        if execution.status in TERMINAL:
            return Discarded(execution, execution.status)
        if execution.status == "needs_migration":
            raise NeedsMigration(execution)
        routes = self._routes(execution)
        state = await self._position(db, execution, persisted, routes)
        return begun_record(execution, persisted, state, routes)

    async def _run(
        self,
        db: AsyncConnection[Any],
        begun: Begun,
        action: _DriveAction,
        kind: EntryKind,
        key: str | None,
    ) -> Ready | Declined:
        """Drive the step: its effects performed on ``db``, ready to store (or declined)."""
        drive = self._drive(db, begun.execution, begun.state, begun.routes, begun.persisted)
        declined = await action(drive)
        if declined is not None:
            return Declined(begun.execution, declined.reason)
        draft = self._draft(drive, kind, key=key)
        return self._ready(drive, draft, key)

    async def _superseded(self, drive: Drive, answer: LiveAnswer) -> bool:
        """Whether the invocation answering was started again after its generation (the
        row is locked: no re-entry commits meanwhile). The armed list knows the live
        invocation's generation; for one it does not know (started before rows kept it),
        only a ``FanOutExecutor`` can tell."""
        invoke_id = answer.answer.invokeid
        if answer.generation is None or invoke_id is None:
            return False
        live = drive.armed.generation(invoke_id)
        if live is not None:
            return live != answer.generation
        if not isinstance(self._executor, FanOutExecutor):
            return False
        key = FanOutKey(drive.execution.id, invoke_id, answer.generation)
        return await self._executor.superseded(drive.conn, key)

    async def cancel(
        self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> Stepped | Discarded:
        """Run the chart's cancel (every onexit; its invocations stopped) and store it as
        ``cancelled``. A ``completed`` or ``cancelled`` execution answers ``Discarded``; a
        ``failed`` one is cancelled (its position is still running); a parked one raises
        ``NeedsMigration``.
        """
        tracer = instrumentation.current
        if tracer is not None:
            work = self._cancel(execution_id, conn)
            return await traced(tracer, instrumentation.CANCEL, work, execution_id=execution_id)
        return await self._cancel(execution_id, conn)

    async def _cancel(
        self, execution_id: str, conn: AsyncConnection[Any] | None
    ) -> Stepped | Discarded:
        execution_id = check_execution_id(execution_id)
        async with transaction(self._pool, conn) as db:
            execution, persisted, _ = await self._locked(db, execution_id)
            if execution.status in ("completed", "cancelled"):
                return Discarded(execution, execution.status)
            if execution.status == "needs_migration":
                raise NeedsMigration(execution)
            routes = self._routes(execution)
            state = await self._position(db, execution, persisted, routes)
            drive = self._drive(db, execution, state, routes, persisted)
            await drive.cancel()
            draft = self._draft(drive, "cancelled")
            [stored] = await self._store_ready(db, [self._ready(drive, draft)])
            await self._settlement.after_store(db, execution.status, stored)
        return self._stepped(stored, drive, draft)

    # -- parking ---------------------------------------------------------------------

    async def park(
        self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> Execution:
        """Make an ``active`` execution ``needs_migration``: it takes no event (its timers
        wait, snoozed) until ``unpark``. Raises ``InvalidTransition`` from other statuses."""
        return await self._set_status(execution_id, "active", "needs_migration", conn)

    async def unpark(
        self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> Execution:
        """Make a parked (``needs_migration``) execution ``active`` again."""
        return await self._set_status(execution_id, "needs_migration", "active", conn)

    async def _set_status(
        self,
        execution_id: str,
        expected: ExecutionStatus,
        wanted: ExecutionStatus,
        conn: AsyncConnection[Any] | None,
    ) -> Execution:
        execution_id = check_execution_id(execution_id)
        async with transaction(self._pool, conn) as db:
            execution, _, _ = await self._locked(db, execution_id, with_position=False)
            if execution.status != expected:
                raise InvalidTransition(execution_id, execution.status, wanted)
            kind: EntryKind = "parked" if wanted == "needs_migration" else "unparked"
            draft = (
                _journal.draft(execution, kind, status=wanted) if self._history.enabled else None
            )
            cursor = await db.execute(
                statement("set_status", self._prefix),
                {**self._bounds(), **self._journal(draft), "id": execution_id, "status": wanted},
            )
            row = await cursor.fetchone()
        assert row is not None  # noqa: S101 - the row is locked by this transaction
        return decode_execution(row, self._limits)

    # -- fan-outs (see _children and _settlement) --------------------------------------

    async def start_child(
        self,
        fan_out: FanOutKey,
        index: int,
        count: int,
        *,
        chart: str,
        policy: Policy = "all",
        datamodel: Mapping[str, Any] | None = None,
        failed_states: Sequence[str] = (),
        caller_context: Any = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> ChildStart:
        """Create child ``index`` of ``count`` of ``fan_out``, idempotently: a start
        delivered again adopts the child it created (its id is derived from the fan-out
        and the index); an index outside ``0..count-1`` raises ``InvalidArgument``.

        The first start opens the fan-out: ``chart`` names the children's chart (the newest
        registered revision of that name, ``ChartNotRegistered`` if none), ``policy``
        (``all`` or ``first_error``) how it settles, ``failed_states`` the final states
        that count as a child's failure; later starts must agree on ``count`` and
        ``policy``. ``datamodel`` seeds the child's variables. No child is created when no
        one would take its answer (``ChildStart.outcome == "not_needed"``): the parent is
        gone or terminal, the invocation is not live, the fan-out is settled or abandoned.
        A parked parent raises ``NeedsMigration``. The executor must implement
        ``FanOutExecutor`` (``InvalidArgument`` otherwise).
        """
        return await start_child(
            self,
            fan_out,
            index,
            count,
            chart=chart,
            policy=policy,
            datamodel=datamodel,
            failed_states=failed_states,
            caller_context=caller_context,
            conn=conn,
        )

    async def fan_out_answer(
        self, fan_out: FanOutKey, *, conn: AsyncConnection[Any] | None = None
    ) -> Event | None:
        """The answer of a settled fan-out, for its parent (None while it is not settled,
        or when it was abandoned).

        ``done.invoke.<id>`` with every child's donedata in index order when no child
        failed; otherwise ``error.communication.invoke.<id>`` with ``reason``
        ``child_failed`` (``first_error``: the first failure, with its ``index``,
        ``execution_id`` and ``data``) or ``children_failed`` (``all``: the ``failed``
        indexes and every child's donedata as ``results``), or ``answer_too_large`` when
        the donedata together is over ``Limits.max_position_bytes``. Step it with
        ``live_answer``: a parent that left the invoking state declines it.
        """
        async with transaction(self._pool, conn) as db:
            return await self._settlement.answer(db, check_fan_out(fan_out))

    async def fan_outs(
        self, parent_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> list[FanOut]:
        """The execution's fan-outs (as a parent), oldest generation first: how many of
        their children finished, and whether each is open, settled or abandoned."""
        parent_id = check_execution_id(parent_id)
        async with transaction(self._pool, conn) as db:
            return await self._settlement.fan_outs(db, parent_id)

    async def unfinished_children(
        self, fan_out: FanOutKey, *, conn: AsyncConnection[Any] | None = None
    ) -> list[str]:
        """The ids of the fan-out's children that have not finished yet, in index order."""
        async with transaction(self._pool, conn) as db:
            return await self._settlement.unfinished_children(db, check_fan_out(fan_out))

    # -- reading ---------------------------------------------------------------------

    async def get(
        self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> Execution:
        """The execution's row (``ExecutionNotFound`` if there is none)."""
        execution_id = check_execution_id(execution_id)
        async with transaction(self._pool, conn) as db:
            execution, _, _ = await self._read(db, execution_id, lock="", with_position=False)
        return execution

    async def load(
        self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> tuple[Execution, MachineState]:
        """The execution's row and its position, loaded against its registered chart."""
        execution_id = check_execution_id(execution_id)
        async with transaction(self._pool, conn) as db:
            execution, persisted, _ = await self._read(
                db, execution_id, lock="", with_position=True
            )
            state = await self._position(db, execution, persisted, self._routes(execution))
        return execution, state

    async def list(
        self,
        *,
        status: ExecutionStatus | None = None,
        chart: str | None = None,
        revision: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        parent: str | None = None,
        limit: int = 100,
        after: str | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> Page:
        """Executions by id, filtered by status, chart name, chart revision (the identity
        the execution runs), metadata containment and parent (the children an execution's
        invocations started: invoked charts and fan-out children).

        ``limit`` is 1 to ``Limits.max_page_size``; pass the page's ``after`` to get the
        next page.
        """
        if status is not None and status not in STATUSES:
            raise InvalidArgument(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidArgument(f"limit must be an integer, not {limit!r}")
        if not 1 <= limit <= self._limits.max_page_size:
            raise InvalidArgument(f"limit must be in 1..{self._limits.max_page_size}, not {limit}")
        params = {
            **self._bounds(),
            **self._filters(chart, revision, metadata),
            "status": status,
            "after": check_execution_id(after) if after is not None else None,
            "parent": check_execution_id(parent) if parent is not None else None,
            "limit": limit,
        }
        async with transaction(self._pool, conn) as db:
            cursor = await db.execute(statement("list_executions", self._prefix), params)
            rows = await cursor.fetchall()
        executions = tuple(decode_execution(row, self._limits) for row in rows)
        more = len(executions) == limit
        return Page(executions, executions[-1].id if more else None)

    async def counts(
        self,
        *,
        chart: str | None = None,
        revision: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> dict[ExecutionStatus, int]:
        """How many executions are in each status (every status, in ``STATUSES`` order,
        zero included), filtered as ``list`` filters: by chart name, chart revision and
        metadata containment. It counts every matching row, so it costs a scan of them."""
        params = self._filters(chart, revision, metadata)
        async with transaction(self._pool, conn) as db:
            cursor = await db.execute(statement("count_executions", self._prefix), params)
            rows = await cursor.fetchall()
        found = {str(status): int(count) for status, count in rows}
        return {status: found.get(status, 0) for status in STATUSES}

    async def chart(self, chart: str, *, conn: AsyncConnection[Any] | None = None) -> Machine:
        """The compiled revision ``chart`` names, as ``create`` reads a name or identity:
        the identity of a registered revision (or of its source bytes), or the name of a
        registered chart (its most recently registered revision that is not retired).
        Raises ``ChartNotRegistered`` if none is, ``ChartRetired`` for a retired identity.
        For a host that looks at a chart before it starts an execution of it."""
        if not isinstance(chart, str) or not 0 < len(chart) <= MAX_IDENTITY_LENGTH:
            raise InvalidArgument(f"chart must be a chart name or identity, not {chart!r:.100}")
        async with transaction(self._pool, conn) as db:
            machine, _ = await self._chart_for(db, chart, f"chart {chart}")
        return machine

    def _filters(
        self, chart: Any, revision: Any, metadata: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """The checked filter parameters ``list`` and ``counts`` share."""
        if chart is not None and (not isinstance(chart, str) or len(chart) > MAX_IDENTITY_LENGTH):
            raise InvalidArgument(f"chart must be a chart name, not {chart!r}")
        if revision is not None and (
            not isinstance(revision, str) or len(revision) > MAX_IDENTITY_LENGTH
        ):
            raise InvalidArgument(f"revision must be a chart identity, not {revision!r}")
        return {
            "chart": chart,
            "revision": revision,
            "metadata": (
                encode_json_object(metadata, "metadata filter", self._limits.max_metadata_bytes)
                if metadata is not None
                else None
            ),
        }

    # -- the parts -------------------------------------------------------------------

    def _bounds(self) -> dict[str, int]:
        return {
            "max_metadata": self._limits.max_metadata_bytes,
            "max_position": self._limits.max_position_bytes,
            "max_outcome": self._limits.max_position_bytes,
        }

    async def _read(
        self,
        db: AsyncConnection[Any],
        execution_id: str,
        *,
        lock: str,
        with_position: bool,
        key: str | None = None,
    ) -> Locked:
        """The row, its position (if asked for: else an empty one) and whether ``key`` was
        applied to it."""
        # A keyless read asks about the empty key, which no step has: then the statement's
        # plan is the same with a key or without, and PostgreSQL keeps one generic plan
        # for it. A null key folded the key check away in a plan made for each call,
        # which it then preferred, planning the read again every time (about twice what
        # running it costs).
        asked = _NO_KEY if key is None else key
        params: dict[str, Any] = {**self._bounds(), "id": execution_id, "key": asked}
        if not with_position:
            params["max_position"] = _NO_POSITION
        # Results in binary: the position's bytes as they are, not hex to decode.
        query = statement("select_execution", self._prefix, lock=lock)
        cursor = await db.execute(query, params, binary=True)
        row = await cursor.fetchone()
        if row is None:
            raise ExecutionNotFound(execution_id)
        execution, stored, applied = self._decode_read(
            row, execution_id, with_position=with_position
        )
        return execution, stored, applied and key is not None

    def _decode_read(self, row: Any, execution_id: str, *, with_position: bool) -> Locked:
        """A row of ``select_execution.sql`` (or ``select_executions.sql``), checked."""
        execution = decode_execution(row, self._limits)
        if execution.id != execution_id:
            raise CorruptExecution(execution_id, f"the row answers to {execution.id!r}")
        stored = decode_position(row, execution_id, self._limits) if with_position else _UNREAD
        return execution, stored, bool(row[-1])

    async def _locked(
        self,
        db: AsyncConnection[Any],
        execution_id: str,
        key: str | None = None,
        *,
        with_position: bool = True,
    ) -> Locked:
        # NO KEY: a step never changes an id, and this lock, unlike FOR UPDATE, lets the
        # foreign-key checks of rows referencing the execution (FOR KEY SHARE) through.
        # Under FOR UPDATE a transaction that updated a fan-out's row twice (two children
        # of it counted in one group) waited on a step of the parent, which could be
        # waiting for that fan-out row: a deadlock (ADR 32).
        return await self._read(
            db, execution_id, lock="FOR NO KEY UPDATE", with_position=with_position, key=key
        )

    async def _locked_many(
        self, db: AsyncConnection[Any], asked: Sequence[tuple[str, str | None]]
    ) -> dict[str, Locked | Exception]:
        """Several executions locked at once, in id order (``select_executions.sql``), by
        ``(execution id, step key)``: each one's read, or what reading it raised
        (``ExecutionNotFound``, ``CorruptExecution``)."""
        if len(asked) == 1:
            # A group of one (a keyed step that came alone) takes the single read, whose
            # plan PostgreSQL keeps: a plan for arrays of ids it makes again at each call.
            [(execution_id, key)] = asked
            try:
                return {execution_id: await self._locked(db, execution_id, key)}
            except (ExecutionNotFound, CorruptExecution) as exc:
                return {execution_id: exc}
        params = {
            **self._bounds(),
            "ids": [execution_id for execution_id, _ in asked],
            "keys": [key for _, key in asked],
        }
        # Results in binary, as ``_read``'s.
        query = statement("select_executions", self._prefix)
        cursor = await db.execute(query, params, binary=True)
        found: dict[str, Locked | Exception] = {}
        for row in await cursor.fetchall():
            execution_id = row[0]
            try:
                found[execution_id] = self._decode_read(row, execution_id, with_position=True)
            except CorruptExecution as exc:
                found[execution_id] = exc
        for execution_id, _ in asked:
            if execution_id not in found:  # an error made only when it is one: most are found
                found[execution_id] = ExecutionNotFound(execution_id)
        return found

    async def _position(
        self,
        db: AsyncConnection[Any],
        execution: Execution,
        stored: StoredPosition,
        routes: Any,
    ) -> MachineState:
        machine = await self._charts.machine(db, execution.chart_identity, execution.id)
        try:
            state = position.loads(
                stored.blob,
                machine,
                invoke_types=self._executor.invoke_types,
                routes=routes,
                key=self._position_key,
            )
        except position.IdentityMismatch as exc:
            raise IdentityMismatch(execution.id, exc.expected, exc.found) from exc
        except position.PositionError as exc:
            raise CorruptExecution(execution.id, f"the stored position is unusable: {exc}") from exc
        if state.session_id != execution.id:
            raise CorruptExecution(
                execution.id, f"the stored position belongs to {state.session_id!r}"
            )
        if execution.status in ("active", "failed") and not state.running:
            raise CorruptExecution(execution.id, f"{execution.status}, but its position is done")
        if execution.status in ("completed", "cancelled") and state.running:
            raise CorruptExecution(execution.id, f"{execution.status}, but its position runs")
        found = (state.macrostep, state.round)
        if stored.counters is not None and found < stored.counters:
            raise StalePosition(execution.id, found, stored.counters)
        return state

    def _routes(self, execution: Execution) -> Container[str]:
        """The send targets the execution reaches besides itself and its invocations: its
        host's, and its parent when it is an invoked chart."""
        routes = self._host.routes(execution)
        if self._invoked is not None and invoked_by(execution) is not None:
            return _WithParent(routes)
        return routes

    def _drive(
        self,
        db: AsyncConnection[Any],
        execution: Execution,
        state: MachineState,
        routes: Any,
        stored: StoredPosition | None = None,
    ) -> Drive:
        """The drive of ``state``; ``stored`` (None: a new execution, which starts from no
        position) gives what is armed."""
        return Drive(
            execution=execution,
            state=state,
            start=None if stored is None else state,
            conn=db,
            executor=self._executor,
            host=self._host,
            limits=self._limits,
            routes=routes,
            status=execution.status,
            failure=dict(execution.failure) if execution.failure is not None else None,
            outcome=dict(execution.outcome) if execution.outcome is not None else None,
            settlement=self._settlement,
            invoked=self._invoked,
            armed=Armed() if stored is None else self._armed(execution, stored, state),
            batches=self._batches if self._batches and self._batches.timer_batches else None,
        )

    def _draft(
        self,
        drive: Drive,
        kind: EntryKind,
        *,
        key: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> Draft | None:
        """The history entry of a drive (None with history off)."""
        if not self._history.enabled:
            return None
        found: dict[str, Any] = dict(detail or {})
        ended = None
        if drive.status != drive.execution.status:
            if drive.failure is not None:
                found["failure"] = drive.failure
            if drive.outcome is not None:
                found["outcome"] = drive.outcome
                ended = drive.outcome["configuration"]
        return _journal.draft(
            drive.execution,
            kind,
            key=key,
            event=drive.driven,
            transition_taken=drive.transition_taken,
            unmatched=drive.unmatched,
            before=drive.start,
            after=drive.state,
            status=drive.status,
            ended=ended,
            effects=drive.effects,
            refused=frozenset(drive.refused),
            detail=found,
        )

    def _journal(self, draft: Draft | None) -> dict[str, Any]:
        """The parameters of ``sql/journal.sql`` for ``draft`` (None: write no entry)."""
        return {
            "schema": self._prefix,
            "kind": draft.kind if draft is not None else None,
            "entry": draft.body if draft is not None else None,
        }

    def _armed(self, execution: Execution, stored: StoredPosition, state: MachineState) -> Armed:
        """What the row says is armed. A row without an armed list, or whose position was
        stored after it by a version that kept none (its counters are behind the
        position's: a rolling upgrade), has an unknown past: every ordinal issued so far
        is driven as before (see ``_armed``)."""
        counters = stored.counters
        if stored.armed is None or counters is None or (state.macrostep, state.round) > counters:
            return Armed(since=state.timer_counter)

        def corrupt(message: str) -> CorruptExecution:
            return CorruptExecution(execution.id, message)

        return decode_armed(stored.armed, corrupt)

    def _ready(self, drive: Drive, draft: Draft | None, key: str | None = None) -> Ready:
        """What ``store_executions.sql`` stores of ``drive``, checked against the bounds."""
        execution_id = drive.execution.id
        try:
            blob = position.dumps(drive.state, key=self._position_key)
        except position.PositionError as exc:
            raise UnstorablePosition(execution_id, str(exc)) from exc
        if len(blob) > self._limits.max_position_bytes:
            raise PositionTooLarge(execution_id, len(blob), self._limits.max_position_bytes)
        failure = (
            encode_json_object(drive.failure, "failure", self._limits.max_metadata_bytes)
            if drive.failure is not None
            else None
        )
        try:
            outcome = (
                encode_json_object(drive.outcome, "outcome", self._limits.max_position_bytes)
                if drive.outcome is not None
                else None
            )
        except InvalidArgument as exc:  # the chart's donedata: its problem, not the caller's
            raise UnstorablePosition(execution_id, str(exc)) from exc
        state = drive.state
        armed = drive.armed
        if drive.status in TERMINAL:
            armed.clear()
        armed_text = armed.encode(state.invocations.values())
        armed_size = len(armed_text.encode("utf-8", "surrogatepass"))
        if armed_size > self._limits.max_position_bytes:
            raise UnstorablePosition(
                execution_id,
                f"the armed list is {armed_size} bytes, over the "
                f"{self._limits.max_position_bytes} limit",
            )
        row = (
            execution_id,
            blob,
            state.macrostep,
            state.round,
            armed_text,
            drive.status,
            failure,
            outcome,
            key,
            draft.kind if draft is not None else None,
            draft.body if draft is not None else None,
        )
        return ready_record(drive, draft, row)

    async def _store_ready(
        self, db: AsyncConnection[Any], ready: Sequence[Ready]
    ) -> tuple[Execution, ...]:
        """Store drives ready to be stored, with one statement for their timers
        (``TimerBatches``) and one for the rows (``store_executions.sql``), the mailboxes
        of those that ended emptied; the rows as stored, in order. A key a concurrent step
        applied first raises ``KeyRace`` (at the latest when the transaction ends)."""
        if len(ready) == 1:
            stepped = "row"  # a statement PostgreSQL plans once (``stepped_row.sql``)
            values: list[Any] = one_row_values(ready[0].row)
        else:
            stepped = "rows"
            values = [list(column) for column in zip(*(each.row for each in ready), strict=True)]
        params = {
            **self._bounds(),
            "schema": self._prefix,
            **dict(zip(STORE_ARRAYS, values, strict=True)),
        }
        # In pipeline mode the timer insert, the mailbox purges and the store travel to the
        # server together and come back together: one round trip for all of them (what
        # the timer insert reads back, while tracing, is read once the store's rows came).
        sent: TimersSent | None = None
        try:
            async with db.pipeline():
                if self._batches is not None:
                    timers = [timer for each in ready for timer in each.drive.timers]
                    for each in ready:
                        each.drive.timers.clear()
                    if timers:
                        sent = await self._batches.store_timers(db, timers)
                if self._invoked is not None:
                    for each in ready:
                        if each.drive.status in TERMINAL:
                            await self._invoked.mailbox.purge(db, each.drive.execution.id)
                query = statement("store_executions", self._prefix, stepped=stepped)
                cursor = await db.execute(query, params, binary=True)
                rows = {row[0]: row for row in await cursor.fetchall()}
                if sent is not None:
                    read, sent = sent, None
                    await read(None)
        except BaseException as exc:
            if sent is not None:
                await sent(exc)
            raise
        stored = []
        for each in ready:
            row = rows.get(each.drive.execution.id)
            assert row is not None  # noqa: S101 - locked (or inserted) by this transaction
            execution = each.drive.execution
            stored.append(decode_stored(execution, row, each.failure, each.outcome, self._limits))
        return tuple(stored)

    def _stepped(self, stored: Execution, drive: Drive, draft: Draft | None) -> Stepped:
        """The answer of a committed drive; its reports go to the host now (first those of
        the children it started, which committed with it)."""
        for child, started, child_draft in drive.started:
            self._stepped(child, started, child_draft)
        for effect in drive.reports:
            try:
                self._host.report(stored, effect)
            except Exception:
                logger.exception(
                    "%s: the host's report hook raised",
                    stored.id,
                    extra={"execution_id": stored.id},
                )
        answer = _SteppedBuilder()  # ``Stepped(...)``, built fast (``statifier._slots``)
        answer.execution = stored
        answer.state = drive.state
        answer.effects = tuple(drive.effects)
        answer.transition_taken = drive.transition_taken
        answer.unmatched = drive.unmatched
        answer._written = _journal.stored(draft, stored)
        answer.__class__ = Stepped
        stepped: Stepped = answer
        if self._observer is not None:
            try:
                self._observer(stepped)
            except Exception:
                logger.exception(
                    "%s: the step observer raised", stored.id, extra={"execution_id": stored.id}
                )
        return stepped


def _check_parent(parent: Any) -> None:
    if not isinstance(parent, ParentLink):
        raise InvalidArgument(f"parent must be a ParentLink, not {parent!r}")
    check_execution_id(parent.execution_id)
    check_text(parent.invoke_id, "parent invoke id", MAX_ID_LENGTH)
    index = parent.index
    if index is not None and (isinstance(index, bool) or not isinstance(index, int) or index < 0):
        raise InvalidArgument(f"a child index is an integer >= 0, not {index!r}")


def _check_machine(chart: Any) -> None:
    if not isinstance(chart, Machine):
        hint = " (compile a chart written in Python with its compile())"
        if not isinstance(chart, Chart):
            hint = ""
        raise InvalidArgument(
            f"chart must be a compiled statifier.Machine, not {type(chart).__name__}{hint}"
        )
