"""The invocation workers: an invocation's run, and a fan-out's child starts.

``InvokeWorker`` runs the handler a row names and delivers its answer the way the timer
worker delivers a fired timer; an answer its delivery snoozes (the execution is parked)
reschedules the job, the terminal failure included, so the answer is not lost with the
attempts. ``ChildStartWorker`` starts one child of a fan-out through the host's
``ChildStarter``; a starter that returns ``Snoozed(seconds)`` (``ExecutionChildStarter``
for a parked parent) snoozes the job, which keeps its attempts.

A row is refused when a delivery, codec, child starter or handler it names is not
registered in this process, or is not the plug-in it should be (ADR 13; a timer delivery
is not an invoke delivery): nothing is imported or built for it, and retrying could not
help, so it is cancelled at once, the reason naming the field (``meta.delivery``). A row
whose ``meta.timeout`` no ``Config`` writes is undecodable, cancelled at once too (its
execution told, as for undecodable args).

Their durable names are ``statifier_oban.workers.InvokeWorker`` and
``statifier_oban.workers.ChildStartWorker`` (``_names``), the module users import them
from; importing that module registers them with oban.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from oban import Cancel, Snooze
from oban.job import Job
from oban.worker import register_worker
from statifier import instrumentation
from statifier.instrumentation import Span

from .. import telemetry
from .._config import DEFAULT_INVOKE_DELIVERY, INVOKE_MARGIN_MS, MAX_INVOKE_BOUND_MS
from .._errors import (
    FanOutError,
    InvalidDelivery,
    InvalidHandler,
    InvalidRunAnswer,
    InvocationTimeout,
    ResolutionError,
    RunFailed,
    UndecodableRow,
)
from .._names import (
    META_ANSWER,
    META_CHILD_STARTER,
    META_DELIVERY,
    META_UNRESOLVED_HANDLER,
    WORKERS_MODULE,
)
from ..delivery import Delivered, Discarded, InvokeDelivery, Snoozed
from ..rows import _plugins
from ..rows._outcomes import Outcome, bound_seconds, plugin, refused, snooze, timeout_ms
from ..rows._traced import answered, consume
from . import _args, _fan_out
from ._args import InvocationRow
from ._handler import Deferred, Error, FanOut, InvokeHandler, Ok, RunContext, invoke_handler

logger = logging.getLogger("statifier_oban.workers")


def _resolve_handler(path: str) -> InvokeHandler | None:
    try:
        return invoke_handler(path)
    except ResolutionError:
        return None


class InvokeWorker:
    """Runs one invocation: decode, resolve handler and delivery, run, answer."""

    __module__ = WORKERS_MODULE  # rows name it ``statifier_oban.workers.InvokeWorker``

    def timeout(self, job: Job) -> float | None:
        """The ``invoke_timeout`` fixed at enqueue, plus a margin for the work around it."""
        return bound_seconds(job, INVOKE_MARGIN_MS, MAX_INVOKE_BOUND_MS)

    async def process(self, job: Job) -> Outcome:
        """See ``statifier_oban.InvokeHandler`` for what each answer of ``run`` leads to."""
        tracer = instrumentation.current
        if tracer is None:
            return await self._process(job, None)
        return await consume(
            tracer, instrumentation.RUN_INVOKE, job, lambda span: self._process(job, span)
        )

    async def _process(self, job: Job, span: Span | None) -> Outcome:  # noqa: C901 - one outcome per answer of run
        meta = job.meta if isinstance(job.meta, dict) else {}
        try:
            row = _args.decode(job.args)
            bound = timeout_ms(job, MAX_INVOKE_BOUND_MS)
        except UndecodableRow as exc:
            await self._fail_undecodable(job, meta, exc)
            return Cancel(f"undecodable: {exc}")
        if span is not None:
            span.set(
                scope=row.scope,
                invoke_id=row.invoke_id,
                invoke_type=row.invoke.type,
                handler=row.handler,
            )
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
        kept = meta.get(META_ANSWER)
        if isinstance(kept, dict) and "data" in kept:
            # The handler ran and answered before; only the delivery waited (a parked
            # execution): its answer is delivered, its side effects not made again.
            return await self._answer(delivery, job, meta, row, kept["data"])
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
        return plugin(
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
        answer = await answered(
            _plugins.settle(
                delivery.deliver(row.scope, row.invoke_id, data, row.invoke.caller_context)
            ),
            scope=row.scope,
            invoke_id=row.invoke_id,
            invoke_type=row.invoke.type,
        )
        if isinstance(answer, Delivered):
            telemetry.emit(telemetry.INVOKE_DELIVERED, **self._common(job, meta, row))
            return None
        if isinstance(answer, Discarded):
            telemetry.emit(
                telemetry.INVOKE_DISCARDED, reason=answer.reason, **self._common(job, meta, row)
            )
            return Cancel(f"discarded: {answer.reason}")
        later = snooze(answer)
        if later is not None:
            # The answer waits on the job: the next attempt delivers it without a new run.
            return Snooze(later.seconds, meta={META_ANSWER: {"data": data}})
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
        answer = await answered(
            _plugins.settle(
                delivery.deliver_failure(
                    row.scope, row.invoke_id, reason, job.attempt, detail, row.invoke.caller_context
                )
            ),
            scope=row.scope,
            invoke_id=row.invoke_id,
            invoke_type=row.invoke.type,
            reason=reason,
        )
        later = snooze(answer)
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
        found = _args.identity(job.args)
        if found is None:
            logger.warning(
                "invocation job %s is undecodable and unidentifiable: %s",
                job.id,
                exc,
                extra={"job_id": job.id},
            )
            return
        scope, invoke_id = found
        try:
            delivery = self._delivery(meta)
        except ResolutionError:
            logger.warning(
                "invocation job %s is undecodable; its delivery too: %s",
                job.id,
                exc,
                extra={"job_id": job.id, "scope": scope, "invoke_id": invoke_id},
            )
            return
        await _plugins.settle(
            delivery.deliver_failure(scope, invoke_id, "undecodable", job.attempt, str(exc), None)
        )
        self._failed(job, scope, invoke_id, "undecodable", str(exc), None)


class ChildStartWorker:
    """Starts child ``index`` of a fan-out through the host's ``ChildStarter``, whose
    ``opts`` carry the ``policy`` and the child's ``item`` (when the row has one)."""

    __module__ = WORKERS_MODULE  # rows name it ``statifier_oban.workers.ChildStartWorker``

    def timeout(self, job: Job) -> float | None:
        """The ``child_start_timeout`` fixed at enqueue, if any."""
        return bound_seconds(job)

    async def process(self, job: Job) -> Outcome:
        """Decode, resolve the starter (refuse the row if it does not), start, record."""
        tracer = instrumentation.current
        if tracer is None:
            return await self._process(job, None)
        return await consume(
            tracer, instrumentation.START_CHILD, job, lambda span: self._process(job, span)
        )

    async def _process(self, job: Job, span: Span | None) -> Outcome:
        try:
            row = _args.decode(job.args)
            index, count, policy = _args.child_position(job.args)
            has_item, item = _args.child_item(job.args)
            timeout_ms(job)
        except UndecodableRow as exc:
            logger.warning(
                "child start job %s is undecodable: %s", job.id, exc, extra={"job_id": job.id}
            )
            return Cancel(f"undecodable: {exc}")
        if span is not None:
            span.set(scope=row.scope, invoke_id=row.invoke_id, index=index)
        meta = job.meta if isinstance(job.meta, dict) else {}
        path = meta.get(META_CHILD_STARTER)
        try:
            if path is None:
                raise ResolutionError("meta.child_starter: the child start job names none")
            starter = plugin(_plugins.child_starter, path, "", META_CHILD_STARTER)
        except ResolutionError as exc:
            return refused(job, exc)
        opts: dict[str, Any] = {"policy": policy}
        if has_item:
            opts["item"] = item
        outcome = await _plugins.settle(
            starter.start_child(row.scope, row.invoke, index, count, opts)
        )
        if isinstance(outcome, Snoozed):
            # A wait with no end known (a parked parent): retrying with backoff would use
            # the attempts up and drop the start for good, so the attempt is given back.
            later = snooze(outcome)
            if later is None:
                raise FanOutError(f"the child starter answered {outcome!r}, not Snoozed(n>0)")
            return later
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


register_worker(InvokeWorker)
register_worker(ChildStartWorker)
