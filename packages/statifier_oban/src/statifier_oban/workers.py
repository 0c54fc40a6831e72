"""The oban workers that run durable jobs. Their import paths are stored on every row.

``TimerWorker`` rebuilds the fired event from the stored effect and asks the delivery
named on the job. Outcomes: delivered (the job completes), discarded (the job is
cancelled with the reason on the row: the execution is gone), snoozed (rescheduled, no
attempt spent), undecodable (cancelled as such, never silently dropped), or an error
(an unresolvable delivery or codec, an invalid answer, a raising delivery: retried with
oban's backoff).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from oban import Cancel
from oban import Snooze as ObanSnooze
from oban.job import Job
from oban.worker import register_worker

from . import telemetry, timer_args
from .config import DEFAULT_DELIVERY
from .delivery import Delivered, Discarded, Snooze
from .errors import InvalidDelivery, UndecodableRow
from .names import META_DELIVERY, META_TIMEOUT
from .resolve import ResolutionError, resolve

logger = logging.getLogger("statifier_oban.workers")


def resolve_seam(path: Any, default: str, required: tuple[str, ...]) -> Any:
    """Resolve a delivery-like object named on a job's meta, or raise ``InvalidDelivery``."""
    if path is None:
        path = default
    if not isinstance(path, str):
        raise InvalidDelivery(f"the job names its delivery with {path!r}, not an import path")
    try:
        target = resolve(path)
    except ResolutionError as exc:
        raise InvalidDelivery(str(exc)) from exc
    missing = [name for name in required if not callable(getattr(target, name, None))]
    if missing:
        raise InvalidDelivery(f"{path!r} does not implement {', '.join(missing)}")
    return target


def bound_seconds(job: Job, margin_ms: int = 0) -> float | None:
    """The run-time bound stored on the job's meta, in seconds (None: unbounded)."""
    value = job.meta.get(META_TIMEOUT) if isinstance(job.meta, dict) else None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return (value + margin_ms) / 1000


class TimerWorker:
    """Fires one durable timer: decode, resolve the delivery, deliver, record the outcome."""

    def timeout(self, job: Job) -> float | None:
        """The bound fixed on the job at schedule time (``timer_timeout``), if any."""
        return bound_seconds(job)

    async def process(self, job: Job) -> Any:
        """Run the fired timer; see the module docstring for the outcomes."""
        try:
            scope, effect = timer_args.decode(job.args)
        except UndecodableRow as exc:
            logger.warning("timer job %s is undecodable: %s", job.id, exc)
            return Cancel(f"undecodable: {exc}")
        path = job.meta.get(META_DELIVERY) if isinstance(job.meta, dict) else None
        delivery = resolve_seam(path, DEFAULT_DELIVERY, ("deliver",))
        answer = delivery.deliver(scope, effect)
        if inspect.isawaitable(answer):
            answer = await answer
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
        if (
            isinstance(answer, Snooze)
            and isinstance(answer.seconds, int)
            and not isinstance(answer.seconds, bool)
            and answer.seconds > 0
        ):
            return ObanSnooze(answer.seconds)
        raise InvalidDelivery(f"delivery answered {answer!r}, not Delivered/Discarded/Snooze(n>0)")


register_worker(TimerWorker)
