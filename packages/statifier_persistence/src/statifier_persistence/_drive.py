"""The execution driver: performs one transaction's effects through the planner.

This is the fourth driver on ``statifier.core.planner`` (after the live session, the
virtual driver and the durable timer deliveries): it dispatches on the planner's
instructions and never reads a target string or builds an event itself. What it does
with each (ADR 12):

* ``Deliver`` to the execution itself (an immediate ``<send>`` with no target): queued,
  then driven as the next macrostep *in the same transaction*, in order, at most
  ``Limits.max_self_sends`` per transaction (beyond it the execution fails, reason
  ``self_send_limit``). To ``#_internal``: ``deliver_internal``. To a live invocation: a
  message to its child execution when it is an invoked chart (``_invoked``), else the
  executor's ``forward``. To ``#_parent`` from an invoked chart: a message to the parent.
  To anyone else: the host hook's ``deliver``. Whatever cannot be delivered raises
  ``planner.undeliverable`` in the chart.
* ``Post`` (a BasicHTTP send): the executor's ``post``, when it is a ``PostExecutor``
  (a durable job), up to ``Limits.max_posts`` per transaction; refused
  (``planner.post_failed``, at once) past it, or when the executor is none or refuses.
  A failure after the step comes back as ``Executions.send_failed`` (``failed``).
* ``Schedule``: a delayed send, whatever its target, becomes a timer through the
  executor, and is armed (``_armed``). An executor with ``TimerBatches`` checks it at
  once and the drive keeps it in ``timers``, stored before anything else reaches the
  executor or the host, or by whoever stores the drive (ADR 32). When it fires
  (``fired``) it is delivered as an immediate send would be if it is still armed, and
  declined otherwise.
* ``CancelTimers``, ``StartInvocation``, ``StopInvocation``: the executor; the armed list
  follows; a stopped invocation's open fan-outs are abandoned too (``_settlement``). An
  ``<invoke type="scxml">`` starts (and its stop cancels) a child execution instead.
* ``Forward`` (autoforward): a message to an invoked child, else the executor's
  ``forward``; a refusal is logged.
* ``Report``: collected, and handed to the host after the transaction commits.
* ``Halt``: ``Done`` makes the execution ``completed`` (``cancelled`` when cancelling) and
  records its outcome (the configuration at exit, the donedata), and an invoked chart
  that completed tells its parent (``done``); ``BudgetExhausted`` makes it ``failed``.
  Cancelling also cancels the timers it had armed.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Container
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from statifier import cancel, deliver_internal, handle_event
from statifier.chart.matching import unmatched_notice
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import Event
from statifier.core.state import MachineState

from ._armed import Armed
from ._errors import EffectRefused
from ._executor import EffectExecutor, HostHook, PostExecutor, TimerBatches
from ._invoked import InvokedCharts, StartRefused, invoked_by
from ._journal import Draft
from ._limits import Limits
from ._messages import MailboxExecutor
from ._records import Execution, ExecutionStatus
from ._settlement import Settlement

logger = logging.getLogger("statifier_persistence")

NO_POSTS = "the executor makes no BasicHTTP POSTs (it is no PostExecutor)"
"""Why a BasicHTTP send of an execution whose executor cannot make it fails."""


@dataclass(slots=True)
class Drive:
    """One transaction's drive of one execution; see the module docstring."""

    execution: Execution
    state: MachineState
    conn: AsyncConnection[Any]
    executor: EffectExecutor
    host: HostHook
    limits: Limits
    routes: Container[str]
    status: ExecutionStatus = "active"
    failure: dict[str, Any] | None = None
    outcome: dict[str, Any] | None = None
    settlement: Settlement | None = None
    invoked: InvokedCharts | None = None
    armed: Armed = field(default_factory=Armed)
    cancelling: bool = False
    effects: list[fx.Effect] = field(default_factory=list)
    reports: list[fx.Log | fx.ErrorRaised] = field(default_factory=list)
    started: list[tuple[Execution, Drive, Draft | None]] = field(default_factory=list)
    """The child executions this drive started (stored, their drives and history drafts),
    answered once it commits."""
    start: MachineState | None = None
    """The position the drive started from (None: a creation, which started from none)."""
    driven: Event | None = None
    """The event the drive was asked to drive (a step's, or a fired timer's)."""
    transition_taken: bool | None = None
    """Whether ``driven``'s macrostep took a transition (None: it was not the execution's
    own macrostep, e.g. a timer sent elsewhere)."""
    unmatched: str | None = None
    """The notice when ``driven`` took no transition (``statifier.chart.matching``)."""
    refused: set[str] = field(default_factory=set)
    """Send and invoke ids whose timer or invocation the executor refused."""
    batches: TimerBatches | None = None
    """The executor, when it stores timers in batches (``TimerBatches``)."""
    timers: list[Any] = field(default_factory=list)
    """Timers prepared by ``batches`` and not stored yet (``flush_timers``)."""
    posts: int = 0
    """The BasicHTTP POSTs the executor stored in this drive (``Limits.max_posts``)."""
    _own: deque[Event] = field(default_factory=deque)
    _internal: deque[Event] = field(default_factory=deque)

    @property
    def scope(self) -> str:
        """The execution id: the session id of the chart and the scope of its jobs."""
        return self.execution.id

    def _live(self) -> bool:
        return self.status == "active" and self.state.running

    async def event(self, event: Event) -> None:
        """Drive an external event, then everything it sends the execution itself."""
        before = self.state
        self.driven = event
        self.state, effects = handle_event(before, event, routes=self.routes)
        # The core starts each macrostep's microstep count at 0 and counts the event's
        # transition set as the first: none taken leaves it at 0, unless an eventless
        # transition the event enabled (a condition on _event) was taken after all.
        self.transition_taken = self.state.microstep > 0
        if not self.transition_taken:
            self.unmatched = unmatched_notice(before.machine, event.name, before.configuration)
        await self._perform(effects)
        await self._settle()

    async def fired(self, delayed: fx.SendDelayed) -> bool:
        """A delayed send of this execution fired: if it is still armed, deliver it as the
        planner says, then everything that sends the execution itself (as ``event``
        does). False, having driven nothing, when it is not (cancelled since)."""
        if not self.armed.fire(delayed):
            return False
        instruction = planner.fire(self.scope, delayed)
        if isinstance(instruction, planner.Post):
            self.driven = planner.sent_event(self.scope, delayed)
            await self._post(instruction)
            await self._settle()
            return True
        if isinstance(instruction.target, planner.SelfTarget) and self._live():
            # What the queue would drive next anyway (it is empty): driven here, the
            # macrostep is judged as a step's event is.
            await self.event(instruction.event)
            return True
        self.driven = instruction.event
        await self._deliver(instruction)
        await self._settle()
        return True

    async def failed(self, failure: Event) -> None:
        """A send of this execution failed after the step that made it (a BasicHTTP POST):
        raise ``failure`` (an ``error.*`` event) in the chart, then everything it sends
        the execution itself (as ``event`` does)."""
        self.driven = failure
        self._internal.append(failure)
        await self._settle()

    async def initial(self, effects: list[fx.Effect]) -> None:
        """Perform the initial drive's effects, then everything they send the execution."""
        await self._perform(effects)
        await self._settle()

    async def cancel(self) -> None:
        """Run the chart's cancel: every onexit, every invocation stopped, then ``Done``."""
        self.cancelling = True
        self.state, effects = cancel(self.state)
        await self._perform(effects)
        await self._settle()
        send_ids = self.armed.send_ids()
        if send_ids and isinstance(self.executor, MailboxExecutor):
            await self.flush_timers()
            await self.executor.drop_timers(self.conn, self.scope, send_ids)

    async def _settle(self) -> None:
        """Drain internal deliveries, then sends to self (each a macrostep), in order."""
        drained = 0
        while True:
            while self._internal and self._live():
                event = self._internal.popleft()
                self.state, more = deliver_internal(self.state, event, routes=self.routes)
                await self._perform(more)
            if not self._own or not self._live():
                break
            if drained == self.limits.max_self_sends:
                self.status = "failed"
                self.failure = {
                    "reason": "self_send_limit",
                    "limit": self.limits.max_self_sends,
                    "undelivered": len(self._own),
                }
                break
            drained += 1
            self.state, more = handle_event(self.state, self._own.popleft(), routes=self.routes)
            await self._perform(more)
        self._own.clear()
        self._internal.clear()

    async def flush_timers(self) -> None:
        """Store the timers prepared so far (the executor's ``store_timers``)."""
        if self.timers and self.batches is not None:
            timers, self.timers = self.timers, []
            sent = await self.batches.store_timers(self.conn, timers)
            if sent is not None:
                await sent(None)

    async def _perform(self, effects: list[fx.Effect]) -> None:
        for effect in effects:
            self.effects.append(effect)
            instruction = planner.plan_effect(self.scope, effect)
            if instruction is not None:
                await self._execute(instruction)

    async def _execute(self, instruction: planner.Instruction) -> None:  # noqa: C901 - one case per planner instruction
        match instruction:
            case planner.Deliver():
                await self._deliver(instruction)
            case planner.Post():
                await self._post(instruction)
            case planner.Schedule(effect=effect):
                await self._schedule(effect)
            case planner.CancelTimers(effect=effect):
                await self.flush_timers()  # the cancel must see every timer armed before it
                await self.executor.cancel_timers(self.conn, self.scope, effect)
                self.armed.cancel(effect.send_id)
            case planner.StartInvocation(effect=effect):
                await self._start(effect)
            case planner.StopInvocation(effect=effect):
                await self.flush_timers()
                await self._stop(effect)
            case planner.Forward(invoke_id=invoke_id, event=event):
                await self.flush_timers()
                if not await self._forward(invoke_id, event):
                    logger.warning(
                        "%s: autoforward of %r to invocation %r: not delivered",
                        self.scope,
                        event.name,
                        invoke_id,
                        extra={"execution_id": self.scope, "invoke_id": invoke_id},
                    )
            case planner.Report(effect=effect):
                self.reports.append(effect)
            case planner.Halt(effect=fx.Done() as done):
                self.status = "cancelled" if self.cancelling else "completed"
                self.outcome = {
                    "configuration": list(done.configuration),
                    "donedata": done.donedata,
                }
                link = invoked_by(self.execution)
                if link is not None and self.invoked is not None and not self.cancelling:
                    await self.invoked.done(self, link, done.donedata)
            case planner.Halt(effect=fx.BudgetExhausted() as exhausted):
                self.status = "failed"
                self.failure = {
                    "reason": "budget_exhausted",
                    "exhausted": exhausted.reason,
                    "budget": exhausted.budget,
                    "configuration": list(exhausted.configuration),
                    "pending_internal_events": exhausted.pending_internal_events,
                }

    async def _deliver(self, instruction: planner.Deliver) -> None:
        target = instruction.target
        match target:
            case planner.SelfTarget():
                if self._live():
                    self._own.append(instruction.event)
                return
            case planner.InternalTarget():
                self._internal.append(instruction.event)
                return
            case planner.InvocationTarget(invoke_id=invoke_id):
                live = invoke_id in self.state.invocations.values()
                if live:
                    await self.flush_timers()
                if live and await self._forward(invoke_id, instruction.event):
                    return
            case planner.ParentTarget() if self.invoked is not None and (
                link := invoked_by(self.execution)
            ):
                await self.flush_timers()
                refused = await self.invoked.to_parent(self, link, instruction.event)
                if refused is None:
                    return
                message = f"send target {planner.PARENT!r} is unreachable: {refused}"
                self._internal.append(planner.undeliverable(instruction.send_id, message))
                return
            case planner.ParentTarget() | planner.SessionTarget():
                await self.flush_timers()
                if await self.host.deliver(self.conn, self.execution, instruction):
                    return
        message = f"send target {planner.address(target)!r} is unreachable"
        self._internal.append(planner.undeliverable(instruction.send_id, message))

    async def _post(self, post: planner.Post) -> None:
        send_id = post.effect.send_id
        if not isinstance(self.executor, PostExecutor):
            reason = NO_POSTS
        elif self.posts >= self.limits.max_posts:
            reason = f"more than {self.limits.max_posts} BasicHTTP sends in one step"
        else:
            await self.flush_timers()
            try:
                await self.executor.post(self.conn, self.scope, post)
            except EffectRefused as refused:
                self.refused.add(send_id)
                reason = refused.reason
            else:
                self.posts += 1
                return
        self._internal.append(planner.post_failed(send_id, reason))

    async def _forward(self, invoke_id: str, event: Event) -> bool:
        """Hand ``event`` to live invocation ``invoke_id``: its child execution's mailbox
        when it is an invoked chart, else the executor. False when it cannot take it."""
        child_id = self.armed.children.get(invoke_id)
        if child_id is None or self.invoked is None:
            return await self.executor.forward(self.conn, self.scope, invoke_id, event)
        refused = await self.invoked.to_child(self, invoke_id, child_id, event)
        if refused is not None:
            logger.warning(
                "%s: %r for invocation %r: %s", self.scope, event.name, invoke_id, refused
            )
        return refused is None

    async def _schedule(self, effect: fx.SendDelayed) -> None:
        # Every target has a durable form: the timer is routed when it fires (``fired``).
        limit = self.limits.max_armed_sends
        if self.armed.sends >= limit:
            self.refused.add(effect.send_id)
            message = f"the delayed send could not be stored: {limit} sends are armed already"
            self._internal.append(planner.undeliverable(effect.send_id, message))
            return
        try:
            if self.batches is not None:
                self.timers.append(self.batches.prepare_timer(self.scope, effect))
            else:
                await self.executor.schedule(self.conn, self.scope, effect)
        except EffectRefused as refused:
            self.refused.add(effect.send_id)
            message = f"the delayed send could not be stored: {refused.reason}"
            self._internal.append(planner.undeliverable(effect.send_id, message))
            return
        self.armed.arm(effect)

    async def _start(self, effect: fx.Invoke) -> None:
        await self.flush_timers()
        # A child of this invoke id that finished before its invocation was stopped answers
        # that invocation only: once the id starts again, its waiting done would be read as
        # the new invocation's (which would then never be cancelled), so it is superseded.
        self.armed.finished.pop(effect.invoke_id, None)
        if self.invoked is not None and effect.type in planner.SCXML_INVOKE_TYPES:
            try:
                child_id = await self.invoked.start(self, effect)
            except StartRefused as refused:
                self.refused.add(effect.invoke_id)
                failed = planner.invocation_start_failed(effect.invoke_id, str(refused))
                self._internal.append(failed)
                return
            self.armed.children[effect.invoke_id] = child_id
        else:
            try:
                await self.executor.start_invocation(self.conn, self.scope, effect)
            except EffectRefused as refused:
                self.refused.add(effect.invoke_id)
                failed = planner.invocation_start_failed(effect.invoke_id, refused.reason)
                self._internal.append(failed)
                return
        self.armed.invoked(effect.invoke_id, effect.macrostep)

    async def _stop(self, effect: fx.CancelInvoke) -> None:
        child_id = self.armed.children.pop(effect.invoke_id, None)
        if child_id is not None and self.invoked is not None:
            await self.invoked.stop(self, effect.invoke_id, child_id)
            return
        await self.executor.stop_invocation(self.conn, self.scope, effect)
        if self.settlement is not None:
            await self.settlement.abandon(self.conn, self.scope, effect.invoke_id)
