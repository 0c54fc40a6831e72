"""The timer worker: a fired timer job delivered to its execution.

``TimerWorker`` rebuilds the fired event from the stored effect and asks the delivery
named on the job. Outcomes: delivered (the job completes), discarded (the job is
cancelled with the reason on the row: the execution is gone), snoozed (rescheduled, no
attempt spent), undecodable or refused (cancelled at once with the reason on the row,
never silently dropped), or an error (an invalid answer, a raising delivery or codec:
retried with oban's backoff). A row naming a registered plug-in of the wrong kind (an
invoke delivery) is refused, and one whose ``meta.timeout`` no ``Config`` writes is
undecodable: both are cancelled on first sight, the reason naming the field.

Its durable name is ``statifier_oban.workers.TimerWorker`` (``_names.TIMER_WORKER``),
the module users import it from; importing that module registers it with oban.
"""

from __future__ import annotations

import logging

from oban import Cancel
from oban.job import Job
from oban.worker import register_worker
from statifier import instrumentation
from statifier.instrumentation import Span

from .. import telemetry
from .._config import DEFAULT_DELIVERY
from .._errors import InvalidDelivery, ResolutionError, UndecodableRow
from .._names import META_DELIVERY, WORKERS_MODULE
from ..delivery import Delivered, Discarded
from ..rows import _plugins
from ..rows._outcomes import Outcome, bound_seconds, plugin, refused, snooze, timeout_ms
from ..rows._traced import consume, lateness_ms
from . import _args

logger = logging.getLogger("statifier_oban.workers")


class TimerWorker:
    """Fires one durable timer: decode, resolve the delivery, deliver, record the outcome."""

    __module__ = WORKERS_MODULE  # rows name it ``statifier_oban.workers.TimerWorker``

    def timeout(self, job: Job) -> float | None:
        """The bound fixed on the job at schedule time (``timer_timeout``), if any."""
        return bound_seconds(job)

    async def process(self, job: Job) -> Outcome:
        """Run the fired timer; see the module docstring for the outcomes."""
        tracer = instrumentation.current
        if tracer is None:
            return await self._process(job, None)
        return await consume(
            tracer,
            instrumentation.FIRE_TIMER,
            job,
            lambda span: self._process(job, span),
            lateness_ms=lateness_ms(job),
        )

    async def _process(self, job: Job, span: Span | None) -> Outcome:
        try:
            scope, effect = _args.decode(job.args)
            timeout_ms(job)
        except UndecodableRow as exc:
            logger.warning("timer job %s is undecodable: %s", job.id, exc, extra={"job_id": job.id})
            return Cancel(f"undecodable: {exc}")
        if span is not None:
            span.set(
                scope=scope, event=effect.event, send_id=effect.send_id, ordinal=effect.ordinal
            )
        path = job.meta.get(META_DELIVERY) if isinstance(job.meta, dict) else None
        try:
            delivery = plugin(_plugins.timer_delivery, path, DEFAULT_DELIVERY, META_DELIVERY)
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
        later = snooze(answer)
        if later is not None:
            return later
        raise InvalidDelivery(f"delivery answered {answer!r}, not Delivered/Discarded/Snoozed(n>0)")


register_worker(TimerWorker)
