"""Live sessions: the pure core driven inside one asyncio task with an inbox.

A ``Session`` performs the core's effects in-process: sends are routed through the
process-wide registry, delayed sends use the event loop's timer (so they die with the
process: ``statifier_oban`` is what makes them durable), invocations go to per-session
handlers. Subscribers see every effect in order, then exactly one ``Halted``.

With a ``DelayedSends`` store, a step's delayed sends and cancels are stored *before* the
step is committed (its new state taken, its effects performed): a store that cannot answer
holds the step, retried until it can, and never falls back to an in-process timer; a
value the store refuses becomes ``error.communication`` in the chart (ADR 14). A store
that owns its sessions (``OwningDelayedSends``: durable timers take a lease) claims the
session before its first macrostep and lets it go when it halts; once another process
owns it (``OwnershipLost``, from the store or from an ``on_step`` save), the session
stops at once as ``superseded``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, Protocol, runtime_checkable

from statifier import instrumentation
from statifier.basichttp import (
    BasicHTTP,
    OutboundRequest,
    Poster,
    PostFailed,
    PostRefused,
    outbound,
    post_with_retries,
)
from statifier.budget import DEFAULT_LIMITS, MAX_LIMIT, MacrostepLimits
from statifier.chart.model import Machine
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.algorithm import (
    DEFAULT_MAX_MACROSTEP_ROUNDS,
    cancel,
    deliver_internal,
    handle_event,
    initialize,
)
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.errors import StatifierError
from statifier.ids import new_session_id
from statifier.runtime import registry
from statifier.runtime.invoke import (
    HandlerContext,
    ScxmlInvokeHandler,
    SessionInvokeHandler,
    SessionTree,
    SourceResolver,
    TreeLimits,
)
from statifier.values import brief

logger = logging.getLogger("statifier.runtime.session")

SessionStatusName = Literal["running", "done", "cancelled", "budget_exhausted", "superseded"]
HaltReason = Literal["done", "cancelled", "budget_exhausted", "stopped", "superseded"]

STORE_RETRY_FIRST_S = 0.05
"""The first wait before storing a step's delayed sends again (it doubles up to the max)."""

STORE_RETRY_MAX_S = 2.0
"""The longest wait between two attempts to store a held step's delayed sends."""

NO_HTTP_CLIENT: Final = "the session has no BasicHTTP client (Session.start(basichttp=...))"
"""Why a BasicHTTP send of a session without a client fails (``error.communication``)."""

CANCEL_MARKS = 4096
"""Send ids whose latest ``<cancel>`` a session remembers, to drop stale durable fires."""


@dataclass(frozen=True, slots=True)
class Halted:
    """The last message a subscriber receives from a session."""

    reason: HaltReason


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """A point-in-time view of a session."""

    session_id: str
    status: SessionStatusName
    configuration: tuple[str, ...]
    macrostep: int
    microstep: int
    round: int
    queued_events: int
    pending_timers: int
    store_error: str | None = None
    """Why the step in progress is held (its delayed sends could not be stored), or None."""


Message = fx.Effect | Halted
Subscriber = Callable[[str, Message], Awaitable[None] | None]


class DelayedSendRefused(StatifierError):
    """A ``DelayedSends`` store refuses a send (or cancel) for good: a value it cannot keep.

    The session arms nothing for it; the chart hears ``error.communication`` for the send
    id, as for a send that cannot be dispatched.
    """


class OwnershipLost(StatifierError):
    """Another process owns this session now (a ``DelayedSends`` store or an ``on_step``
    listener found out, e.g. a fenced position save).

    The session writes and performs nothing more: a step whose store found out is not
    committed, and the session stops at once (status ``superseded``,
    ``Halted("superseded")``).
    """


class DelayedSendsUnavailable(StatifierError):
    """``Session.start`` could not store its first macrostep's delayed sends; nothing runs."""


class DelayedSends(Protocol):
    """Takes over delayed sends from the session's in-process timers (e.g. durable jobs).

    ``schedule`` answers True when it took the send (the session then arms no timer of
    its own), False to leave it to the session. ``cancel`` sees every ``<cancel>``.

    Both run before the step that produced them is committed. Raising
    :class:`DelayedSendRefused` refuses that one effect; :class:`OwnershipLost` stops the
    session; anything else means the store cannot answer now: the session holds the step
    and tries again (with a growing wait, logged, ``SessionStatus.store_error`` set) until
    it can, so a durable send is never quietly kept in memory instead.
    """

    async def schedule(self, session: Session, effect: fx.SendDelayed) -> bool:
        """Store the delayed send; False leaves it to the session's own timer."""

    async def cancel(self, session: Session, effect: fx.Cancel) -> None:
        """Cancel what was stored under ``effect.send_id`` for this session."""


@runtime_checkable
class OwningDelayedSends(DelayedSends, Protocol):
    """A ``DelayedSends`` store that owns the sessions it serves (ADR 14): two processes
    must never run one session id, whose timers would merge and whose saves would race.

    ``Session.start`` calls ``claim`` before the session's first macrostep (before it is
    registered): raising refuses the start (another process owns the session, or the
    store cannot say). ``release`` is called once the session halted, whatever the
    reason (``superseded``: it is another's already). The store then fences its own
    writes; a host fences its position saves and raises ``OwnershipLost`` from
    ``on_step`` when they are refused.
    """

    async def claim(self, session: Session) -> None:
        """Own ``session`` from now on, or raise: the session does not start."""

    async def release(self, session: Session, reason: HaltReason) -> None:
        """``session`` halted (``reason``): give up what ``claim`` took."""


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """What a ``KeyedDelayedSends`` store answers when a session resumes."""

    cancel_marks: Mapping[str, int]
    """Send id -> ordinal of the latest stored ``<cancel>`` of that id that met a send
    already running (a worker had taken its job, so the cancel could not stop it). The
    session keeps the marks its position holds (ordinal at most its ``timer_counter``)
    and drops those sends when they fire."""

    timer_counter: int
    """The highest ordinal the store holds for the session id. The resumed session's
    sends and cancels take ordinals after it, so none of them is mistaken for a send of a
    step its position does not hold."""


@runtime_checkable
class KeyedDelayedSends(Protocol):
    """A ``DelayedSends`` store that keeps a session's sends across processes, keyed by
    session id and ordinal, told how each session it serves starts.

    Ordinals come from the session's position (``timer_counter``), so the store's keys
    and the position must agree. ``Session.start`` calls ``begin`` before a fresh
    session's first macrostep: its ordinals start at 1 again, and a store still holding
    sends of an earlier session under that id refuses it (their keys would be met).
    It calls ``resume`` before a resumed session's first macrostep, with its position's
    ``timer_counter``. A session stores a step's sends and cancels before the step takes
    effect, and its host saves the position after: a process that dies between the two
    leaves in the store the writes of a step the saved position does not hold (every
    ordinal such a step used is above the counter). The store puts its sends back as they
    stood at that position (it cancels the sends of later steps and restores those their
    cancels cancelled) and answers a :class:`ResumePoint`.
    """

    async def begin(self, session: Session) -> None:
        """A fresh ``session`` takes its id: raise if the store still holds sends under
        it (the session does not start); ``DelayedSendsUnavailable`` when it cannot say."""

    async def resume(self, session: Session, timer_counter: int) -> ResumePoint:
        """Set the session id's stored sends back to ``timer_counter``; see the class.
        Raise ``DelayedSendsUnavailable`` when the store cannot: the session does not
        start."""


StepListener = Callable[["Session"], Awaitable[None] | None]
"""Called after each step (``on_step``): to save the position, typically. It may raise
``OwnershipLost`` (its save was refused: another process owns the session now), which
stops the session at once; anything else it raises is logged."""


class SessionNotStarted(StatifierError):
    """A session was built directly and never started (use ``await Session.start(...)``)."""


class ResumeError(StatifierError):
    """A position cannot be resumed (finished, not quiescent, or conflicting options)."""


class _Interrupted(Exception):
    """The session was stopped while it held a step for its store (internal)."""


_STORED = True
"""A step's delayed send taken by the store (no in-process timer)."""
_LOCAL = False
"""A delayed send the store left to the session's own timer."""


class _Entry:
    __slots__ = ("event", "generation", "invoke_id", "kind", "timer")

    def __init__(
        self,
        kind: str,
        event: Event | None = None,
        invoke_id: str | None = None,
        timer: fx.SendDelayed | None = None,
        generation: int = 0,
    ) -> None:
        self.kind = kind
        self.event = event
        self.invoke_id = invoke_id
        self.timer = timer
        # An invocation's message: how many times its invoke id had started when it came.
        self.generation = generation


class _TracedEntry(_Entry):
    """An entry queued while tracing is on: it carries the context it was sent from, the
    parent of the macrostep that processes it (ADR 30)."""

    __slots__ = ("context",)

    def __init__(self, entry: _Entry, context: object) -> None:
        super().__init__(entry.kind, entry.event, entry.invoke_id, entry.timer, entry.generation)
        self.context = context


_CANCEL = _Entry("cancel")

_NO_HANDLERS: Mapping[str, SessionInvokeHandler] = MappingProxyType({})

_NO_TYPES: frozenset[str] = frozenset()

_ROUTES = (registry.Routes(False), registry.Routes(True))
"""The two routes snapshots a session hands the core (it has no parent, or one); shared,
since a ``Routes`` answers from the registry when asked."""


class _Invocations:
    """A session's invocation bookkeeping, made when it first invokes something.

    It holds the invocations the chart has not left and those whose messages still wait
    in the inbox, nothing more: an ``<invoke>`` without an id mints a new one each time
    its state is entered, so keeping every id ever started would grow without bound.
    """

    __slots__ = (
        "cancelled",
        "context",
        "finished",
        "left",
        "pending",
        "scxml",
        "serial",
        "starts",
        "types",
    )

    def __init__(self) -> None:
        self.scxml = ScxmlInvokeHandler()
        self.types: dict[str, str] = {}
        self.context: dict[str, Any] = {}
        self.cancelled: set[str] = set()
        self.finished: set[str] = set()
        # The start each invoke id's invocation is, by a session-wide serial: a message
        # queued before its id started again is the earlier invocation's, and is dropped
        # (ADR 31's amendment). Session-wide, so an id forgotten and started again never
        # takes a number a waiting message of its earlier invocation carries.
        self.serial = 0
        self.starts: dict[str, int] = {}
        # Messages waiting in the inbox per invoke id, and the ids whose state was left
        # while some waited: each is forgotten once its last message is taken.
        self.pending: dict[str, int] = {}
        self.left: set[str] = set()

    def queued(self, invoke_id: str) -> int | None:
        """Count a message of ``invoke_id`` queued; its generation, or None for an id
        forgotten (or never started): such a message would be dropped when taken."""
        generation = self.starts.get(invoke_id)
        if generation is not None:
            self.pending[invoke_id] = self.pending.get(invoke_id, 0) + 1
        return generation

    def taken(self, invoke_id: str) -> None:
        """A message of ``invoke_id`` left the inbox: forget the id if its state was left
        and this was its last one."""
        waiting = self.pending.get(invoke_id, 0) - 1
        if waiting > 0:
            self.pending[invoke_id] = waiting
            return
        self.pending.pop(invoke_id, None)
        if invoke_id in self.left:
            self.forget(invoke_id)

    def retire(self, invoke_id: str) -> None:
        """``invoke_id``'s invocation is over for the chart (its state left, or its answer
        taken): forget it now, or with its last waiting message. A message of it still
        waiting is heard only if it is a finished child's answer (W3C 236)."""
        if invoke_id not in self.pending:
            self.forget(invoke_id)
            return
        if invoke_id not in self.finished:
            self.cancelled.add(invoke_id)
        self.left.add(invoke_id)

    def forget(self, invoke_id: str) -> None:
        """Drop everything kept of ``invoke_id``: a message of it found later is dropped,
        as a cancelled invocation's is."""
        for kept in (self.types, self.context, self.starts, self.pending):
            kept.pop(invoke_id, None)
        for marked in (self.cancelled, self.finished, self.left):
            marked.discard(invoke_id)


_NO_INVOCATIONS: Final = _Invocations()
"""Stands in for the bookkeeping of a session that has invoked nothing: only read, never
changed (``Session._bookkeeping`` makes a session its own before any change)."""


class _Timer:
    """A delayed send armed on the event loop's clock."""

    __slots__ = ("effect", "handle", "session")

    def __init__(self, session: Session, effect: fx.SendDelayed) -> None:
        self.session = session
        self.effect = effect
        self.handle = asyncio.get_running_loop().call_later(effect.delay_ms / 1000, self.fire)

    def fire(self) -> None:
        self.session._timer_fired(self)


class Session:
    """One live execution of a chart. Create it with ``await Session.start(...)``.

    An idle session holds its position and little else: no task runs while its inbox is
    empty (one is started for the events that arrive, and ends when they are processed),
    and its queues, timers, invocation bookkeeping and halt waiters exist only once used.
    """

    # __weakref__: hosts keep per-session bookkeeping that must not keep a session alive.
    __slots__ = (
        "__weakref__",
        "_cancel_marks",
        "_cancel_requested",
        "_deferred",
        "_delayed",
        "_final_configuration",
        "_halt_waiters",
        "_halted",
        "_handlers",
        "_inbox",
        "_invocations",
        "_on_step",
        "_parent",
        "_posts",
        "_released",
        "_started",
        "_state",
        "_status",
        "_stop_requested",
        "_stopped",
        "_stopping",
        "_store_error",
        "_stored",
        "_subscribers",
        "_task",
        "_timers",
        "basichttp",
        "depth",
        "limits",
        "machine",
        "max_macrostep_rounds",
        "resolver",
        "session_id",
        "tree",
    )

    def __init__(
        self,
        machine: Machine,
        session_id: str,
        handlers: Mapping[str, SessionInvokeHandler],
        resolver: SourceResolver | None,
        parent: tuple[Session, str] | None,
        max_macrostep_rounds: int | None,
        limits: MacrostepLimits = DEFAULT_LIMITS,
        tree_limits: TreeLimits | None = None,
        basichttp: BasicHTTP | None = None,
    ) -> None:
        self.machine = machine
        self.basichttp = basichttp
        self.session_id = session_id
        self.resolver = resolver
        self.max_macrostep_rounds = max_macrostep_rounds
        self.limits = limits
        if parent is None:
            self.tree = SessionTree(tree_limits or TreeLimits())
            self.depth = 0
        else:
            self.tree = parent[0].tree
            self.depth = parent[0].depth + 1
        self._parent = parent
        self._handlers: Mapping[str, SessionInvokeHandler] = (
            dict(handlers) if handlers else _NO_HANDLERS
        )
        self._state: MachineState | None = None
        self._inbox: deque[_Entry] | None = None
        self._halted = False
        self._halt_waiters: list[asyncio.Future[None]] | None = None
        self._status: SessionStatusName = "running"
        self._final_configuration: tuple[str, ...] | None = None
        self._timers: dict[str, list[_Timer]] | None = None
        self._subscribers: list[Subscriber] = []
        self._deferred: deque[Event] | None = None
        self._invocations = _NO_INVOCATIONS
        self._cancel_requested = False
        self._started = False
        self._stopping = False
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._delayed: DelayedSends | None = None
        self._on_step: StepListener | None = None
        self._stored: dict[int, bool | str] = {}
        self._store_error: str | None = None
        self._cancel_marks: OrderedDict[str, int] | None = None
        self._posts: set[asyncio.Task[None]] | None = None
        self._stop_requested: asyncio.Event | None = None
        self._released = False

    # -- lifecycle -----------------------------------------------------------------------

    @classmethod
    async def start(
        cls,
        machine: Machine,
        *,
        session_id: str | None = None,
        invoke_handlers: Mapping[str, type[Any] | SessionInvokeHandler] | None = None,
        subscribers: tuple[Subscriber, ...] | list[Subscriber] = (),
        max_macrostep_rounds: int | None = DEFAULT_MAX_MACROSTEP_ROUNDS,
        resume: MachineState | bytes | bytearray | memoryview | None = None,
        resolver: SourceResolver | None = None,
        datamodel: dict[str, Any] | None = None,
        trace: bool = False,
        parent: tuple[Session, str] | None = None,
        delayed_sends: DelayedSends | None = None,
        on_step: StepListener | None = None,
        caller_context: Any = None,
        limits: MacrostepLimits = DEFAULT_LIMITS,
        tree_limits: TreeLimits | None = None,
        position_key: bytes | None = None,
        basichttp: BasicHTTP | None = None,
    ) -> Session:
        """Start (or resume) a session, perform its first effects, and return it.

        ``invoke_handlers`` maps ``<invoke type>`` to a handler class (instantiated once
        for this session) or instance; ``scxml`` is built in. ``resolver`` maps an
        ``<invoke src>`` to chart text (nothing is fetched otherwise). ``resume`` is a
        position (a ``MachineState`` or a blob from ``statifier.core.position.dumps``): the
        session continues with the same ``_sessionid`` and an empty timer table (a store
        that keeps its sends across processes, ``KeyedDelayedSends``, first sets them
        back to where the position stood).
        ``caller_context`` is the opaque host term of the first macrostep (see
        ``statifier.initialize``); later macrosteps take the one their event carries.
        ``limits`` are the macrostep budgets (ADR 0011; a resumed position takes them,
        and may not exceed them). ``tree_limits`` bound how deep and how large the tree
        of ``scxml`` invocations under this session may grow (children share their
        parent's tree). ``position_key`` is the host's secret when its positions are keyed
        (``dumps(state, key=...)``): a ``resume`` blob must carry its digest.
        ``basichttp`` is the session's BasicHTTP Event I/O processor
        (``statifier.basichttp.BasicHTTP``): the client its ``<send type="basichttp">``
        POSTs go through, in this process, under the client's allow-list (without one each
        is refused with ``error.communication``), and the locations that give it an
        address (``_ioprocessors['basichttp']['location']``, fixed when it starts).
        """
        handlers = {
            name: handler() if isinstance(handler, type) else handler
            for name, handler in (invoke_handlers or {}).items()
        }
        invoke_types = frozenset(handlers) - planner.SCXML_INVOKE_TYPES or _NO_TYPES
        state: MachineState | None = None
        if resume is not None:
            state = _resumable(machine, resume, session_id, datamodel, trace, limits, position_key)
            state = dataclasses.replace(
                state,
                invoke_types=invoke_types,
                max_macrostep_rounds=max_macrostep_rounds,
                limits=limits,
            )
            session_id = state.session_id
        sid = session_id if session_id is not None else new_session_id()
        session = cls(
            machine,
            sid,
            handlers,
            resolver,
            parent,
            max_macrostep_rounds,
            limits,
            tree_limits,
            basichttp,
        )
        session.tree.check(session.depth)
        session._delayed = delayed_sends
        session._on_step = on_step
        if isinstance(delayed_sends, OwningDelayedSends):
            await delayed_sends.claim(session)
        try:
            if state is None:
                if isinstance(delayed_sends, KeyedDelayedSends):
                    await delayed_sends.begin(session)
            elif isinstance(delayed_sends, KeyedDelayedSends):
                counter = state.timer_counter
                point = await delayed_sends.resume(session, counter)
                session._remember_cancels(point.cancel_marks, counter)
                if point.timer_counter > counter:
                    if point.timer_counter > MAX_LIMIT:
                        raise ResumeError(
                            f"the store's timer counter {point.timer_counter} is past what a "
                            f"position holds ({MAX_LIMIT})"
                        )
                    state = dataclasses.replace(state, timer_counter=point.timer_counter)
            await session._begin(state, subscribers, invoke_types, datamodel, trace, caller_context)
        except BaseException:
            await session._release("stopped")
            raise
        return session

    async def _begin(
        self,
        state: MachineState | None,
        subscribers: tuple[Subscriber, ...] | list[Subscriber],
        invoke_types: frozenset[str],
        datamodel: dict[str, Any] | None,
        trace: bool,
        caller_context: Any,
    ) -> None:
        """Register the session and run its first macrostep (or take the resumed state)."""
        sid = self.session_id
        registry.register(self)
        self.tree.live += 1
        self._subscribers.extend(subscribers)
        if state is None:
            tracer = instrumentation.current
            if tracer is None:
                await self._initialize(datamodel, trace, invoke_types, caller_context)
            else:
                with tracer.span(
                    instrumentation.MACROSTEP,
                    session_id=sid,
                    chart=self.machine.name,
                    trigger="initial",
                ) as span:
                    await self._initialize(datamodel, trace, invoke_types, caller_context)
                    span.set(states=self.snapshot().active_leaf_ids())
        else:
            self._state = state
        try:
            await self._stepped()
        except OwnershipLost:
            await self._stop("superseded")
            raise
        self._started = True
        self._wake()

    def _location(self) -> str | None:
        """The session's BasicHTTP location (None: its host gives it none)."""
        http = self.basichttp
        if http is None or http.locations is None:
            return None
        return http.locations.location(self.session_id, "session")

    async def _initialize(
        self,
        datamodel: dict[str, Any] | None,
        trace: bool,
        invoke_types: frozenset[str],
        caller_context: Any,
    ) -> None:
        """The first macrostep: ``initialize``, committed and performed (``start``)."""
        state, effects = initialize(
            self.machine,
            session_id=self.session_id,
            max_macrostep_rounds=self.max_macrostep_rounds,
            datamodel=datamodel,
            trace=trace,
            invoke_types=invoke_types,
            routes=_ROUTES[self._parent is not None],
            caller_context=caller_context,
            limits=self.limits,
            basichttp_location=self._location(),
        )
        try:
            await self._commit(state, effects, retry=False)
        except BaseException:
            registry.unregister(self.session_id)
            self.tree.live -= 1
            raise
        await self._perform(effects)
        self._stored.clear()

    async def stop(self) -> None:
        """Stop the session: end its task, drop its timers, stop children, unregister."""
        await self._stop("stopped")

    async def supersede(self) -> None:
        """Another process owns this session now: stop as ``stop`` does, writing nothing
        more, and tell subscribers ``Halted("superseded")``."""
        await self._stop("superseded")

    async def _stop(self, reason: HaltReason) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stopping = True
        if self._stop_requested is not None:
            self._stop_requested.set()
        task = self._task
        if task is not None and task is not asyncio.current_task():
            await task
        if reason == "superseded":
            self._status = "superseded"
        self._drop_timers()
        await self._drop_posts()
        await self._invocations.scxml.stop_all()
        registry.unregister(self.session_id)
        self.tree.live -= 1
        await self._release(reason)
        if not self._halted:
            self._mark_halted()
            await self._notify(Halted(reason))

    async def _release(self, reason: HaltReason) -> None:
        """Let an owning store give the session up, once: when it is done, cancelled,
        stopped or superseded (a session whose budget ran out can still be cancelled, and
        its cancel still writes)."""
        delayed = self._delayed
        if self._released or not isinstance(delayed, OwningDelayedSends):
            return
        self._released = True
        try:
            await delayed.release(self, reason)
        except Exception:
            logger.exception(
                "session %s: releasing its store's claim failed",
                self.session_id,
                extra={"session_id": self.session_id},
            )

    async def wait_halted(self) -> None:
        """Wait until the session halts (done, cancelled, budget exhausted, stopped or
        superseded)."""
        if self._halted:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._halt_waiters is None:
            self._halt_waiters = []
        self._halt_waiters.append(waiter)
        await waiter

    def _mark_halted(self) -> None:
        self._halted = True
        waiters, self._halt_waiters = self._halt_waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(None)

    # -- the client API ------------------------------------------------------------------

    def send_event(self, event: Event | str) -> None:
        """Queue an external event. Never blocks; a halted session queues it forever."""
        if isinstance(event, str):
            event = Event(name=event)
        self._enqueue(_Entry("event", event))

    def fire_delayed(self, effect: fx.SendDelayed) -> None:
        """A delayed send this session armed elsewhere (a durable timer) has fired.

        It is delivered in order with queued events, exactly as a send fired by the
        session's own timer (the planner's ``fire``); a halted session drops it, and so
        does a session that has since run a ``<cancel>`` of its send id (the store's job
        may have been running already when the cancel reached it).
        """
        self._enqueue(_Entry("fired", timer=effect))

    def cancel(self) -> None:
        """Queue a cancellation (in order with events): onexit runs, then ``Done``."""
        self._enqueue(_CANCEL)

    async def cancel_and_wait(self) -> None:
        """Cancel and wait until the session has halted."""
        if self._status in ("done", "cancelled") or self._stopped:
            return
        self.cancel()
        await self.wait_halted()

    def done_invocation(self, invoke_id: str, data: Any = None) -> None:
        """An invocation finished: becomes ``done.invoke.<id>`` (dropped if cancelled)."""
        context = self._invocations.context.get(invoke_id)
        self._answer(invoke_id, planner.invocation_done(invoke_id, data, caller_context=context))

    def failed_invocation(self, invoke_id: str, reason: Any) -> None:
        """An invocation failed: becomes ``error.communication.invoke.<id>``.

        ``reason`` becomes the event data (a string is wrapped as ``{"reason": ...}``).
        """
        context = self._invocations.context.get(invoke_id)
        self._answer(
            invoke_id, planner.invocation_failed(invoke_id, reason, caller_context=context)
        )

    def status(self) -> SessionStatus:
        """Status, configuration, counters, queued events and pending timers."""
        state = self.snapshot()
        configuration = (
            self._final_configuration
            if self._final_configuration is not None
            else state.configuration_ids()
        )
        return SessionStatus(
            session_id=self.session_id,
            status=self._status,
            configuration=configuration,
            macrostep=state.macrostep,
            microstep=state.microstep,
            round=state.round,
            queued_events=len(self._inbox) if self._inbox else 0,
            pending_timers=sum(len(armed) for armed in (self._timers or {}).values()),
            store_error=self._store_error,
        )

    def snapshot(self) -> MachineState:
        """The current position (serialize it with ``statifier.core.position.dumps``).

        Raises ``SessionNotStarted`` on a session not made by ``Session.start``.
        """
        if self._state is None:
            raise SessionNotStarted(f"session {self.session_id} was never started")
        return self._state

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Receive ``(session_id, effect)`` for every later effect, then one ``Halted``.

        ``callback`` may be a plain or an ``async`` callable; one that raises is logged
        and dropped. Returns a function that unsubscribes.
        """
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    async def messages(self) -> AsyncIterator[tuple[str, Message]]:
        """Async-iterator form of ``subscribe``: ends after the ``Halted`` message."""
        queue: asyncio.Queue[tuple[str, Message]] = asyncio.Queue()

        def push(session_id: str, message: Message) -> None:
            queue.put_nowait((session_id, message))

        unsubscribe = self.subscribe(push)
        try:
            if self._halted:
                return
            while True:
                item = await queue.get()
                yield item
                if isinstance(item[1], Halted):
                    return
        finally:
            unsubscribe()

    def child(self, invoke_id: str) -> Session | None:
        """The child session of a live ``scxml`` invocation."""
        return self._invocations.scxml.child(invoke_id)

    def children(self) -> tuple[Session, ...]:
        """The child sessions of every live ``scxml`` invocation, in the order started."""
        return tuple(self._invocations.scxml.children.values())

    def detach_parent(self) -> None:
        """Sever the link to the invoking session (it cancelled this invocation)."""
        self._parent = None

    # -- inbox ---------------------------------------------------------------------------

    def _enqueue(self, entry: _Entry) -> None:
        tracer = instrumentation.current
        if tracer is not None and entry is not _CANCEL:
            entry = _TracedEntry(entry, tracer.capture())
        if self._inbox is None:
            self._inbox = deque()
        self._inbox.append(entry)
        self._wake()

    def _wake(self) -> None:
        """Start the task that processes the inbox if there is work for it and it is not
        running already (a starting session is woken by ``start`` once its first step is
        done)."""
        if self._task is None and self._started and not self._stopping and self._has_work():
            self._task = asyncio.create_task(self._drain(), name=f"statifier:{self.session_id}")

    def _has_work(self) -> bool:
        """Whether ``_next_entry`` has an entry to give (a halted session keeps its events)."""
        inbox = self._inbox
        if not inbox:
            return False
        return self._status == "running" or (
            self._status == "budget_exhausted" and _CANCEL in inbox
        )

    def _answer(self, invoke_id: str, event: Event) -> None:
        """Queue an invocation's answer (done or failed) behind the events before it."""
        invocations = self._bookkeeping()
        generation = invocations.queued(invoke_id)
        if generation is None:
            return  # an invocation left and forgotten: taking it would drop it
        invocations.finished.add(invoke_id)
        self._enqueue(_Entry("invoked", event, invoke_id, generation=generation))

    def _from_child(self, invoke_id: str, event: Event) -> None:
        generation = self._invocations.queued(invoke_id)
        if generation is None:
            return  # an invocation left and forgotten: taking it would drop it
        event = planner.from_invocation(event, invoke_id)
        self._enqueue(_Entry("invoked", event, invoke_id, generation=generation))

    def _next_entry(self) -> _Entry | None:
        inbox = self._inbox
        if not inbox:
            return None
        if self._status == "running":
            return inbox.popleft()
        if self._status == "budget_exhausted" and _CANCEL in inbox:
            inbox.remove(_CANCEL)
            return _CANCEL
        return None

    async def _drain(self) -> None:
        """Process the inbox until it is empty (or holds only what a halted session keeps),
        then end: an idle session has no task."""
        try:
            while not self._stopping:
                entry = self._next_entry()
                if entry is None:
                    break
                if not await self._step(entry):
                    return
        finally:
            self._task = None
            if not self._inbox:
                self._inbox = None

    async def _step(self, entry: _Entry) -> bool:
        """Process one entry; False when the session must stop processing."""
        try:
            tracer = instrumentation.current
            if tracer is None:
                await self._process(entry)
            else:
                await self._traced(tracer, entry)
            await self._stepped()
        except _Interrupted:
            return False
        except OwnershipLost as exc:
            logger.error(
                "session %s: owned by another process now, stopping without this step: %s",
                self.session_id,
                exc,
                extra={"session_id": self.session_id},
            )
            await self._stop("superseded")
            return False
        except Exception:  # a bug in a driver path must not kill the session
            logger.exception(
                "session %s: failed to process %s",
                self.session_id,
                entry.kind,
                extra={"session_id": self.session_id, "trigger": entry.kind},
            )
        finally:
            self._stored.clear()  # outcomes are keyed by id(): none may outlive its step
        return True

    async def _traced(self, tracer: instrumentation.Instrumentation, entry: _Entry) -> None:
        """``_process`` inside a macrostep span, the child of the context the entry was
        queued from (a new trace when it carries none: a cancel, or one queued while
        tracing was off)."""
        if entry.event is not None:
            event: str | None = entry.event.name
        else:
            event = entry.timer.event if entry.timer is not None else None
        with tracer.span(
            instrumentation.MACROSTEP,
            parent=getattr(entry, "context", instrumentation.NO_PARENT),
            session_id=self.session_id,
            chart=self.machine.name,
            event=event,
            trigger=entry.kind,
        ) as span:
            await self._process(entry)
            span.set(states=self.snapshot().active_leaf_ids())

    async def _stepped(self) -> None:
        """Run the ``on_step`` listener; its ``OwnershipLost`` is raised (the session must
        stop), anything else it raises is logged."""
        if self._on_step is None:
            return
        try:
            result = self._on_step(self)
            if inspect.isawaitable(result):
                await result
        except OwnershipLost:
            raise
        except Exception:
            logger.exception(
                "session %s: on_step listener raised",
                self.session_id,
                extra={"session_id": self.session_id},
            )

    async def _process(self, entry: _Entry) -> None:
        state = self.snapshot()
        if entry.kind == "cancel":
            self._cancel_requested = True
            state, effects = cancel(state)
            await self._commit(state, effects)
            await self._perform(effects)
            return
        if not state.running:
            return
        if entry.kind in ("timer", "fired"):
            assert entry.timer is not None  # noqa: S101 - every timer entry carries its timer
            if entry.kind == "fired" and self._cancelled_since(entry.timer):
                logger.info(
                    "session %s: dropped durable send %s (ordinal %d): cancelled since",
                    self.session_id,
                    entry.timer.send_id,
                    entry.timer.ordinal,
                    extra={
                        "session_id": self.session_id,
                        "send_id": entry.timer.send_id,
                        "ordinal": entry.timer.ordinal,
                    },
                )
                return
            await self._fire(entry.timer)
            return
        if entry.kind == "failed":
            assert entry.event is not None  # noqa: S101 - a failed entry carries its error
            state, effects = deliver_internal(state, entry.event, routes=self._routes())
            await self._commit(state, effects)
            await self._perform(effects)
            return
        if entry.kind == "invoked":
            assert entry.invoke_id is not None  # noqa: S101 - every invoked entry names its id
            invocations = self._invocations
            invoke_id = entry.invoke_id
            stale = (
                invoke_id in invocations.cancelled
                or invoke_id not in invocations.types
                or entry.generation != invocations.starts.get(invoke_id)
            )
            invocations.taken(invoke_id)
            if stale:
                return
        assert entry.event is not None  # noqa: S101 - event and invoked entries carry an event
        state, effects = handle_event(state, entry.event, routes=self._routes())
        await self._commit(state, effects)
        await self._perform(effects)
        if entry.invoke_id is not None and planner.is_answer_of(entry.event, entry.invoke_id):
            # The chart took its invocation's answer and is done with it: no cancel will
            # come for it, so it is let go here.
            await self._answered(entry.invoke_id, entry.generation)

    async def _answered(self, invoke_id: str, generation: int) -> None:
        """Let go of the invocation that answered: its bookkeeping, and its ``scxml``
        child (halted)."""
        invocations = self._invocations
        if invocations.starts.get(invoke_id) != generation:
            return
        invocations.retire(invoke_id)
        await invocations.scxml.finished(invoke_id)

    def _routes(self) -> registry.Routes:
        return _ROUTES[self._parent is not None]

    # -- performing effects --------------------------------------------------------------

    async def _perform(self, effects: list[fx.Effect]) -> None:
        await self._perform_each(effects)
        while self._deferred:
            event = self._deferred.popleft()
            state = self.snapshot()
            if not state.running or self._status != "running":
                self._deferred = None
                return
            state, more = deliver_internal(state, event, routes=self._routes())
            await self._commit(state, more)
            await self._perform_each(more)

    async def _perform_each(self, effects: list[fx.Effect]) -> None:
        for effect in effects:
            await self._notify(effect)
            instruction = planner.plan_effect(self.session_id, effect)
            if instruction is not None:
                await self._execute(instruction)

    async def _notify(self, message: Message) -> None:
        for callback in list(self._subscribers):
            try:
                result = callback(self.session_id, message)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                logger.exception(
                    "session %s: subscriber %r raised; dropped",
                    self.session_id,
                    callback,
                    extra={"session_id": self.session_id},
                )
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

    async def _execute(self, instruction: planner.Instruction) -> None:  # noqa: C901 - one case per planner instruction
        match instruction:
            case planner.Deliver():
                await self._deliver(instruction)
            case planner.Post():
                self._post(instruction)
            case planner.Schedule(effect=effect):
                stored = self._stored.pop(id(effect), _LOCAL)
                if isinstance(stored, str):
                    message = f"the delayed send could not be stored: {stored}"
                    self._defer(planner.undeliverable(effect.send_id, message))
                elif stored is _LOCAL:
                    self._schedule(effect)
            case planner.CancelTimers(effect=effect):
                await self._cancel_timers(effect)
            case planner.Report(effect=fx.Log() as log):
                logger.info(
                    "%s [%s] %s: %s",
                    self.session_id,
                    log.owner,
                    log.label,
                    brief(log.value),
                    extra={"session_id": self.session_id},
                )
            case planner.Report(effect=fx.ErrorRaised() as error):
                logger.warning(
                    "session %s: %s in chart %s%s: %s",
                    self.session_id,
                    error.name,
                    self.machine.name or self.machine.identity[:19],
                    f" line {error.line}" if error.line is not None else "",
                    error.message or "(no message)",
                    extra={
                        "session_id": self.session_id,
                        "chart": self.machine.name,
                        "event": error.name,
                        "line": error.line,
                    },
                )
            case planner.StartInvocation(effect=effect):
                await self._start_invocation(effect)
            case planner.StopInvocation(effect=effect):
                await self._cancel_invocation(effect.invoke_id)
            case planner.Forward(invoke_id=invoke_id, event=event):
                await self._forward(invoke_id, event)
            case planner.Halt(effect=fx.Done() as done):
                await self._done(done)
            case planner.Halt(effect=fx.BudgetExhausted()):
                await self._halt("budget_exhausted")

    async def _done(self, done: fx.Done) -> None:
        self._final_configuration = done.configuration
        await self._halt("cancelled" if self._cancel_requested else "done")
        if self._parent is not None and not self._cancel_requested:
            parent, invoke_id = self._parent
            parent._answer(
                invoke_id,
                planner.invocation_done(
                    invoke_id,
                    done.donedata,
                    child_session_id=self.session_id,
                    caller_context=parent._invocations.context.get(invoke_id),
                ),
            )

    async def _cancel_timers(self, effect: fx.Cancel) -> None:
        for timer in self._timers.pop(effect.send_id, ()) if self._timers else ():
            timer.handle.cancel()
        refused = self._stored.pop(id(effect), None)
        if isinstance(refused, str):
            message = f"the cancel could not be stored: {refused}"
            self._defer(planner.undeliverable(effect.send_id, message))
        self._mark_cancelled(effect.send_id, effect.ordinal)

    def _mark_cancelled(self, send_id: str, ordinal: int) -> None:
        """Remember that a ``<cancel>`` of ``send_id`` ran at ``ordinal`` (the latest
        ``CANCEL_MARKS`` send ids)."""
        marks = self._cancel_marks
        if marks is None:
            marks = self._cancel_marks = OrderedDict()
        marks[send_id] = max(ordinal, marks.pop(send_id, 0))
        while len(marks) > CANCEL_MARKS:
            marks.popitem(last=False)

    def _remember_cancels(self, marks: Mapping[str, int], timer_counter: int) -> None:
        """Take a resumed position's cancels from its store (``ResumePoint``): those its
        position holds, of ordinal at most its ``timer_counter``."""
        for send_id, ordinal in marks.items():
            if ordinal <= timer_counter:
                self._mark_cancelled(send_id, ordinal)

    def _cancelled_since(self, effect: fx.SendDelayed) -> bool:
        """Whether a ``<cancel>`` of ``effect``'s send id ran after ``effect`` was sent."""
        marks = self._cancel_marks
        return marks is not None and marks.get(effect.send_id, 0) > effect.ordinal

    async def _halt(self, reason: SessionStatusName) -> None:
        if self._status != "running" and reason != "cancelled":
            return
        first = self._status == "running"
        self._status = reason
        if reason in ("done", "cancelled"):
            # Spec 6.2: a halted session's pending delayed sends are discarded.
            self._drop_timers()
            await self._release(reason)
        if first and reason != "running":
            self._mark_halted()
            await self._notify(Halted(reason))

    def _drop_timers(self) -> None:
        timers, self._timers = self._timers, None
        for armed in (timers or {}).values():
            for timer in armed:
                timer.handle.cancel()

    # -- durable delayed sends -----------------------------------------------------------

    async def _commit(
        self, state: MachineState, effects: list[fx.Effect], *, retry: bool = True
    ) -> None:
        """Store the step's delayed sends and cancels first, then take its new state.

        Without a ``DelayedSends`` store this only takes the state. With one, each
        ``<send delay>`` and ``<cancel>`` goes to the store in order, before anything of
        the step is visible; the outcome of each is kept for ``_execute``. A store that
        cannot answer holds the step (``retry``) or, for ``start``, raises
        ``DelayedSendsUnavailable``.
        """
        if self._delayed is not None:
            for effect in effects:
                instruction = planner.plan_effect(self.session_id, effect)
                if isinstance(instruction, planner.Schedule | planner.CancelTimers):
                    self._stored[id(instruction.effect)] = await self._store(
                        instruction, retry=retry
                    )
        self._state = state

    async def _store(
        self, instruction: planner.Schedule | planner.CancelTimers, *, retry: bool
    ) -> bool | str:
        """One effect into the store: stored, left to the session, or the refusal's text."""
        delayed = self._delayed
        assert delayed is not None  # noqa: S101 - called only when delayed sends are configured
        effect = instruction.effect
        wait = STORE_RETRY_FIRST_S
        failures = 0
        while True:
            try:
                if isinstance(instruction, planner.Schedule):
                    taken = bool(await delayed.schedule(self, instruction.effect))
                else:
                    await delayed.cancel(self, instruction.effect)
                    taken = _STORED
            except DelayedSendRefused as exc:
                logger.error(
                    "session %s: the store refused %s %r: %s",
                    self.session_id,
                    type(effect).__name__,
                    effect.send_id,
                    exc,
                    extra={"session_id": self.session_id, "send_id": effect.send_id},
                )
                return str(exc) or type(exc).__name__
            except (OwnershipLost, _Interrupted):
                raise
            except Exception as exc:
                failures += 1
                self._store_error = f"{type(exc).__name__}: {exc}"
                if not retry:
                    raise DelayedSendsUnavailable(
                        f"storing {type(effect).__name__} {effect.send_id!r} failed: {exc}"
                    ) from exc
                if failures == 1 or failures % 10 == 0:
                    logger.error(
                        "session %s: storing %s %r failed (%d times), holding the step: %s",
                        self.session_id,
                        type(effect).__name__,
                        effect.send_id,
                        failures,
                        exc,
                        extra={"session_id": self.session_id, "send_id": effect.send_id},
                        exc_info=failures == 1,
                    )
                await self._pause(wait)
                wait = min(wait * 2, STORE_RETRY_MAX_S)
                continue
            if failures:
                logger.warning(
                    "session %s: stored %s %r after %d failed attempts",
                    self.session_id,
                    type(effect).__name__,
                    effect.send_id,
                    failures,
                    extra={"session_id": self.session_id, "send_id": effect.send_id},
                )
                self._store_error = None
            return taken

    async def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next attempt; ``_Interrupted`` if stopped meanwhile."""
        if self._stopping:
            raise _Interrupted
        if self._stop_requested is None:
            self._stop_requested = asyncio.Event()
        try:
            await asyncio.wait_for(self._stop_requested.wait(), seconds)
        except TimeoutError:
            return
        raise _Interrupted

    def _schedule(self, effect: fx.SendDelayed) -> None:
        if self._timers is None:
            self._timers = {}
        self._timers.setdefault(effect.send_id, []).append(_Timer(self, effect))

    def _timer_fired(self, timer: _Timer) -> None:
        send_id = timer.effect.send_id
        armed = self._timers.get(send_id) if self._timers else None
        if armed is not None and timer in armed:
            armed.remove(timer)
            if not armed:
                del self._timers[send_id]  # type: ignore[union-attr]
        self._enqueue(_Entry("timer", timer=timer.effect))

    async def _fire(self, effect: fx.SendDelayed) -> None:
        instruction = planner.fire(self.session_id, effect)
        if isinstance(instruction, planner.Post):
            self._post(instruction)
        else:
            await self._deliver(instruction)
        await self._perform([])

    # -- BasicHTTP sends ---------------------------------------------------------------

    def _post(self, post: planner.Post) -> None:
        """POST a BasicHTTP send in a task of its own; the chart hears
        ``error.communication`` if the client refuses it or ``max_pending`` are under way
        (at once) or it fails for good (when it does, in the order of the session's other
        events)."""
        http = self.basichttp
        client = http.client if http is not None else None
        send_id = post.effect.send_id
        if http is None or client is None:
            self._defer(planner.post_failed(send_id, NO_HTTP_CLIENT))
            return
        if self._posts is not None and len(self._posts) >= http.max_pending:
            message = f"more than {http.max_pending} BasicHTTP sends under way"
            self._defer(planner.post_failed(send_id, message))
            return
        request = outbound(post)
        try:
            client.policy.check(request)
        except PostRefused as refused:
            self._defer(planner.post_failed(send_id, refused.reason))
            return
        if self._posts is None:
            self._posts = set()
        task = asyncio.create_task(self._posting(client, request))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)

    async def _posting(self, client: Poster, request: OutboundRequest) -> None:
        try:
            await post_with_retries(client, request, f"{self.session_id}/{uuid.uuid4().hex}")
        except PostRefused as refused:
            failed = planner.post_failed(request.send_id, refused.reason)
        except PostFailed as failure:
            failed = planner.post_failed(
                request.send_id, failure.reason, status=failure.status, attempts=failure.attempts
            )
        else:
            return
        if not self._stopping:
            self._enqueue(_Entry("failed", failed))

    async def _drop_posts(self) -> None:
        """Cancel the POSTs still under way (the session is stopping)."""
        posts, self._posts = self._posts, None
        for task in posts or ():
            task.cancel()
        if posts:
            await asyncio.gather(*posts, return_exceptions=True)

    async def _deliver(self, instruction: planner.Deliver) -> None:
        target = instruction.target
        event = instruction.event
        match target:
            case planner.SelfTarget():
                if not self._stopping:
                    state = self.snapshot()
                    if state.running and self._status == "running":
                        self._enqueue(_Entry("event", event))
                return
            case planner.InternalTarget():
                state, effects = deliver_internal(self.snapshot(), event, routes=self._routes())
                await self._commit(state, effects)
                await self._perform_each(effects)
                return
            case planner.ParentTarget():
                if self._parent is not None:
                    parent, invoke_id = self._parent
                    parent._from_child(invoke_id, event)
                    return
            case planner.SessionTarget(session_id=other_id):
                other = registry.lookup(other_id)
                if other is not None:
                    other.send_event(event)
                    return
            case planner.InvocationTarget(invoke_id=invoke_id):
                live = invoke_id in self.snapshot().invocations.values()
                if live and await self._forward(invoke_id, event):
                    return
        message = f"send target {planner.address(target)!r} is unreachable"
        self._defer(planner.undeliverable(instruction.send_id, message))

    def _defer(self, event: Event) -> None:
        """Hand ``event`` to the core once the effects being performed are done."""
        if self._deferred is None:
            self._deferred = deque()
        self._deferred.append(event)

    # -- invocations ---------------------------------------------------------------------

    def _handler(self, invoke_type: str) -> SessionInvokeHandler | None:
        handler = self._handlers.get(invoke_type)
        if handler is None and invoke_type in planner.SCXML_INVOKE_TYPES:
            return self._bookkeeping().scxml
        return handler

    def _bookkeeping(self) -> _Invocations:
        """The invocation bookkeeping, made on first use."""
        if self._invocations is _NO_INVOCATIONS:
            self._invocations = _Invocations()
        return self._invocations

    def _context(self) -> HandlerContext:
        return HandlerContext(self.session_id, self)

    async def _start_invocation(self, effect: fx.Invoke) -> None:
        invoke_id = effect.invoke_id
        invocations = self._bookkeeping()
        invocations.types[invoke_id] = effect.type
        invocations.context[invoke_id] = effect.caller_context
        invocations.cancelled.discard(invoke_id)
        invocations.finished.discard(invoke_id)
        invocations.left.discard(invoke_id)
        invocations.serial += 1
        invocations.starts[invoke_id] = invocations.serial
        handler = self._handler(effect.type)
        try:
            if handler is None:
                raise LookupError(f"no handler for invoke type {effect.type!r}")
            result = handler.start(effect, self._context())
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            logger.warning(
                "session %s: invocation %s failed to start: %s",
                self.session_id,
                invoke_id,
                exc,
                extra={"session_id": self.session_id, "invoke_id": invoke_id},
            )
            failed = planner.invocation_start_failed(invoke_id, str(exc) or repr(exc))
            self._defer(failed)

    async def _cancel_invocation(self, invoke_id: str) -> None:
        invocations = self._bookkeeping()
        handler = self._handler(invocations.types.get(invoke_id, ""))
        invocations.retire(invoke_id)
        if handler is None:
            return
        try:
            result = handler.cancel(invoke_id, self._context())
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception(
                "session %s: cancelling invocation %s failed",
                self.session_id,
                invoke_id,
                extra={"session_id": self.session_id, "invoke_id": invoke_id},
            )

    async def _forward(self, invoke_id: str, event: Event) -> bool:
        handler = self._handler(self._invocations.types.get(invoke_id, ""))
        if handler is None:
            return False
        try:
            result = handler.forward(invoke_id, event, self._context())
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            logger.warning(
                "session %s: forwarding to %s failed: %s",
                self.session_id,
                invoke_id,
                exc,
                extra={"session_id": self.session_id, "invoke_id": invoke_id},
            )
            return False
        return True


def _resumable(
    machine: Machine,
    resume: MachineState | bytes | bytearray | memoryview,
    session_id: str | None,
    datamodel: dict[str, Any] | None,
    trace: bool,
    limits: MacrostepLimits,
    key: bytes | None,
) -> MachineState:
    if not isinstance(resume, MachineState):
        from statifier.core.position import loads

        state = loads(resume, machine, max_limits=limits, key=key)
    else:
        state = resume
        if state.machine.identity != machine.identity:
            raise ResumeError("the position belongs to another chart")
    if datamodel is not None or trace:
        raise ResumeError("datamodel and trace cannot be combined with resume")
    if session_id is not None and session_id != state.session_id:
        raise ResumeError(
            f"session_id {session_id!r} conflicts with the position's {state.session_id!r}"
        )
    if not state.running or state.status != "running":
        raise ResumeError("the position belongs to a finished execution")
    if state.internal_queue:
        raise ResumeError("the position is not quiescent (its internal queue is not empty)")
    return state
