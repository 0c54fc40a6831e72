"""Durable delayed sends for live sessions: plug into ``Session.start(delayed_sends=...)``.

:class:`DurableTimers` stores a session's delayed sends as timer jobs, under the
session's :class:`~statifier_oban.SessionLease`: a live session with durable timers owns
its id, and every write is fenced with the lease's epoch. :func:`start_session` is the
short form, which also loads a resumed blob under the budgets given.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection
from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.chart.model import Machine
from statifier.core.effects import Cancel, SendDelayed
from statifier.core.position import loads
from statifier.core.state import MachineState
from statifier.runtime.session import (
    DelayedSendRefused,
    DelayedSendsUnavailable,
    HaltReason,
    ResumePoint,
    Session,
)

from .._config import Config
from .._errors import LeaseLost, ScheduleRejected, SessionIdNotFree, StoreUnavailable
from ..store import _statements
from . import _schedule
from ._lease import DEFAULT_TTL_S, SessionLease

logger = logging.getLogger("statifier_oban.timers")


class DurableTimers:
    """Sends a session addresses to itself become timer jobs; the rest stay in-process.

    The scope is the session id, so the default ``SessionDelivery`` finds the session again
    in whichever process has it registered (after a resume, the same id).

    Every session it serves owns its id (ADR 14): ``Session.start`` has it take the
    session's :class:`~statifier_oban.SessionLease` before the first macrostep
    (:class:`~statifier_oban.LeaseHeld` while another process holds it, unless
    ``takeover``; ``DelayedSendsUnavailable`` when the database cannot answer), renew it
    every third of ``lease_ttl_s`` and give it up when the session halts. Each job is
    written in a transaction that first checks the lease's epoch: once another owner took
    the session over, ``LeaseLost`` stops this session (so does a lost renewal). Save
    positions in transactions that call ``session_lease(session).fence(conn)`` first, and
    let its ``LeaseLost`` out of ``on_step``: the session then stops at once. ``lease``
    hands it a lease taken (and renewed) by the host instead.

    Failures reach the session, which never falls back to an in-process timer: a refused
    effect (``ScheduleRejected``: a value that cannot be stored) is raised as
    ``DelayedSendRefused`` (the chart hears ``error.communication``); a store that cannot
    answer (``StoreUnavailable``) makes the session hold the step and try again.
    """

    def __init__(
        self,
        config: Config,
        *,
        lease: SessionLease | None = None,
        takeover: bool = False,
        lease_ttl_s: float = DEFAULT_TTL_S,
        owner: str | None = None,
    ) -> None:
        self.config = config
        self.lease = lease
        self.takeover = takeover
        self.lease_ttl_s = lease_ttl_s
        self.owner = owner
        self._owned: dict[str, tuple[SessionLease, asyncio.Task[None]]] = {}

    async def claim(self, session: Session) -> None:
        """Take ``session``'s lease (before its first macrostep); see the class docstring."""
        scope = session.session_id
        if self.lease is not None:
            if self.lease.scope != scope:
                raise LeaseLost(
                    f"the lease is for session {self.lease.scope!r}, not {scope!r}",
                    scope=scope,
                    epoch=self.lease.epoch,
                )
            _LEASES[scope] = self.lease
            return
        try:
            lease = await SessionLease.acquire(
                self.config, scope, owner=self.owner, ttl_s=self.lease_ttl_s, takeover=self.takeover
            )
        except StoreUnavailable as exc:
            raise DelayedSendsUnavailable(
                f"the lease of session {scope!r} could not be taken, the store is unavailable: "
                f"{exc}"
            ) from exc
        self._owned[scope] = (lease, lease.keep_alive(session.supersede))
        # Known before the first macrostep runs: its on_step save fences with this lease.
        _LEASES[scope] = lease

    async def release(self, session: Session, reason: HaltReason) -> None:
        """``session`` halted: stop renewing its lease and let it expire now (unless it was
        taken over: the lease is another's)."""
        scope = session.session_id
        owned = self._owned.pop(scope, None)
        if owned is None:
            if self.lease is not None:
                _forget(scope, self.lease)
            return
        lease, renewing = owned
        if renewing is not asyncio.current_task():  # a lost renewal ends by itself
            renewing.cancel()
        _forget(scope, lease)
        if reason != "superseded":
            await lease.release()

    async def schedule(self, session: Session, effect: SendDelayed) -> bool:
        """Store the timer as a job unless it targets someone else (then: in-process)."""
        if effect.target is not None:
            return False
        try:
            async with self._writing(session) as conn:
                await _schedule.schedule(self.config, session.session_id, effect, conn=conn)
        except ScheduleRejected as exc:
            raise DelayedSendRefused(f"{exc.reason}: {exc}") from exc
        return True

    async def cancel(self, session: Session, effect: Cancel) -> None:
        """Cancel the session's pending timer jobs under the send id, each marked with the
        cancel's ordinal, and mark those a worker is running already (see :meth:`resume`)."""
        scope = session.session_id
        try:
            async with self._writing(session) as conn:
                await _schedule.mark_cancelled(self.config, scope, effect, conn=conn)
                await _schedule.cancel_timers(self.config, scope, effect, conn=conn)
        except ScheduleRejected as exc:
            raise DelayedSendRefused(f"{exc.reason}: {exc}") from exc

    async def begin(self, session: Session) -> None:
        """A fresh ``session`` takes its id (``KeyedDelayedSends``): ``SessionIdNotFree``
        when timer jobs of an earlier session with that id remain."""
        scope = session.session_id
        try:
            async with _statements.connection(self.config.oban, None) as conn:
                left = await _schedule.timer_rows_left(self.config, scope, conn=conn)
        except StoreUnavailable as exc:
            raise DelayedSendsUnavailable(
                f"whether session id {scope!r} is free could not be told, the store is "
                f"unavailable: {exc}"
            ) from exc
        if left:
            raise SessionIdNotFree(scope)

    async def resume(self, session: Session, timer_counter: int) -> ResumePoint:
        """``session`` resumes from a position whose ``timer_counter`` is given: set its
        timer jobs back to that position (``KeyedDelayedSends``), in a transaction fenced
        by its lease. A step after that position (its process died before its position was
        saved) may have armed timers, now cancelled, and cancelled some, now pending again;
        what was changed is logged. Answers the cancels that met running jobs and the
        highest stored ordinal."""
        scope = session.session_id
        try:
            async with self._writing(session) as conn:
                rebased = await _schedule.rebase(self.config, scope, timer_counter, conn=conn)
            marks = await _schedule.cancel_marks(self.config, scope)
        except StoreUnavailable as exc:
            raise DelayedSendsUnavailable(
                f"the timers of session {scope!r} could not be set back to its position, the "
                f"store is unavailable: {exc}"
            ) from exc
        if rebased.cancelled or rebased.restored:
            logger.warning(
                "session %s resumed from timer counter %d, before steps that stored timers: "
                "%d put back, %d cancelled",
                scope,
                timer_counter,
                rebased.restored,
                rebased.cancelled,
                extra={"scope": scope},
            )
        return ResumePoint(marks, max(rebased.top_ordinal, timer_counter))

    @asynccontextmanager
    async def _writing(self, session: Session) -> AsyncIterator[AsyncConnection[Any]]:
        """A transaction fenced by the session's lease."""
        scope = session.session_id
        owned = self._owned.get(scope)
        lease = self.lease if owned is None else owned[0]
        if lease is None or lease.scope != scope:
            raise LeaseLost(
                f"session {scope!r} holds no lease of these timers (it was not claimed)",
                scope=scope,
                epoch=0 if lease is None else lease.epoch,
            )
        async with _statements.connection(self.config.oban, None) as conn, conn.transaction():
            await lease.fence(conn)
            yield conn


async def start_session(
    config: Config,
    machine: Machine,
    *,
    session_id: str | None = None,
    resume: MachineState | bytes | bytearray | memoryview | None = None,
    takeover: bool = False,
    lease_ttl_s: float = DEFAULT_TTL_S,
    owner: str | None = None,
    limits: MacrostepLimits = DEFAULT_LIMITS,
    position_key: bytes | None = None,
    **options: Any,
) -> Session:
    """Start or resume a live session that owns its id, with durable timers.

    ``Session.start(machine, ..., delayed_sends=DurableTimers(config, takeover=...,
    lease_ttl_s=..., owner=...))``: the session takes its lease first
    (:class:`~statifier_oban.LeaseHeld` if another process owns it, unless ``takeover``),
    renews it while it runs and gives it up when it halts; if another owner takes over,
    it stops (``Halted("superseded")``) and writes nothing more. ``options`` go to
    ``Session.start``; ``limits`` are the macrostep budgets, and a resumed position (a
    blob) is loaded under them (and with ``position_key``, when the host keys its
    positions) before any lease is taken. Save positions in transactions that first call
    ``session_lease(session).fence(conn)``, so a superseded owner's saves are refused.
    """
    if resume is not None and not isinstance(resume, MachineState):
        resume = loads(resume, machine, max_limits=limits, key=position_key)
    timers = DurableTimers(config, takeover=takeover, lease_ttl_s=lease_ttl_s, owner=owner)
    return await Session.start(
        machine,
        session_id=None if resume is not None else session_id,
        resume=resume,
        delayed_sends=timers,
        limits=limits,
        **options,
    )


_LEASES: dict[str, SessionLease] = {}


def _forget(scope: str, lease: SessionLease) -> None:
    """Drop ``lease`` from the table, unless a later lease of the scope replaced it."""
    if _LEASES.get(scope) is lease:
        del _LEASES[scope]


def session_lease(session: Session) -> SessionLease:
    """The lease of a session whose timers are ``DurableTimers`` (``LookupError`` if it
    has none: it halted, or was started otherwise)."""
    lease = _LEASES.get(session.session_id)
    if lease is None:
        raise LookupError(f"session {session.session_id!r} holds no lease of DurableTimers")
    return lease
