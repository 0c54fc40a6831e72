"""The deliveries of the messages between a parent execution and the charts it invoked
(public as ``statifier_oban.executions.MessageWorker``; rows name it by that path).

The step that writes a message into an execution's mailbox stores a ``MessageWorker`` job
in its transaction (``ObanExecutor.deliver_message``). The job steps the receiver
(``Executions.receive``) keyed by itself, which applies the oldest message of the
mailbox: applied once however often oban runs the job, in the order sent whichever job
runs first (see ``statifier_persistence``'s ``_messages``).
"""

from __future__ import annotations

import logging

from oban import Cancel, Snooze
from oban.job import Job
from statifier.values import brief
from statifier_persistence import NO_MESSAGE

from .._names import EXECUTIONS_MODULE
from ..delivery import Delivered, Discarded, Snoozed
from ..rows._outcomes import Outcome
from ._executor import _Steps

logger = logging.getLogger("statifier_oban.executions")


class MessageWorker:
    """Steps the oldest message of an execution's mailbox into it; see the module docstring.

    Outcomes: applied (or applied by an earlier run, or by another delivery: the mailbox
    was empty) completes; a receiver that finished or is gone, or a message it declines
    (from a child no longer its invocation's), cancels with ``discarded: <reason>``; a
    parked receiver snoozes (the message waits); anything else raises, and the job retries.
    """

    __module__ = EXECUTIONS_MODULE  # durable: rows name it by this module's path

    async def process(self, job: Job) -> Outcome:
        """Receive the oldest message into the execution the job names."""
        args = job.args if isinstance(job.args, dict) else {}
        execution_id = args.get("scope")
        if not isinstance(execution_id, str) or not execution_id:
            logger.warning(
                "message job %s is undecodable: %s",
                job.id,
                brief(job.args),
                extra={"job_id": job.id},
            )
            return Cancel("undecodable: a message job names its receiver as scope")
        answer = await _Steps().apply(
            execution_id, lambda executions, key: executions.receive(execution_id, key=key)
        )
        match answer:
            case Delivered():
                return None
            case Discarded(reason=reason):
                return None if reason == NO_MESSAGE else Cancel(f"discarded: {reason}")
            case Snoozed(seconds=seconds):
                return Snooze(seconds)
