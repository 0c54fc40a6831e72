"""The executor of durable executions on oban jobs, and the deliveries back into them.

Public as ``statifier_oban.executions`` (its docstring tells the whole story); rows name
``ExecutionDelivery`` and ``ExecutionInvokeDelivery`` by that module's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

import psycopg
from oban import Oban, current_job
from psycopg import AsyncConnection
from statifier import Machine, instrumentation
from statifier.basichttp import OutboundPolicy, PostRefused, outbound
from statifier.core import planner
from statifier.core.effects import Cancel, CancelInvoke, Invoke, SendDelayed
from statifier.core.events import Event
from statifier.errors import install_hint
from statifier_persistence import (
    AlreadyApplied,
    Declined,
    EffectRefused,
    EventBuilder,
    ExecutionNotFound,
    Executions,
    FanOutKey,
    NeedsMigration,
    Stepped,
    StepResult,
    TimersSent,
    Trigger,
    live_answer,
    triggered_by,
)
from statifier_persistence import Discarded as DiscardedStep
from statifier_persistence.history import TriggerSource

from .._config import DEFAULT_DELIVERY, DEFAULT_INVOKE_DELIVERY, Config
from .._errors import (
    ConfigError,
    NoExecutions,
    ScheduleRejected,
    StoreUnavailable,
    UndecodableRow,
)
from .._names import (
    CASCADE_WORKER,
    EXECUTIONS_MODULE,
    INVOKE_WORKER,
    MESSAGE_WORKER,
    SETTLEMENT_WORKER,
)
from ..delivery import DELIVERED, DeliveryAnswer, Discarded, Snoozed
from ..invocations import _enqueue, _fan_out
from ..invocations._handler import InvokeHandler
from ..rows import _fields
from ..rows._traced import carry
from ..store import _statements
from ..timers import _schedule
from . import _post_jobs

if TYPE_CHECKING:
    from statifier.basichttp.client import BasicHTTPClient

PARKED_SNOOZE_S: Final = 60
"""How long a timer of a parked execution waits before it asks again, by default."""

EXECUTION_CHILD_STARTER: Final = "statifier_oban.children:ExecutionChildStarter"
"""The child starter :func:`execution_config` names by default (children as executions)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Installed:
    executions: Executions
    parked_snooze_s: int


_installed: _Installed | None = None


def use(executions: Executions | None, *, parked_snooze_s: int = PARKED_SNOOZE_S) -> None:
    """Make ``executions`` the one this process's execution deliveries step into (None:
    none; deliveries then raise ``NoExecutions`` and their jobs retry).

    ``parked_snooze_s`` (a positive integer) is how long a job for a parked execution
    snoozes before it is tried again.
    """
    global _installed
    if executions is None:
        _installed = None
        return
    if not isinstance(executions, Executions):
        raise ConfigError("executions", f"expected an Executions, not {executions!r}", executions)
    if isinstance(parked_snooze_s, bool) or not isinstance(parked_snooze_s, int):
        raise ConfigError("parked_snooze_s", "parked_snooze_s must be an integer of seconds")
    if parked_snooze_s < 1:
        raise ConfigError("parked_snooze_s", "parked_snooze_s must be at least 1 second")
    _installed = _Installed(executions, parked_snooze_s)


def _require() -> _Installed:
    if _installed is None:
        raise NoExecutions(
            "no Executions in this process: call statifier_oban.executions.use(...) first"
        )
    return _installed


def current() -> Executions:
    """The ``Executions`` installed by :func:`use` (``NoExecutions`` if none is)."""
    return _require().executions


def execution_config(oban: Any, *, timers_queue: str, **options: Any) -> Config:
    """A ``Config`` whose jobs are delivered into executions (see the module docstring).

    The same options as ``Config``; ``delivery`` and ``invoke_delivery`` default to
    :class:`ExecutionDelivery` and :class:`ExecutionInvokeDelivery`, ``child_starter`` to
    ``statifier_oban.children.ExecutionChildStarter`` (a fan-out's children are
    executions).
    """
    options.setdefault("delivery", ExecutionDelivery)
    options.setdefault("invoke_delivery", ExecutionInvokeDelivery)
    options.setdefault("child_starter", EXECUTION_CHILD_STARTER)
    return Config(oban=oban, timers_queue=timers_queue, **options)


def current_executor() -> ObanExecutor:
    """The installed ``Executions``' executor; ``NoExecutions`` if none is installed or it
    is not an :class:`ObanExecutor`."""
    executor = current().executor
    if not isinstance(executor, ObanExecutor):
        raise NoExecutions(f"the installed Executions runs on {executor!r}, not an ObanExecutor")
    return executor


def current_config() -> Config:
    """The config of the installed ``Executions``' executor (see :func:`current_executor`)."""
    return current_executor().config


class ObanExecutor:
    """Performs an execution's durable effects as oban jobs, in the step's transaction.

    ``config`` names the queues and the deliveries written on every job (build it with
    :func:`execution_config`); ``handlers`` maps ``<invoke type>`` values to
    ``InvokeHandler`` classes. An invoke type without a handler, or an effect whose
    opaque fields cannot be stored, is refused (the chart hears the error); a database
    failure fails the step. ``basichttp`` is the allow-list of BasicHTTP sends
    (``statifier.basichttp.OutboundPolicy``): a send it allows is a ``PostWorker`` job on
    the invoke queue (else the timers queue), one it refuses (every send, by default) is
    ``error.communication`` at once. Every process that steps the executions, and the
    worker that runs the jobs, needs the same one: the worker checks again, with the
    addresses it connects to.
    """

    def __init__(
        self,
        config: Config,
        *,
        handlers: Mapping[str, type[InvokeHandler]] | None = None,
        basichttp: OutboundPolicy | None = None,
    ) -> None:
        if not isinstance(config, Config):
            raise ConfigError("config", f"expected a statifier_oban Config, not {config!r}")
        if config.delivery == DEFAULT_DELIVERY or config.invoke_delivery == DEFAULT_INVOKE_DELIVERY:
            raise ConfigError(
                "delivery",
                "the config delivers into live sessions; build it with execution_config()",
            )
        table = dict(handlers or {})
        for invoke_type, handler in table.items():
            if not (isinstance(handler, type) and issubclass(handler, InvokeHandler)):
                raise ConfigError("handlers", f"{invoke_type!r}: {handler!r} is no InvokeHandler")
        if table and config.invoke_queue is None:
            raise ConfigError("invoke_queue", "invoke handlers need the config's invoke_queue")
        if basichttp is not None and not isinstance(basichttp, OutboundPolicy):
            raise ConfigError("basichttp", f"expected an OutboundPolicy, not {basichttp!r}")
        self.config = config
        self._handlers = table
        self.basichttp = basichttp if basichttp is not None else OutboundPolicy()
        self._client: BasicHTTPClient | None = None

    @property
    def invoke_types(self) -> frozenset[str]:
        """The invoke types with a handler."""
        return frozenset(self._handlers)

    def unhandled_invoke_types(self, machine: Machine) -> list[str]:
        """The invoke types ``machine`` names in ``type`` attributes that have no handler
        here, sorted (SCXML's own types need none; a ``typeexpr`` is known only when it
        runs). A step entering a state that invokes one would start nothing: a chart
        error, an invocation never answered. Check before stepping an execution of it.
        """
        named = {
            invoke.type
            for state in machine.states
            for invoke in state.invokes
            if invoke.type is not None and invoke.type not in planner.SCXML_INVOKE_TYPES
        }
        return sorted(named - self.invoke_types)

    def handler_for(self, invoke_type: str) -> type[InvokeHandler] | None:
        """The handler class of ``invoke_type`` (None: the type has none)."""
        return self._handlers.get(invoke_type)

    async def schedule(
        self, conn: AsyncConnection[Any], execution_id: str, effect: SendDelayed
    ) -> None:
        """A timer job on the step's connection (idempotent on ``(scope, ordinal)``).

        Whatever its target: when it fires, ``Executions.fire`` routes it as the planner
        says, in the step that applies it.
        """
        try:
            await _schedule.schedule(self.config, execution_id, effect, conn=conn, any_target=True)
        except ScheduleRejected as exc:
            raise EffectRefused(exc.reason, str(exc)) from exc

    @property
    def timer_batches(self) -> bool:
        """Steps store their timers in batches (``prepare_timer``, ``store_timers``), unless
        a subclass overrides ``schedule`` (then every timer goes through it, as before).
        Tracing or not: a traced batch gives each timer its own span and trace context.
        Asked at every step."""
        return type(self).schedule is ObanExecutor.schedule

    def prepare_timer(self, execution_id: str, effect: SendDelayed) -> _schedule.PreparedTimer:
        """A timer checked as ``schedule`` checks it, for ``store_timers`` (``TimerBatches``:
        a step stores its timers, or a group commit several executions' timers, at once)."""
        try:
            return _schedule.prepare(self.config, execution_id, effect, any_target=True)
        except ScheduleRejected as exc:
            raise EffectRefused(exc.reason, str(exc)) from exc

    async def store_timers(
        self, conn: AsyncConnection[Any], timers: Sequence[_schedule.PreparedTimer]
    ) -> TimersSent | None:
        """Timer jobs for every prepared timer, in one statement on the step's connection
        (read back only for ``timer.scheduled`` handlers, or while tracing is on: each
        timer's ``ScheduleTimer`` span then ends with its job's id, read when the answer
        is awaited, see ``_schedule.send_traced``)."""
        tracer = instrumentation.current
        if tracer is None or not timers:
            await _schedule.store_prepared(self.config, timers, conn=conn, jobs=False)
            return None
        return await _schedule.send_traced(self.config, tracer, timers, conn=conn)

    async def earlier_timers(self, conn: AsyncConnection[Any], execution_id: str) -> bool:
        """Whether timer jobs of an earlier execution with this id remain (any state)."""
        return await _schedule.timer_rows_left(self.config, execution_id, conn=conn)

    async def cancel_timers(
        self, conn: AsyncConnection[Any], execution_id: str, effect: Cancel
    ) -> None:
        """Cancel the execution's pending timer jobs under the send id."""
        await _schedule.cancel_timers(self.config, execution_id, effect, conn=conn)

    async def start_invocation(
        self, conn: AsyncConnection[Any], execution_id: str, effect: Invoke
    ) -> None:
        """An invocation job for the handler registered under the invoke type."""
        handler = self.handler_for(effect.type)
        if handler is None:
            raise EffectRefused(f"no handler for invoke type {effect.type!r}")
        try:
            await _enqueue.enqueue(self.config, handler, execution_id, effect, conn=conn)
        except ScheduleRejected as exc:
            raise EffectRefused(exc.reason, str(exc)) from exc

    async def stop_invocation(
        self, conn: AsyncConnection[Any], execution_id: str, effect: CancelInvoke
    ) -> None:
        """Cancel the invocation's pending jobs and child starts (a running one finishes;
        its answer is then declined, the invocation being no longer live)."""
        await _enqueue.cancel(self.config, execution_id, effect.invoke_id, conn=conn)
        await _fan_out.cancel_unstarted(self.config, execution_id, effect.invoke_id, conn=conn)

    async def settle_fan_out(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> None:
        """A ``statifier_oban.children.SettlementWorker`` job, in the step's transaction."""
        await self._fan_out_job(conn, SETTLEMENT_WORKER, fan_out)

    async def deliver_message(self, conn: AsyncConnection[Any], execution_id: str) -> None:
        """A ``statifier_oban.executions.MessageWorker`` job for the receiver, in the step's
        transaction: a message was written into its mailbox."""
        await self._job(conn, MESSAGE_WORKER, {"scope": execution_id})

    async def drop_timers(
        self, conn: AsyncConnection[Any], execution_id: str, send_ids: Sequence[str]
    ) -> None:
        """Cancel the execution's pending timer jobs of these send ids (it was cancelled)."""
        for send_id in send_ids:
            await _schedule.cancel_send(
                self.config, execution_id, send_id, "the execution was cancelled", conn=conn
            )

    async def cancel_children(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> None:
        """A ``statifier_oban.children.CascadeWorker`` job, in the step's transaction."""
        await self._fan_out_job(conn, CASCADE_WORKER, fan_out)

    async def superseded(self, conn: AsyncConnection[Any] | None, fan_out: FanOutKey) -> bool:
        """Whether an invocation job of a later generation (macrostep) of the fan-out's
        invoke id exists: the parent left the invoking state and entered it again
        (``conn``: in that transaction; None: on the host's pool)."""
        oban = self.config.oban
        async with _statements.connection(oban, conn) as db:
            cursor = await db.execute(
                _statements.statement(oban, "invocation_superseded"),
                {
                    "scope": fan_out.parent_id,
                    "invoke_id": fan_out.invoke_id,
                    "macrostep": fan_out.generation,
                },
            )
            row = await cursor.fetchone()
        return bool(row and row[0])

    async def _fan_out_job(
        self, conn: AsyncConnection[Any], worker: str, fan_out: FanOutKey
    ) -> None:
        args = {
            "scope": fan_out.parent_id,
            "invoke_id": fan_out.invoke_id,
            "macrostep": fan_out.generation,
        }
        await self._job(conn, worker, args)

    async def _job(self, conn: AsyncConnection[Any], worker: str, args: dict[str, Any]) -> None:
        """One job of ``worker`` on the invoke queue (else the timers queue), in ``conn``'s
        transaction (carrying the step's trace context when tracing is on)."""
        oban = self.config.oban
        tracer = instrumentation.current
        meta = carry({}, tracer) if tracer is not None else {}
        async with _statements.connection(oban, conn) as db:
            await db.execute(
                _statements.statement(oban, "insert_fan_out_job", worker=worker),
                {
                    "args": _statements.jsonb(args),
                    "meta": _statements.jsonb(meta),
                    "queue": self.config.invoke_queue or self.config.timers_queue,
                    "channel": _statements.insert_channel(oban),
                },
            )

    async def forward(
        self, conn: AsyncConnection[Any], execution_id: str, invoke_id: str, event: Event
    ) -> bool:
        """Job-shaped invocations take no events."""
        return False

    async def post(self, conn: AsyncConnection[Any], execution_id: str, post: planner.Post) -> None:
        """A ``PostWorker`` job for a BasicHTTP send ``basichttp`` allows, in the step's
        transaction; ``EffectRefused`` (the chart hears ``error.communication``) for one it
        does not."""
        request = outbound(post)
        try:
            self.basichttp.check(request)
        except PostRefused as refused:
            raise EffectRefused(refused.reason) from None
        queue = self.config.invoke_queue or self.config.timers_queue
        await _post_jobs.store(
            conn, self.config.oban, queue, execution_id, request, self.basichttp.attempts
        )

    def basichttp_client(self) -> BasicHTTPClient:
        """This process's client for BasicHTTP POSTs under ``basichttp`` (made on first use);
        ``PostRefused`` saying what to install when ``statifier[http]`` is missing."""
        if self._client is None:
            try:
                from statifier.basichttp.client import BasicHTTPClient
            except ImportError as exc:
                hint = install_hint("statifier-oban", "http")
                raise PostRefused(f"this worker cannot make HTTP requests: {hint}") from exc
            self._client = BasicHTTPClient(self.basichttp)
        return self._client

    async def close(self) -> None:
        """Close this process's BasicHTTP client (its pooled connections), if it made one."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


_Run = Callable[[Executions, str | None], Awaitable[StepResult]]
"""A step of an execution delivery, given the installed ``Executions`` and the job's key."""


def job_trigger(source: TriggerSource) -> Trigger:
    """The history trigger of a change the running job asks for (its id as ``job_id``)."""
    job = current_job()
    return Trigger(source, job_id=job.id if job is not None else None)


class _Steps:
    """What both execution deliveries share: step with the job's key, map the answer.

    Each step is recorded in the execution's history as triggered by the job
    (``trigger_source``: an invocation's answer, unless a subclass says otherwise).
    """

    trigger_source: TriggerSource = "invocation"

    async def step(
        self,
        executions: Executions,
        execution_id: str,
        event: Event | EventBuilder,
        key: str | None,
    ) -> StepResult:
        """Step ``event`` into the execution; override to step on a connection of yours
        (``executions.step(..., conn=conn)`` inside your own transaction)."""
        return await executions.step(execution_id, event, key=key)

    async def fire(
        self, executions: Executions, execution_id: str, delayed: SendDelayed, key: str | None
    ) -> StepResult:
        """Fire a timer into the execution; override as ``step``
        (``executions.fire(..., conn=conn)``)."""
        return await executions.fire(execution_id, delayed, key=key)

    async def apply_event(self, execution_id: str, event: Event | EventBuilder) -> DeliveryAnswer:
        """Step ``event`` (see ``step``) with the running job's id as the key."""
        return await self.apply(
            execution_id, lambda executions, key: self.step(executions, execution_id, event, key)
        )

    async def apply(self, execution_id: str, run: _Run) -> DeliveryAnswer:
        """``run`` the step with the running job's id as the key; the delivery answer."""
        installed = _require()
        job = current_job()
        key = f"job:{job.id}" if job is not None and job.id is not None else None
        try:
            with triggered_by(job_trigger(self.trigger_source)):
                result = await run(installed.executions, key)
        except ExecutionNotFound:
            return Discarded("terminated")
        except NeedsMigration:
            return Snoozed(installed.parked_snooze_s)
        match result:
            case Stepped() | AlreadyApplied():
                return DELIVERED
            case DiscardedStep(status=status):
                return Discarded(status)
            case Declined(reason=reason):
                return Discarded(reason)


class ExecutionDelivery(_Steps):
    """The timer delivery of durable executions (the scope is the execution id)."""

    __module__ = EXECUTIONS_MODULE  # durable: rows name it by this module's path
    trigger_source: TriggerSource = "timer"

    async def deliver(self, scope: str, effect: SendDelayed) -> DeliveryAnswer:
        """Fire the timer into the execution (``Executions.fire``), applied once."""
        return await self.apply(
            scope, lambda executions, key: self.fire(executions, scope, effect, key)
        )


class ExecutionInvokeDelivery(_Steps):
    """The invocation delivery of durable executions: answers of live invocations only."""

    __module__ = EXECUTIONS_MODULE  # durable: rows name it by this module's path

    async def deliver(
        self, scope: str, invoke_id: str, data: Any, caller_context: Any = None
    ) -> DeliveryAnswer:
        """``done.invoke.<invoke_id>`` with ``data``, if the invocation is still live."""
        answer = planner.invocation_done(invoke_id, data, caller_context=caller_context)
        return await self.apply_event(scope, live_answer(answer, generation=_generation()))

    async def deliver_failure(
        self,
        scope: str,
        invoke_id: str,
        reason: str,
        attempts: int,
        detail: str,
        caller_context: Any = None,
    ) -> DeliveryAnswer:
        """``error.communication.invoke.<invoke_id>`` with ``{reason, attempts, detail}``."""
        failure = {"reason": reason, "attempts": attempts, "detail": detail}
        answer = planner.invocation_failed(invoke_id, failure, caller_context=caller_context)
        return await self.apply_event(scope, live_answer(answer, generation=_generation()))


def _generation() -> int | None:
    """The macrostep that started the invocation of the running invocation job (None for
    an answer given outside one, e.g. after ``Deferred``): an answer of an earlier
    generation of a re-entered state's invoke id is declined."""
    job = current_job()
    if job is None or job.worker != INVOKE_WORKER or not isinstance(job.args, dict):
        return None
    macrostep = job.args.get("macrostep")
    if isinstance(macrostep, bool) or not isinstance(macrostep, int) or macrostep < 0:
        return None
    return macrostep


@dataclasses.dataclass(frozen=True, slots=True)
class PendingJob:
    """A pending timer job, or an unfinished invocation job, of one execution.

    ``kind`` is ``timer`` (``send_id``, ``event``, ``ordinal`` set) or ``invocation``
    (``invoke_id`` set), each None when the row's is unreadable (see :func:`pending_jobs`);
    ``scheduled_at`` is when it is due (UTC, as oban stores it).
    """

    job_id: int
    kind: str
    state: str
    send_id: str | None
    event: str | None
    ordinal: int | None
    invoke_id: str | None
    scheduled_at: datetime


PENDING_JOBS_LIMIT: Final = 1000
"""The most jobs :func:`pending_jobs` returns."""


async def pending_jobs(oban: Oban, execution_id: str, *, limit: int = 100) -> list[PendingJob]:
    """The execution's pending timers and unfinished invocations, earliest due first.

    A job row is read as anyone may have written it: a text field over ``MAX_ROW_STRING``
    characters, or an ordinal that is no JSON integer of at least 1, comes back as None, and the
    job is listed all the same (an operator still sees it, and can cancel it by its id); a
    due time past what a ``datetime`` holds (infinity, year 10000) comes back as
    ``datetime.max`` (``datetime.min`` before year 1).
    """
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 1 <= limit <= PENDING_JOBS_LIMIT
    ):
        raise ConfigError("limit", f"limit must be in 1..{PENDING_JOBS_LIMIT}, not {limit!r}")
    try:
        async with _statements.connection(oban, None) as db:
            cursor = await db.execute(
                _statements.statement(oban, "scope_jobs"),
                {
                    "scope": execution_id,
                    "limit": limit,
                    "max_string": _fields.MAX_ROW_STRING,
                    "max_digits": _fields.MAX_INTEGER_DIGITS,
                },
            )
            rows = await cursor.fetchall()
    except psycopg.Error as exc:
        raise StoreUnavailable(f"reading the jobs of {execution_id!r} failed: {exc}") from exc
    return [
        PendingJob(
            job_id=row[0],
            kind="invocation" if row[1] == INVOKE_WORKER else "timer",
            state=row[2],
            send_id=row[3],
            event=row[4],
            ordinal=_ordinal(row[5]),
            invoke_id=row[6],
            scheduled_at=row[7],
        )
        for row in rows
    ]


def _ordinal(value: object) -> int | None:
    """The ordinal ``scope_jobs`` read (a JSON number, short enough to read), as a timer
    job's own decoding takes it (``rows._fields.integer``); else None."""
    try:
        return _fields.integer({"ordinal": value}, "ordinal", 1)
    except UndecodableRow:
        return None
