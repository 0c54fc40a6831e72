"""Durable delayed sends for live sessions: plug into ``Session.start(delayed_sends=...)``.

:class:`DurableTimers` stores a session's delayed sends as timer jobs; with a
:class:`~statifier_oban.SessionLease` it fences every write with the lease's epoch.
:func:`start_session` puts both together: a live session that owns its id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psycopg import AsyncConnection
from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.chart.model import Machine
from statifier.core.effects import Cancel, SendDelayed
from statifier.core.position import loads
from statifier.core.state import MachineState
from statifier.ids import new_session_id
from statifier.runtime.session import DelayedSendRefused, Halted, Message, Session

from .._config import Config
from .._errors import LeaseLost, ScheduleRejected
from ..store import _statements
from . import _schedule
from ._lease import DEFAULT_TTL_S, SessionLease


class DurableTimers:
    """Sends a session addresses to itself become timer jobs; the rest stay in-process.

    The scope is the session id, so the default ``SessionDelivery`` finds the session again
    in whichever process has it registered (after a resume, the same id).

    Failures reach the session, which never falls back to an in-process timer (ADR 14): a
    refused effect (``ScheduleRejected``: a value that cannot be stored) is raised as
    ``DelayedSendRefused`` (the chart hears ``error.communication``); a store that cannot
    answer (``StoreUnavailable``) makes the session hold the step and try again. With a
    ``lease``, each job is written in a transaction that first checks the lease's epoch:
    once another owner took the session over, ``LeaseLost`` stops this session.
    """

    def __init__(self, config: Config, *, lease: SessionLease | None = None) -> None:
        self.config = config
        self.lease = lease

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
        """Cancel the session's pending timer jobs under the send id."""
        try:
            async with self._writing(session) as conn:
                await _schedule.cancel_timers(self.config, session.session_id, effect, conn=conn)
        except ScheduleRejected as exc:
            raise DelayedSendRefused(f"{exc.reason}: {exc}") from exc

    @asynccontextmanager
    async def _writing(self, session: Session) -> AsyncIterator[AsyncConnection[Any] | None]:
        """No connection (the pool's own), or a transaction fenced by the lease."""
        lease = self.lease
        if lease is None:
            yield None
            return
        if lease.scope != session.session_id:
            raise LeaseLost(
                f"the lease is for session {lease.scope!r}, not {session.session_id!r}",
                scope=session.session_id,
                epoch=lease.epoch,
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

    Takes the session's lease first (:class:`~statifier_oban.LeaseHeld` if another
    process owns it, unless ``takeover``), starts the session with
    ``DurableTimers(config, lease=...)``, renews the lease while it runs and gives it up
    when the session halts. If another owner takes over, this session stops
    (``Halted("superseded")``) and writes nothing more. ``options`` go to
    ``Session.start``; ``limits`` are the macrostep budgets, and a resumed position is
    loaded under them (and with ``position_key``, when the host keys its positions).
    Save positions in transactions that first call ``session_lease(session).fence(conn)``,
    so a superseded owner's saves are refused.
    """
    if resume is not None and not isinstance(resume, MachineState):
        resume = loads(resume, machine, max_limits=limits, key=position_key)
    scope = resume.session_id if resume is not None else session_id
    if scope is None:
        scope = new_session_id()
    lease = await SessionLease.acquire(
        config, scope, owner=owner, ttl_s=lease_ttl_s, takeover=takeover
    )
    # Known before the first macrostep runs: its on_step save fences with this lease.
    _LEASES[scope] = lease
    try:
        session = await Session.start(
            machine,
            session_id=None if resume is not None else scope,
            resume=resume,
            delayed_sends=DurableTimers(config, lease=lease),
            limits=limits,
            **options,
        )
    except BaseException:
        _forget(scope, lease)
        await lease.release()
        raise
    renewing = lease.keep_alive(session.supersede)

    async def on_halt(_session_id: str, message: Message) -> None:
        if isinstance(message, Halted):
            await let_go(superseded=message.reason == "superseded")

    async def let_go(*, superseded: bool) -> None:
        if renewing is not asyncio.current_task():  # a lost renewal ends by itself
            renewing.cancel()
        _forget(scope, lease)
        if not superseded:
            await lease.release()

    session.subscribe(on_halt)
    if session.status().status != "running":  # it finished within its first macrostep
        await let_go(superseded=False)
    return session


_LEASES: dict[str, SessionLease] = {}


def _forget(scope: str, lease: SessionLease) -> None:
    """Drop ``lease`` from the table, unless a later lease of the scope replaced it."""
    if _LEASES.get(scope) is lease:
        del _LEASES[scope]


def session_lease(session: Session) -> SessionLease:
    """The lease of a session started by :func:`start_session` (``LookupError`` if none)."""
    lease = _LEASES.get(session.session_id)
    if lease is None:
        raise LookupError(f"session {session.session_id!r} was not started with start_session")
    return lease
