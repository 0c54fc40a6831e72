"""The BasicHTTP sends of durable executions (public as
``statifier_oban.executions.PostWorker``; rows name it by that path).

A step that makes a ``<send type="basichttp">`` (or a delayed one firing) stores a
``PostWorker`` job in its transaction (``ObanExecutor.post``), once the executor's
``OutboundPolicy`` allows the URL. The job makes the POST with the process's
``BasicHTTPClient`` under the same policy (its addresses checked as it connects), one try
per attempt, oban's backoff between them, every try carrying the same ``Idempotency-Key``
(``<execution id>/<job id>``). A refusal, a final failure (a 3xx or 4xx answer) or the
last attempt's failure raises ``error.communication`` in the execution
(``Executions.send_failed``, keyed by the job: applied once), with the reason, the last
status and the attempts in its data.
"""

from __future__ import annotations

import logging

from oban import Cancel
from oban.job import Job
from statifier import instrumentation
from statifier.basichttp import PostFailed, PostRefused
from statifier.core import planner
from statifier.core.events import Event

from .._errors import PostFailedAgain, UndecodableRow
from .._names import EXECUTIONS_MODULE
from ..delivery import Delivered, Discarded, Snoozed
from ..rows._outcomes import Outcome, snooze
from . import _post_jobs
from ._executor import _Steps, current_executor

logger = logging.getLogger("statifier_oban.executions")


class PostWorker:
    """Makes one BasicHTTP POST of an execution; see the module docstring.

    Outcomes: a 2xx answer completes; a failure that may pass raises (oban retries) until
    the last attempt; a refusal or a final failure steps ``error.communication`` into the
    execution and completes (cancelled, ``discarded: <reason>``, when the execution has
    finished or is gone; snoozed while it is parked, the POST then tried again).
    """

    __module__ = EXECUTIONS_MODULE  # durable: rows name it by this module's path

    async def process(self, job: Job) -> Outcome:
        """POST the request the job holds; see the class docstring."""
        try:
            row = _post_jobs.decode(job.args)
        except UndecodableRow as exc:
            logger.warning("BasicHTTP job %s is undecodable: %s", job.id, exc)
            return Cancel(f"undecodable: {exc}")
        executor = current_executor()
        request = row.request
        try:
            with instrumentation.continued(_post_jobs.carried(job.meta)):
                key = f"{row.scope}/{job.id}"
                await executor.basichttp_client().post(request, idempotency_key=key)
            return None
        except PostRefused as refused:
            failure = planner.post_failed(request.send_id, refused.reason, attempts=job.attempt)
        except PostFailed as failed:
            if failed.retry and job.attempt < job.max_attempts:
                raise PostFailedAgain(f"{failed.reason} (attempt {job.attempt})") from None
            failure = planner.post_failed(
                request.send_id, failed.reason, status=failed.status, attempts=job.attempt
            )
        logger.warning(
            "%s: BasicHTTP send %s to %s failed: %s",
            row.scope,
            request.send_id,
            request.url[:200],
            failure.data["message"],
        )
        return await _raise_in(row.scope, failure)


class _FailureSteps(_Steps):
    """Steps a failed POST's error into its execution, as the job's (source ``http``)."""

    trigger_source = "http"


async def _raise_in(scope: str, failure: Event) -> Outcome:
    answer = await _FailureSteps().apply(
        scope, lambda executions, key: executions.send_failed(scope, failure, key=key)
    )
    match answer:
        case Delivered():
            return None
        case Discarded(reason=reason):
            return Cancel(f"discarded: {reason}")
        case Snoozed():
            return snooze(answer)
    return None
