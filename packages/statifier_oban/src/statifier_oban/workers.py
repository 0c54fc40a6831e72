"""The oban workers that run durable jobs. Their import paths are stored on every row.

``TimerWorker`` rebuilds the fired event from the stored effect and asks the delivery
named on the job. Outcomes: delivered (the job completes), discarded (the job is
cancelled with the reason on the row: the execution is gone), snoozed (rescheduled, no
attempt spent), undecodable or refused (cancelled at once with the reason on the row,
never silently dropped), or an error (an invalid answer, a raising delivery or codec:
retried with oban's backoff). ``InvokeWorker`` delivers an invocation's answer the same
way; an answer its delivery snoozes (the execution is parked) reschedules the job, the
terminal failure included, so the answer is not lost with the attempts.

A row is refused when a delivery, codec, child starter or handler it names is not
registered in this process, or is not the plug-in it should be (ADR 13; a registered
invoke delivery named on a timer row is not a timer delivery): nothing is imported or
built for it, and retrying could not help, so it is cancelled at once, the reason naming
the field (``meta.delivery``). So is a row whose run-time bound (``meta.timeout``) is not
one a ``Config`` writes.

Public because it is durable: a process that runs the queues imports it (importing
registers the workers with oban), and ``TIMER_WORKER``, ``INVOKE_WORKER`` and
``CHILD_START_WORKER`` are the ``oban_jobs.worker`` values of the rows, for a host's or an
operator's own queries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from oban import Cancel, Snooze
from oban.job import Job
from oban.worker import register_worker
from statifier.values import brief

from . import _fan_out, _invoke_args, _plugins, _timer_args, telemetry
from . import _row_fields as fields
from ._config import (
    DEFAULT_DELIVERY,
    DEFAULT_INVOKE_DELIVERY,
    INVOKE_MARGIN_MS,
    MAX_BOUND_MS,
    MAX_INVOKE_BOUND_MS,
)
from ._errors import (
    InvalidDelivery,
    InvalidHandler,
    InvalidRunAnswer,
    InvocationTimeout,
    ResolutionError,
    RunFailed,
    UndecodableRow,
)
from ._handler import Deferred, Error, FanOut, InvokeHandler, Ok, RunContext
from ._invoke_args import InvocationRow
from ._names import (
    CHILD_START_WORKER,
    INVOKE_WORKER,
    META_CHILD_STARTER,
    META_DELIVERY,
    META_TIMEOUT,
    META_UNRESOLVED_HANDLER,
    TIMER_WORKER,
)
from .delivery import Delivered, Discarded, InvokeDelivery, Snoozed

__all__ = [
    "CHILD_START_WORKER",
    "INVOKE_WORKER",
    "TIMER_WORKER",
    "ChildStartWorker",
    "InvokeWorker",
    "TimerWorker",
]

logger = logging.getLogger("statifier_oban.workers")


type Outcome = Cancel | Snooze | None
"""What a worker's ``process`` returns to oban: cancel the job, snooze it, or complete it."""


def _plugin[T](resolver: Callable[[str], T], path: object, default: str, key: str) -> T:
    """The plug-in the job's ``meta.<key>`` names (``default`` if it names none);
    ``ResolutionError`` naming the field if the name is not an import path, is not
    registered, or is not the right plug-in."""
    if path is None:
        path = default
    if not isinstance(path, str):
        raise ResolutionError(f"meta.{key}: {brief(path)} is not an import path")
    try:
        return resolver(path)
    except ResolutionError as exc:
        raise ResolutionError(f"meta.{key}: {exc}") from exc


def refused(job: Job, exc: ResolutionError) -> Cancel:
    """Cancel a job whose row names what this process does not run (logged, reason kept)."""
    logger.warning("job %s (%s) refused: %s", job.id, job.worker, exc)
    return Cancel(f"refused: {exc}")


def bound_seconds(job: Job, margin_ms: int = 0, maximum: int = MAX_BOUND_MS) -> float | None:
    """The run-time bound stored on the job's meta, in seconds (None: unbounded).

    What oban asks before it runs the job; a bound no ``Config`` writes is None here (this
    hook must not raise) and the worker's ``process`` cancels the row (``timeout_ms``).
    """
    try:
        value = fields.bound_ms(job.meta, META_TIMEOUT, maximum)
    except UndecodableRow:
        return None
    return None if value is None else (value + margin_ms) / 1000


def timeout_ms(job: Job, maximum: int = MAX_BOUND_MS) -> int | None:
    """The job's ``meta.timeout`` (None: unbounded); ``UndecodableRow`` if it is not a bound
    a ``Config`` writes (``1..maximum`` milliseconds)."""
    return fields.bound_ms(job.meta, META_TIMEOUT, maximum)


class TimerWorker:
    """Fires one durable timer: decode, resolve the delivery, deliver, record the outcome."""

    def timeout(self, job: Job) -> float | None:
        """The bound fixed on the job at schedule time (``timer_timeout``), if any."""
        return bound_seconds(job)

    async def process(self, job: Job) -> Outcome:
        """Run the fired timer; see the module docstring for the outcomes."""
        try:
            scope, effect = _timer_args.decode(job.args)
            timeout_ms(job)
        except UndecodableRow as exc:
            logger.warning("timer job %s is undecodable: %s", job.id, exc)
            return Cancel(f"undecodable: {exc}")
        path = job.meta.get(META_DELIVERY) if isinstance(job.meta, dict) else None
        try:
            delivery = _plugin(_plugins.timer_delivery, path, DEFAULT_DELIVERY, META_DELIVERY)
        except ResolutionError as exc:
            return refused(job, exc)
        answer: object = await _plugins.settle(delivery.deliver(scope, effect))
        if isinstance(answer, Delivered) and not telemetry.handled(telemetry.TIMER_FIRED):
            return None  # the common case, when nobody listens: no event to build
        common = {
            "attempt": job.attempt,
            "scope": scope,
            "send_id": effect.send_id,
            "ordinal": effect.ordinal,
            "delivery": path if isinstance(path, str) else DEFAULT_DELIVERY,
            "job_id": job.id,
            "caller_context": effect.caller_context,
        }
        if isinstance(answer, Delivered):
            telemetry.emit(telemetry.TIMER_FIRED, **common)
            return None
        if isinstance(answer, Discarded):
            telemetry.emit(telemetry.TIMER_DISCARDED, reason=answer.reason, **common)
            return Cancel(f"discarded: {answer.reason}")
        later = _snooze(answer)
        if later is not None:
            return later
        raise InvalidDelivery(f"delivery answered {answer!r}, not Delivered/Discarded/Snoozed(n>0)")


def _snooze(answer: object) -> Snooze | None:
    """oban's ``Snooze`` for a valid ``Snoozed(seconds)`` answer (a positive int), else None."""
    if (
        isinstance(answer, Snoozed)
        and isinstance(answer.seconds, int)
        and not isinstance(answer.seconds, bool)
        and answer.seconds > 0
    ):
        return Snooze(answer.seconds)
    return None


def _resolve_handler(path: str) -> InvokeHandler | None:
    try:
        return _plugins.invoke_handler(path)
    except ResolutionError:
        return None


class InvokeWorker:
    """Runs one invocation: decode, resolve handler and delivery, run, answer."""

    def timeout(self, job: Job) -> float | None:
        """The ``invoke_timeout`` fixed at enqueue, plus a margin for the work around it."""
        return bound_seconds(job, INVOKE_MARGIN_MS, MAX_INVOKE_BOUND_MS)

    async def process(self, job: Job) -> Outcome:  # noqa: C901 - one outcome per answer of run
        """See ``statifier_oban.InvokeHandler`` for what each answer of ``run`` leads to."""
        meta = job.meta if isinstance(job.meta, dict) else {}
        try:
            row = _invoke_args.decode(job.args)
            bound = timeout_ms(job, MAX_INVOKE_BOUND_MS)
        except UndecodableRow as exc:
            await self._fail_undecodable(job, meta, exc)
            return Cancel(f"undecodable: {exc}")
        try:
            delivery = self._delivery(meta)
        except ResolutionError as exc:
            return refused(job, exc)
        handler = _resolve_handler(row.handler)
        if handler is None:
            if meta.get(META_UNRESOLVED_HANDLER) == "retry":
                raise InvalidHandler(f"handler {row.handler!r} does not resolve")
            await _plugins.settle(
                delivery.deliver_failure(
                    row.scope,
                    row.invoke_id,
                    "invalid_handler",
                    job.attempt,
                    row.handler,
                    row.invoke.caller_context,
                )
            )
            self._failed(job, row.scope, row.invoke_id, "invalid_handler", row.handler, None)
            return Cancel(f"invalid_handler: {row.handler}")
        context = RunContext(row.scope, row.invoke_id, job.attempt, job.max_attempts, job.id)
        terminal = job.attempt >= job.max_attempts
        try:
            seconds = None if bound is None else bound / 1000
            result = await self._run(handler, row, context, seconds)
        except Exception as exc:
            if terminal:
                detail = str(exc) or type(exc).__name__
                later = await self._deliver_failure(delivery, job, row, "run_crashed", detail)
                if later is not None:
                    return later
            raise
        if isinstance(result, Exception):
            result = Error(result)
        if isinstance(result, Ok):
            return await self._answer(delivery, job, meta, row, result.data)
        if isinstance(result, Deferred):
            telemetry.emit(telemetry.INVOKE_DEFERRED, **self._common(job, meta, row))
            return None
        if isinstance(result, FanOut):
            return await self._fan_out(handler, delivery, job, meta, row, result)
        if isinstance(result, Error):
            if terminal:
                reason = repr(result.reason)
                later = await self._deliver_failure(delivery, job, row, "run_failed", reason)
                if later is not None:
                    return later
            raise RunFailed(repr(result.reason))
        crash = InvalidRunAnswer(f"run answered {result!r}, not Ok/Error/FanOut/Deferred")
        if terminal:
            later = await self._deliver_failure(delivery, job, row, "run_crashed", str(crash))
            if later is not None:
                return later
        raise crash

    @staticmethod
    def _delivery(meta: dict[str, Any]) -> InvokeDelivery:
        return _plugin(
            _plugins.invoke_delivery,
            meta.get(META_DELIVERY),
            DEFAULT_INVOKE_DELIVERY,
            META_DELIVERY,
        )

    @staticmethod
    async def _run(
        handler: InvokeHandler, row: InvocationRow, context: RunContext, bound: float | None
    ) -> object:
        call = (
            handler.run(row.invoke, context)
            if handler.run_takes_context
            else handler.run(row.invoke)
        )
        if bound is None:
            return await _plugins.settle(call)
        deadline = asyncio.timeout(bound)
        try:
            async with deadline:
                return await _plugins.settle(call)
        except TimeoutError as exc:
            # Only the bound's own expiry is an overrun; a TimeoutError the handler raised
            # (an HTTP read timeout, say) is its failure, reported unchanged.
            if deadline.expired():
                raise InvocationTimeout(f"timed out after {round(bound * 1000)}ms") from exc
            raise

    @staticmethod
    def _common(job: Job, meta: dict[str, Any], row: InvocationRow) -> dict[str, Any]:
        delivery = meta.get(META_DELIVERY)
        return {
            "attempt": job.attempt,
            "scope": row.scope,
            "invoke_id": row.invoke_id,
            "macrostep": row.invoke.macrostep,
            "handler": row.handler,
            "delivery": delivery if isinstance(delivery, str) else DEFAULT_INVOKE_DELIVERY,
            "job_id": job.id,
        }

    async def _answer(
        self,
        delivery: InvokeDelivery,
        job: Job,
        meta: dict[str, Any],
        row: InvocationRow,
        data: object,
    ) -> Outcome:
        answer: object = await _plugins.settle(
            delivery.deliver(row.scope, row.invoke_id, data, row.invoke.caller_context)
        )
        if isinstance(answer, Delivered):
            telemetry.emit(telemetry.INVOKE_DELIVERED, **self._common(job, meta, row))
            return None
        if isinstance(answer, Discarded):
            telemetry.emit(
                telemetry.INVOKE_DISCARDED, reason=answer.reason, **self._common(job, meta, row)
            )
            return Cancel(f"discarded: {answer.reason}")
        later = _snooze(answer)
        if later is not None:
            return later
        raise InvalidDelivery(
            f"invoke delivery answered {answer!r}, not Delivered/Discarded/Snoozed(n>0)"
        )

    async def _fan_out(
        self,
        handler: InvokeHandler,
        delivery: InvokeDelivery,
        job: Job,
        meta: dict[str, Any],
        row: InvocationRow,
        result: FanOut,
    ) -> Outcome:
        config = handler.config()
        started = await _fan_out.start(
            config, dict(job.args), row.invoke, result.items, result.max_concurrency
        )
        if isinstance(started, _fan_out.Refused):
            await self._deliver_failure(delivery, job, row, "fan_out_refused", started.detail())
            return Cancel(f"fan_out_refused: {started.detail()}")
        if started == 0:
            return await self._answer(delivery, job, meta, row, [])
        telemetry.emit(
            telemetry.INVOKE_FAN_OUT,
            count=started,
            scope=row.scope,
            invoke_id=row.invoke_id,
            handler=row.handler,
            policy=_fan_out.policy_of(row.invoke),
            queue=config.invoke_queue,
            job_id=job.id,
            caller_context=row.invoke.caller_context,
        )
        return None

    async def _deliver_failure(
        self, delivery: InvokeDelivery, job: Job, row: InvocationRow, reason: str, detail: str
    ) -> Snooze | None:
        """Deliver the terminal failure; a ``Snooze`` when the delivery asked to be asked
        again later (a parked execution), so the answer is not lost with the attempts."""
        answer: object = await _plugins.settle(
            delivery.deliver_failure(
                row.scope, row.invoke_id, reason, job.attempt, detail, row.invoke.caller_context
            )
        )
        later = _snooze(answer)
        if later is None:
            self._failed(job, row.scope, row.invoke_id, reason, detail, row.handler)
        return later

    @staticmethod
    def _failed(
        job: Job, scope: str, invoke_id: str, reason: str, detail: str, handler: str | None
    ) -> None:
        telemetry.emit(
            telemetry.INVOKE_FAILED,
            attempts=job.attempt,
            scope=scope,
            invoke_id=invoke_id,
            reason=reason,
            detail=detail,
            handler=handler,
            job_id=job.id,
        )

    async def _fail_undecodable(self, job: Job, meta: dict[str, Any], exc: Exception) -> None:
        """Tell the execution about a corrupt row when its identity is still readable."""
        found = _invoke_args.identity(job.args)
        if found is None:
            logger.warning("invocation job %s is undecodable and unidentifiable: %s", job.id, exc)
            return
        scope, invoke_id = found
        try:
            delivery = self._delivery(meta)
        except ResolutionError:
            logger.warning("invocation job %s is undecodable; its delivery too: %s", job.id, exc)
            return
        await _plugins.settle(
            delivery.deliver_failure(scope, invoke_id, "undecodable", job.attempt, str(exc), None)
        )
        self._failed(job, scope, invoke_id, "undecodable", str(exc), None)


class ChildStartWorker:
    """Starts child ``index`` of a fan-out through the host's ``ChildStarter``, whose
    ``opts`` carry the ``policy`` and the child's ``item`` (when the row has one)."""

    def timeout(self, job: Job) -> float | None:
        """The ``child_start_timeout`` fixed at enqueue, if any."""
        return bound_seconds(job)

    async def process(self, job: Job) -> Outcome:
        """Decode, resolve the starter (refuse the row if it does not), start, record."""
        try:
            row = _invoke_args.decode(job.args)
            index, count, policy = _invoke_args.child_position(job.args)
            has_item, item = _invoke_args.child_item(job.args)
            timeout_ms(job)
        except UndecodableRow as exc:
            logger.warning("child start job %s is undecodable: %s", job.id, exc)
            return Cancel(f"undecodable: {exc}")
        meta = job.meta if isinstance(job.meta, dict) else {}
        path = meta.get(META_CHILD_STARTER)
        try:
            if path is None:
                raise ResolutionError("meta.child_starter: the child start job names none")
            starter = _plugin(_plugins.child_starter, path, "", META_CHILD_STARTER)
        except ResolutionError as exc:
            return refused(job, exc)
        opts: dict[str, Any] = {"policy": policy}
        if has_item:
            opts["item"] = item
        outcome = await _plugins.settle(
            starter.start_child(row.scope, row.invoke, index, count, opts)
        )
        if isinstance(outcome, Exception):
            raise outcome
        telemetry.emit(
            telemetry.INVOKE_CHILD_STARTED,
            attempt=job.attempt,
            scope=row.scope,
            invoke_id=row.invoke_id,
            index=index,
            count=count,
            job_id=job.id,
            caller_context=row.invoke.caller_context,
        )
        return None


register_worker(TimerWorker)
register_worker(InvokeWorker)
register_worker(ChildStartWorker)
