"""A fan-out's children as durable executions (public as ``statifier_oban.children``, whose
docstring follows a fan-out through its pieces); rows name its classes by that path."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from oban import Cancel, Snooze
from oban.job import Job
from statifier import instrumentation
from statifier.core.effects import Invoke
from statifier.instrumentation import Span
from statifier.values import brief
from statifier_persistence import (
    MAX_FAN_OUT_CHILDREN,
    ExecutionNotFound,
    FanOutKey,
    NeedsMigration,
    Trigger,
    live_answer,
    triggered_by,
)

from .. import telemetry
from .._config import Config
from .._names import CHILDREN_MODULE
from ..delivery import Delivered, Discarded, Snoozed
from ..invocations._handler import Error, FanOut, InvokeHandler, RunResult
from ..rows._outcomes import Outcome
from ..rows._resolve import path_of
from ..rows._traced import consume
from ..store import _statements
from ._executor import (
    ExecutionInvokeDelivery,
    _require,
    _Steps,
    current,
    current_config,
    current_executor,
    job_trigger,
)

__all__ = ["CascadeWorker", "ExecutionChildStarter", "MapHandler", "SettlementWorker"]

logger = logging.getLogger("statifier_oban.children")

SETTLEMENT_DELIVERY = path_of(ExecutionInvokeDelivery)
"""The delivery whose answers a settlement gives (named in its telemetry)."""


class MapHandler(InvokeHandler):
    """Fans an invocation out over ``params["items"]``; see the module docstring.

    A map without a ``chart`` param fails (``run_failed`` on its last attempt); items that
    are not a list are refused at once (``fan_out_refused``).
    """

    __module__ = CHILDREN_MODULE  # durable: rows name it by this module's path

    async def run(self, invoke: Invoke) -> RunResult:
        """``FanOut(items)``, or ``Error`` when the params name no chart."""
        params = invoke.params if isinstance(invoke.params, dict) else {}
        chart = params.get("chart")
        if not isinstance(chart, str) or not chart:
            return Error("a map needs a 'chart' param: the name of the children's chart")
        items: Any = params.get("items")  # not a list: the fan-out refuses it
        return FanOut(items)

    def config(self) -> Config:
        """The config of the installed ``Executions``' executor, its ``max_fan_out`` at
        most ``MAX_FAN_OUT_CHILDREN`` (a wider map is refused at once, not retried)."""
        config = current_config()
        if config.max_fan_out <= MAX_FAN_OUT_CHILDREN:
            return config
        return dataclasses.replace(config, max_fan_out=MAX_FAN_OUT_CHILDREN)


class ExecutionChildStarter:
    """Creates a fan-out's child ``index`` as an execution (``Executions.start_child``).

    The fan-out is ``(parent scope, invoke_id, the invocation's macrostep)``; the
    children's chart is the newest registered revision named by ``params["chart"]`` that
    is not retired,
    ``params["failed_states"]`` names the final states that count as a failure. Override
    :meth:`datamodel` to seed children otherwise. Raising makes the start job retry; a
    parked parent snoozes it (``parked_snooze_s``, as its timers and messages), keeping
    its attempts.
    """

    __module__ = CHILDREN_MODULE  # durable: rows name it by this module's path

    def datamodel(self, invoke: Invoke, index: int, item: Any) -> dict[str, Any]:
        """The child's seeded variables: ``item``."""
        return {"item": item}

    async def start_child(
        self, parent_scope: str, invoke: Invoke, index: int, count: int, opts: dict[str, Any]
    ) -> Snoozed | None:
        """Make sure child ``index`` exists (or is not needed any more); ``Snoozed`` while
        the parent is parked (``ChildStartWorker`` snoozes the job)."""
        params = invoke.params if isinstance(invoke.params, dict) else {}
        chart: Any = params.get("chart")  # checked by start_child
        fan_out = FanOutKey(parent_scope, invoke.invoke_id, invoke.macrostep)
        installed = _require()
        try:
            with triggered_by(job_trigger("parent")):
                started = await installed.executions.start_child(
                    fan_out,
                    index,
                    count,
                    chart=chart,
                    policy=opts.get("policy", "all"),
                    datamodel=self.datamodel(invoke, index, opts.get("item")),
                    failed_states=params.get("failed_states", ()),
                    caller_context=invoke.caller_context,
                )
        except NeedsMigration:
            # Parked for as long as an operator takes: a retry with backoff would use the
            # attempts up meanwhile and drop the start (the fan-out never settling), so it
            # snoozes as the parent's timers and messages do.
            logger.info(
                "child %s of %r (%s): parent parked",
                index,
                invoke.invoke_id,
                parent_scope,
                extra={"scope": parent_scope, "invoke_id": invoke.invoke_id, "index": index},
            )
            return Snoozed(installed.parked_snooze_s)
        if started.outcome == "not_needed":
            logger.info(
                "child %s of %r (%s): not started, %s",
                index,
                invoke.invoke_id,
                parent_scope,
                started.reason,
                extra={"scope": parent_scope, "invoke_id": invoke.invoke_id, "index": index},
            )
        return None


def _fan_out_of(job: Job, kind: str) -> FanOutKey | Cancel:
    """The fan-out a settlement or cascade job names; a ``Cancel`` (logged) if its args are
    unusable."""
    args = job.args if isinstance(job.args, dict) else {}
    scope, invoke_id, generation = args.get("scope"), args.get("invoke_id"), args.get("macrostep")
    if (
        isinstance(scope, str)
        and scope
        and isinstance(invoke_id, str)
        and invoke_id
        and isinstance(generation, int)
        and not isinstance(generation, bool)
        and generation >= 0
    ):
        return FanOutKey(scope, invoke_id, generation)
    logger.warning(
        "%s job %s is undecodable: %s", kind, job.id, brief(job.args), extra={"job_id": job.id}
    )
    return Cancel(f"undecodable: a {kind} job names scope, invoke_id and macrostep")


class SettlementWorker:
    """Steps a settled fan-out's answer into its parent, once; see the module docstring."""

    __module__ = CHILDREN_MODULE  # durable: rows name it by this module's path

    async def process(self, job: Job) -> Outcome:
        """Build the answer from the children, step it (keyed by this job), record it."""
        tracer = instrumentation.current
        if tracer is None:
            return await self._process(job, None)
        return await consume(
            tracer, instrumentation.SETTLE_FAN_OUT, job, lambda span: self._process(job, span)
        )

    async def _process(self, job: Job, span: Span | None) -> Outcome:
        fan_out = _fan_out_of(job, "settlement")
        if isinstance(fan_out, Cancel):
            return fan_out
        if span is not None:
            span.set(scope=fan_out.parent_id, invoke_id=fan_out.invoke_id)
        answer = await current().fan_out_answer(fan_out)
        if answer is None:
            return Cancel("discarded: fan_out_not_settled")
        if await current_executor().superseded(None, fan_out):
            # The parent re-entered the invoking state: its live invocation is another one.
            return Cancel("discarded: invocation_superseded")
        delivered = await _Steps().apply_event(
            fan_out.parent_id, live_answer(answer, generation=fan_out.generation)
        )
        common = {
            "attempt": job.attempt,
            "scope": fan_out.parent_id,
            "invoke_id": fan_out.invoke_id,
            "macrostep": fan_out.generation,
            "handler": None,
            "delivery": SETTLEMENT_DELIVERY,
            "job_id": job.id,
        }
        match delivered:
            case Delivered():
                telemetry.emit(telemetry.INVOKE_DELIVERED, **common)
                return None
            case Discarded(reason=reason):
                telemetry.emit(telemetry.INVOKE_DISCARDED, reason=reason, **common)
                return Cancel(f"discarded: {reason}")
            case Snoozed(seconds=seconds):
                return Snooze(seconds)


class CascadeWorker:
    """Cancels a failed or abandoned fan-out's remaining children and pending starts."""

    __module__ = CHILDREN_MODULE  # durable: rows name it by this module's path

    async def process(self, job: Job) -> Outcome:
        """Cancel what still runs; snooze while a child is parked (it cannot be cancelled)."""
        fan_out = _fan_out_of(job, "cascade")
        if isinstance(fan_out, Cancel):
            return fan_out
        installed = _require()
        await _cancel_pending_starts(current_config(), fan_out)
        parked: list[str] = []
        for child_id in await installed.executions.unfinished_children(fan_out):
            try:
                with triggered_by(Trigger("parent", job_id=job.id)):
                    await installed.executions.cancel(child_id)
            except NeedsMigration:
                parked.append(child_id)
            except ExecutionNotFound:
                continue
        if parked:
            logger.info(
                "cascade of %r (%s): %d parked",
                fan_out.invoke_id,
                fan_out.parent_id,
                len(parked),
                extra={"scope": fan_out.parent_id, "invoke_id": fan_out.invoke_id},
            )
            return Snooze(installed.parked_snooze_s)
        return None


async def _cancel_pending_starts(config: Config, fan_out: FanOutKey) -> None:
    """Cancel this fan-out's child starts that have not run (this generation only: a
    re-entered invoking state's new fan-out keeps its starts)."""
    async with _statements.connection(config.oban, None) as db:
        cursor = await db.execute(
            _statements.statement(config.oban, "cancel_child_starts"),
            {
                "scope": fan_out.parent_id,
                "invoke_id": fan_out.invoke_id,
                "macrostep": str(fan_out.generation),
                "reason": f"fan-out {fan_out.invoke_id!r} settled or abandoned",
            },
        )
        count = len(await cursor.fetchall())
    telemetry.emit(
        telemetry.INVOKE_UNSTARTED_CANCELLED,
        count=count,
        scope=fan_out.parent_id,
        invoke_id=fan_out.invoke_id,
    )
