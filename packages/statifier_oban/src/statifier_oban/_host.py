"""Durable delayed sends for live sessions: plug into ``Session.start(delayed_sends=...)``."""

from __future__ import annotations

from statifier.core.effects import Cancel, SendDelayed
from statifier.runtime.session import DelayedSendRefused, Session

from . import _timer
from ._config import Config
from ._errors import ScheduleRejected


class DurableTimers:
    """Sends a session addresses to itself become timer jobs; the rest stay in-process.

    The scope is the session id, so the default ``SessionDelivery`` finds the session again
    in whichever process has it registered (after a resume, the same id).

    Failures reach the session, which never falls back to an in-process timer (ADR 14): a
    refused effect (``ScheduleRejected``: a value that cannot be stored) is raised as
    ``DelayedSendRefused`` (the chart hears ``error.communication``); a store that cannot
    answer (``StoreUnavailable``) makes the session hold the step and try again.
    """

    def __init__(self, config: Config) -> None:
        self.config = config

    async def schedule(self, session: Session, effect: SendDelayed) -> bool:
        """Store the timer as a job unless it targets someone else (then: in-process)."""
        if effect.target is not None:
            return False
        try:
            await _timer.schedule(self.config, session.session_id, effect)
        except ScheduleRejected as exc:
            raise DelayedSendRefused(f"{exc.reason}: {exc}") from exc
        return True

    async def cancel(self, session: Session, effect: Cancel) -> None:
        """Cancel the session's pending timer jobs under the send id."""
        try:
            await _timer.cancel_timers(self.config, session.session_id, effect)
        except ScheduleRejected as exc:
            raise DelayedSendRefused(f"{exc.reason}: {exc}") from exc
