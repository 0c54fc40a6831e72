"""Durable executions on oban jobs: the adapters between statifier_persistence and oban.

Needs ``statifier_persistence`` (importing this module without it raises ImportError;
nothing else in statifier_oban imports it).

``ObanExecutor`` is statifier_persistence's ``EffectExecutor``: inside each step's
transaction, a delayed send to the execution becomes a timer job (``schedule`` with
``conn=``), a ``<cancel>`` cancels its jobs, an ``<invoke>`` of a registered handler type
becomes an invocation job, leaving its state cancels that job and its pending child
starts. It is a ``FanOutExecutor`` too: a settled fan-out's answer and the cancelling of
its children are jobs of ``statifier_oban.children``.

``ExecutionDelivery`` (timers) and ``ExecutionInvokeDelivery`` (invocation answers) feed
fired jobs back through ``Executions.step``, with the job's id as the step key, so a job
oban delivers twice (a worker killed after the step committed) changes the chart once.
They find the process's ``Executions`` through :func:`use` (``statifier-oban worker``
calls it); answers:

* stepped, or already applied: ``Delivered`` (the job completes);
* the execution is terminal: ``Discarded(status)`` (the job is cancelled with it);
* no such execution: ``Discarded("terminated")``;
* parked (``needs_migration``): ``Snoozed`` (a parked execution keeps its timers);
* a timer whose send the execution no longer has armed (cancelled since it was armed,
  even while its job ran): ``Discarded("cancelled")`` (SCXML 6.3: never delivered);
* an invocation answer for an invocation that is no longer live: ``Discarded`` with
  ``invocation_not_live`` (SCXML 6.4: never delivered), or ``invocation_superseded``
  when its state was left and entered again (the live invoke id is a later generation's).

Anything else a step raises (an identity mismatch, the database) is raised, so the job
retries with backoff.

It runs charts invoked as child executions too (``<invoke type="scxml">``): every message
between a parent and its child is written into the receiver's mailbox with a
``MessageWorker`` job (``deliver_message``), which steps it in (``Executions.receive``),
keyed by the job; a cancelled execution's timer jobs are cancelled (``drop_timers``).

A ``<send type="basichttp">`` the executor's allow-list (``basichttp=``, an
``OutboundPolicy``) lets through is a ``PostWorker`` job stored in the step; the job makes
the POST (retried), and a refusal or a final failure raises ``error.communication`` in the
execution (``Executions.send_failed``, keyed by the job).

``TimerPins`` is the pin source of pending timers: retiring a chart revision
(``Executions.retire(..., pin_sources=[TimerPins(config)])``) is refused while a timer of
one of its executions is pending.

The code: ``_executor`` (the executor, the deliveries, ``use``), ``_messages`` (the message
worker), ``_posts`` and ``_post_jobs`` (the BasicHTTP POST worker and its rows), ``_pins``
(the timer pin source) and ``_children`` (a fan-out's children as executions, public as
``statifier_oban.children``). Rows name the deliveries and the message and POST workers by
this module's path.
"""

from __future__ import annotations

from .._errors import NoExecutions
from ._executor import (
    EXECUTION_CHILD_STARTER,
    PARKED_SNOOZE_S,
    ExecutionDelivery,
    ExecutionInvokeDelivery,
    ObanExecutor,
    PendingJob,
    current,
    current_config,
    current_executor,
    execution_config,
    pending_jobs,
    use,
)
from ._messages import MessageWorker
from ._pins import TimerPins
from ._posts import PostWorker

__all__ = [
    "EXECUTION_CHILD_STARTER",
    "PARKED_SNOOZE_S",
    "ExecutionDelivery",
    "ExecutionInvokeDelivery",
    "MessageWorker",
    "NoExecutions",
    "ObanExecutor",
    "PendingJob",
    "PostWorker",
    "TimerPins",
    "current",
    "current_config",
    "current_executor",
    "execution_config",
    "pending_jobs",
    "use",
]
