"""Charts invoked as child executions: ``<invoke type="scxml">`` in a durable execution.

The parent's step starts the child in its own transaction: the child's chart (an inline
``<content>``, compiled here and registered by identity; or the chart a ``src`` names,
through the revision's link, ``_charts``), a tree check (as deep and as large as live
sessions' trees may grow, ``Limits.tree``), then the child is created as an execution
under an id derived from the parent, the invoke id and the invocation's generation, its
datamodel seeded with the ``<param>``/``namelist`` values it declares, and its initial
drive runs, all in a savepoint: a child that cannot start leaves nothing, and the parent
hears ``error.communication.invoke.<id>`` (``planner.invocation_start_failed``), as live
sessions do. The armed list records the child's id under the invoke id.

Everything else between them is a message (``_messages``), written by the sender's step
with the job that delivers it, and applied by a step of the receiver
(``Executions.receive``):

* the child's ``<send target="#_parent">``, and ``done`` when it reaches a top-level final
  state (with its donedata), arrive in the parent as ``planner.from_invocation`` and
  ``planner.invocation_done`` events, so ``<finalize>`` runs on them before the parent's
  transitions see them; a message from a child that is no longer the live invocation of
  its invoke id (cancelled, finished, or superseded by a re-entry) is declined;
* the parent's ``<send target="#_<invokeid>">`` and its autoforwarded events arrive in
  the child as they were sent;
* leaving the invoking state (or the parent's end or cancel) sends the child ``cancel``:
  its cancel runs (onexit, its own children cancelled the same way, its timers cancelled).
  A child that finished first (its ``done`` waits in the parent's mailbox) is not
  cancelled, and its messages and ``done`` still arrive, as in live sessions, unless its
  invoke id starts again first (the state entered again): they are then superseded, never
  taken for the new child's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from psycopg import AsyncConnection
from statifier import Machine
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import Event
from statifier.runtime.invoke import InvocationLimitExceeded, SessionTree, child_seed

from ._answers import NOT_LIVE, SUPERSEDED
from ._charts import src_problem
from ._errors import (
    ChartConflict,
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    ExecutionExists,
    IdentityMismatch,
    InvalidArgument,
    MailboxFull,
    PositionTooLarge,
    UnstorablePosition,
)
from ._messages import UNREADABLE, Mailbox, Message
from ._records import Decline, Execution, ParentLink
from ._rows import derived_id
from ._sql import statement

if TYPE_CHECKING:
    from ._charts import Charts
    from ._drive import Drive
    from ._limits import Limits

CHILD_ID_PREFIX: Final = "inv_"
"""How the id of every invoked child execution begins."""

NOT_FROM_PARENT: Final = "not_from_parent"
"""The reason a message to a child from anyone but its parent is declined."""

TREE_LOCK_SPACE: Final = 0x5C1D
"""The advisory-lock key space (first key) of the lock that serializes a tree's starts."""

_REFUSALS: Final = (
    ChartConflict,
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    IdentityMismatch,
    InvalidArgument,
    PositionTooLarge,
    UnstorablePosition,
)
"""What a child's start may raise that is the child's problem, not the store's: the
parent hears it as a failed start (anything else fails the parent's step)."""


class StartRefused(Exception):
    """The child could not start (the message says why)."""


class InvokeHost(Protocol):
    """What starting a child needs of ``Executions``, which passes itself."""

    _charts: Charts

    @property
    def prefix(self) -> str:
        """The schema of the tables."""

    @property
    def limits(self) -> Limits:
        """The bounds in force."""

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
        """Create the child execution in ``drive``'s step (``ExecutionExists`` if the id is
        taken)."""

    async def get(
        self, execution_id: str, *, conn: AsyncConnection[Any] | None = None
    ) -> Execution:
        """An execution's row."""


def invoked_child_id(parent_id: str, invoke_id: str, generation: int) -> str:
    """The id of the child execution invocation ``invoke_id`` of ``parent_id`` started in
    macrostep ``generation``: ``inv_<20 hex digits>``, a digest of the three (so any step
    that would start it again derives the same id)."""
    return derived_id(CHILD_ID_PREFIX, parent_id, invoke_id, str(generation))


def invoked_by(execution: Execution) -> ParentLink | None:
    """The invocation that started ``execution`` as an invoked chart (None: it is no
    invoked child; a fan-out's children have an index and answer through their fan-out)."""
    parent = execution.parent
    return parent if parent is not None and parent.index is None else None


class InvokedCharts:
    """Starts children and carries messages between them; see the module docstring."""

    def __init__(self, host: InvokeHost, mailbox: Mailbox) -> None:
        self._host = host
        self.mailbox = mailbox

    # -- starting ----------------------------------------------------------------------

    async def start(self, drive: Drive, effect: fx.Invoke) -> str:
        """Start the child of ``effect`` in the drive's transaction; its id.
        ``StartRefused`` when it cannot start."""
        db = drive.conn
        parent = drive.execution
        child_id = invoked_child_id(parent.id, effect.invoke_id, effect.macrostep)
        tree = await self._tree(db, parent.id)
        machine = await self._machine(db, parent, effect, child_id)
        context = _context_text(effect.caller_context, self._host.limits.max_metadata_bytes)
        link = ParentLink(parent.id, effect.invoke_id)
        try:
            await self._host._create_child(
                machine,
                child_id,
                link,
                child_seed(machine, effect.params),
                tree,
                context,
                drive.state.trace,
                drive,
            )
        except ExecutionExists:
            existing = await self._host.get(child_id, conn=db)
            if existing.parent != link:
                message = f"execution {child_id!r} exists, and is not this child"
                raise StartRefused(message) from None
        except _REFUSALS as exc:
            raise StartRefused(str(exc)) from exc
        return child_id

    async def _tree(self, db: AsyncConnection[Any], parent_id: str) -> tuple[str, int]:
        """The child's tree (its top) and depth, once the tree may hold it (serialized with
        the tree's other starts until the transaction ends)."""
        prefix = self._host.prefix
        cursor = await db.execute(statement("select_tree", prefix), {"id": parent_id})
        row = await cursor.fetchone()
        root, depth = row if row is not None else (None, 0)
        top = root if isinstance(root, str) else parent_id
        await db.execute(statement("lock_tree", prefix), {"space": TREE_LOCK_SPACE, "root": top})
        limits = self._host.limits.tree
        cursor = await db.execute(
            statement("count_tree", prefix), {"root": top, "limit": limits.sessions + 1}
        )
        counted = await cursor.fetchone()
        tree = SessionTree(limits)
        tree.live = int(counted[0]) if counted is not None else 0
        child_depth = int(depth) + 1
        try:
            tree.check(child_depth)
        except InvocationLimitExceeded as exc:
            raise StartRefused(str(exc)) from exc
        return top, child_depth

    async def _machine(
        self, db: AsyncConnection[Any], parent: Execution, effect: fx.Invoke, child_id: str
    ) -> Machine:
        charts = self._host._charts
        if effect.content is not None:
            if not isinstance(effect.content, str):
                raise StartRefused("the <content> of an scxml invocation is not a chart's text")
            try:
                return charts.compile_text(effect.content, child_id)
            except ChartUnusable as exc:
                raise StartRefused(str(exc)) from exc
        if effect.src is None:
            raise StartRefused("an scxml invocation needs a chart: <content>, src or srcexpr")
        problem = src_problem(effect.src)
        if problem is not None:
            raise StartRefused(problem)
        identity = await charts.link(db, parent.chart_identity, effect.src)
        if identity is None:
            raise StartRefused(
                f"no chart is registered under the name {effect.src!r}"
                " (or every revision of it is retired)"
            )
        try:
            return await charts.machine(db, identity, child_id)
        except _REFUSALS as exc:
            raise StartRefused(str(exc)) from exc

    # -- messages out ------------------------------------------------------------------

    async def to_parent(self, drive: Drive, link: ParentLink, event: Event) -> str | None:
        """The child's ``<send target="#_parent">``: into the parent's mailbox (None), or
        why it cannot be."""
        return await self.mailbox.post(
            drive.conn,
            receiver=link.execution_id,
            sender=drive.scope,
            invoke_id=link.invoke_id,
            kind="to_parent",
            event=event,
        )

    async def done(self, drive: Drive, link: ParentLink, donedata: Any) -> None:
        """The child reached a top-level final state: ``done`` into the parent's mailbox.
        It must arrive: a full mailbox fails the step (``MailboxFull``), to be retried."""
        refused = await self.mailbox.post(
            drive.conn,
            receiver=link.execution_id,
            sender=drive.scope,
            invoke_id=link.invoke_id,
            kind="done",
            data=donedata,
        )
        if refused is not None:
            raise MailboxFull(link.execution_id, refused)

    async def to_child(
        self, drive: Drive, invoke_id: str, child_id: str, event: Event
    ) -> str | None:
        """The parent's ``<send target="#_<invokeid>">`` or autoforward: into the child's
        mailbox (None), or why it cannot be."""
        return await self.mailbox.post(
            drive.conn,
            receiver=child_id,
            sender=drive.scope,
            invoke_id=invoke_id,
            kind="to_child",
            event=event,
        )

    async def stop(self, drive: Drive, invoke_id: str, child_id: str) -> None:
        """The parent stopped the invocation: ``cancel`` into the child's mailbox. It must
        arrive (the child would run on): a full mailbox fails the step (``MailboxFull``).
        A child that finished first is not cancelled: its messages stay wanted."""
        if await self.mailbox.holds_done(drive.conn, drive.scope, child_id):
            drive.armed.finished[invoke_id] = child_id
            return
        refused = await self.mailbox.post(
            drive.conn, receiver=child_id, sender=drive.scope, invoke_id=invoke_id, kind="cancel"
        )
        if refused is not None:
            raise MailboxFull(child_id, refused)

    # -- messages in -------------------------------------------------------------------

    def accept(self, drive: Drive, message: Message) -> Event | Decline:
        """The event a ``to_parent``, ``done`` or ``to_child`` message delivers into the
        locked receiver, or why it is declined (the ``done`` of a child that finished
        first takes it off the armed list's ``finished``; once its invoke id started
        another invocation, that child is superseded)."""
        if message.problem is not None:
            return Decline(UNREADABLE)
        if message.kind == "to_child":
            if not from_parent(drive.execution, message):
                return Decline(NOT_FROM_PARENT)
            assert message.event is not None  # noqa: S101 - take() sets it for this kind
            return message.event
        invoke_id = message.invoke_id
        armed = drive.armed
        # A finished child answers the invocation it belonged to, not a later one of its
        # invoke id: the drive forgets it when the id starts again, and a row whose armed
        # list still names it beside another child (written before that) is told here.
        finished = (
            armed.finished.get(invoke_id) == message.sender_id
            and armed.children.get(invoke_id, message.sender_id) == message.sender_id
        )
        if not finished and invoke_id not in drive.state.invocations.values():
            return Decline(NOT_LIVE)
        if not finished and armed.children.get(invoke_id) != message.sender_id:
            return Decline(SUPERSEDED)
        if message.kind == "done":
            if finished:
                del armed.finished[invoke_id]
            return planner.invocation_done(
                invoke_id,
                message.data,
                child_session_id=message.sender_id,
                caller_context=message.invoke_context,
            )
        assert message.event is not None  # noqa: S101 - take() sets it for this kind
        return planner.from_invocation(message.event, invoke_id)


def from_parent(execution: Execution, message: Message) -> bool:
    """Whether ``message`` comes from the invocation that started ``execution``."""
    link = invoked_by(execution)
    return (
        link is not None
        and link.execution_id == message.sender_id
        and link.invoke_id == message.invoke_id
    )


def _context_text(caller_context: Any, limit: int) -> str | None:
    """The ``<invoke>``'s caller context as JSON for the child's row; dropped (None) when
    it is not JSON or over ``limit`` bytes (it is the host's opaque term, never needed)."""
    if caller_context is None:
        return None
    try:
        text = json.dumps(caller_context, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    if "\\u0000" in text:  # jsonb cannot hold it
        return None
    return text if len(text.encode("utf-8", "surrogatepass")) <= limit else None
