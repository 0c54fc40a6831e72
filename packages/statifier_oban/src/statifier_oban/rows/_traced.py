"""The spans of job runs and job inserts (ADR 30), taken only when tracing is on.

A job inserted inside a span carries that span's context in its meta
(``_names.META_TRACE``, see :func:`carry`); the span of its run continues it
(:func:`consume`), whatever process runs it, however much later. The meta is read back as
untrusted input: the instrumentation ignores a carrier that is not one. Hot paths read
``statifier.instrumentation.current`` once and call these only when it is not None.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from oban import Cancel, Snooze
from oban.job import Job
from statifier import instrumentation
from statifier.instrumentation import Instrumentation, Span

from .._names import META_TRACE
from ._outcomes import Outcome


def carry(meta: dict[str, Any], tracer: Instrumentation) -> dict[str, Any]:
    """``meta`` with the current trace context under ``META_TRACE`` (when there is one)."""
    carried = tracer.carrier()
    if carried:
        meta[META_TRACE] = carried
    return meta


def job_facts(job: Job) -> dict[str, Any]:
    """The facts every job run's span has: its id, queue and attempt."""
    return {"job_id": job.id, "queue": job.queue, "attempt": job.attempt}


def lateness_ms(job: Job) -> int | None:
    """How long after its due time the job started (both times are the database's)."""
    due, started = job.scheduled_at, job.attempted_at
    if not isinstance(due, datetime) or not isinstance(started, datetime):
        return None
    try:
        late = started - due
    except TypeError:  # one naive, one aware: not comparable
        return None
    return max(0, round(late.total_seconds() * 1000))


async def consume(
    tracer: Instrumentation,
    operation: str,
    job: Job,
    run: Callable[[Span], Awaitable[Outcome]],
    **facts: Any,
) -> Outcome:
    """``run(span)`` inside a span of ``operation`` that continues the context the job
    carries; the span says how the run ended (see :func:`outcome_facts`)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    with tracer.span(operation, carried=meta.get(META_TRACE), **job_facts(job), **facts) as span:
        outcome = await run(span)
        span.set(**outcome_facts(outcome))
    return outcome


def outcome_facts(outcome: Outcome) -> dict[str, Any]:
    """How a run ended, from what its worker answers oban: completed, discarded (the
    delivery's reason), cancelled (a refused or undecodable row), snoozed."""
    if isinstance(outcome, Cancel):
        reason = str(outcome.reason)
        kind, sep, detail = reason.partition(": ")
        if sep and kind == "discarded":
            return {"outcome": "discarded", "reason": detail}
        return {"outcome": "cancelled", "reason": kind if sep else reason}
    if isinstance(outcome, Snooze):
        return {"outcome": "snoozed"}
    return {"outcome": "completed"}


async def answered(call: Awaitable[object], **facts: Any) -> object:
    """Await a delivery's ``call`` (an invocation's answer) inside an ``AnswerInvoke`` span
    when tracing is on; the answer's kind is its outcome."""
    tracer = instrumentation.current
    if tracer is None:
        return await call
    with tracer.span(instrumentation.ANSWER_INVOKE, **facts) as span:
        answer = await call
        span.set(outcome=type(answer).__name__.lower())
    return answer
