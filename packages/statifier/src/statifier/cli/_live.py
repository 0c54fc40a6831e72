"""``statifier run --live``: a live asyncio session with real delays.

Events are sent one at a time, each once the previous one was processed; then the run
waits for pending timers, up to ``--wait``, and says what was still pending if it stops
before they fired.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import TextIO

from statifier.chart.compiler import Resolver
from statifier.chart.durations import format_duration
from statifier.chart.model import Machine
from statifier.cli._report import PendingTimer, Reporter, Snapshot, describe_pending
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.runtime.session import Halted, Message, Session

_POLL_S = 0.005


class _TimerBook:
    """Notes each delayed send's due time (``DelayedSends``) and leaves the timer to the
    session, so the CLI can list what is pending."""

    def __init__(self, clock: _Clock) -> None:
        self.clock = clock
        self.timers: list[PendingTimer] = []

    async def schedule(self, session: Session, effect: fx.SendDelayed) -> bool:
        due = self.clock.now_ms() + effect.delay_ms
        self.timers.append(PendingTimer(session.session_id, effect.event, effect.send_id, due))
        return False

    async def cancel(self, session: Session, effect: fx.Cancel) -> None:
        self.timers = [
            t
            for t in self.timers
            if not (t.session == session.session_id and t.send_id == effect.send_id)
        ]

    def pending(self, count: int) -> tuple[PendingTimer, ...]:
        now = self.clock.now_ms()
        waiting = [t for t in self.timers if t.due_ms > now] if count else []
        return tuple(sorted(waiting, key=lambda t: t.due_ms))


class _Clock:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()

    def now_ms(self) -> int:
        return int((self.loop.time() - self.started) * 1000)


async def run_live(
    machine: Machine,
    events: Sequence[Event],
    out: TextIO,
    *,
    session_id: str,
    wait_ms: int,
    as_json: bool,
    trace: bool,
    strict: bool,
    chart: str = "<chart>",
    place: Callable[[int], str] | None = None,
    resolver: Resolver | None = None,
) -> int:
    """Run a live session; returns the exit code."""
    clock = _Clock()
    book = _TimerBook(clock)
    reporter = Reporter(
        out,
        session_id,
        lambda sid: machine if sid == session_id else None,
        as_json=as_json,
        trace=trace,
        chart=chart,
        place=place,
    )

    def show(sid: str, message: Message) -> None:
        if isinstance(message, Halted):
            return
        reporter.effect(sid, message, clock.now_ms())

    reporter.header("initialize", 0)
    session = await Session.start(
        machine,
        session_id=session_id,
        subscribers=[show],
        trace=True,
        delayed_sends=book,
        resolver=resolver,
    )
    try:
        reporter.step("initialize", _snapshot(session, book, clock))
        deadline = clock.now_ms() + wait_ms
        for event in events:
            if session.status().status != "running":
                reporter.end(
                    "halted",
                    _snapshot(session, book, clock),
                    f"halted: event {event.name!r} and the ones after it were not processed",
                )
                return 0
            reporter.header(f"event {event.name}", clock.now_ms())
            before = session.status().macrostep
            session.send_event(event)
            await _until(functools.partial(_processed, session, before), deadline, clock)
            reporter.step(f"event {event.name}", _snapshot(session, book, clock))
            if strict and reporter.unmatched:
                reporter.end(
                    "strict",
                    _snapshot(session, book, clock),
                    f"error: no transition matched {reporter.unmatched[0]!r} (--strict)",
                )
                return 1
        if _busy(session):
            reporter.header(f"waiting up to {format_duration(wait_ms)} for timers", clock.now_ms())
            deadline = clock.now_ms() + wait_ms
            await _until(lambda: not _busy(session), deadline, clock)
            reporter.step("timers", _snapshot(session, book, clock))
        snapshot = _snapshot(session, book, clock)
        if _busy(session):
            status = session.status()
            what = describe_pending(snapshot.pending, snapshot.t_ms, session_id)
            if status.queued_events:
                what += f"; {status.queued_events} queued event(s)"
            reporter.end(
                "wait-expired",
                snapshot,
                f"stopped after waiting {format_duration(wait_ms)} (--wait); still pending: {what}",
            )
        else:
            reporter.end("halted" if snapshot.status != "running" else "idle", snapshot)
        if strict and reporter.unmatched:
            return 1
        return 0
    finally:
        await session.stop()


def _processed(session: Session, before: int) -> bool:
    status = session.status()
    return status.status != "running" or (status.macrostep > before and status.queued_events == 0)


def _busy(session: Session) -> bool:
    """Whether the session, or a session it invoked, still has events or timers to run."""
    status = session.status()
    if status.status != "running":
        return False
    if status.queued_events or status.pending_timers:
        return True
    return any(_busy(child) for child in session.children())


async def _until(condition: Callable[[], bool], deadline_ms: int, clock: _Clock) -> None:
    while not condition() and clock.now_ms() < deadline_ms:
        await asyncio.sleep(_POLL_S)


def _snapshot(session: Session, book: _TimerBook, clock: _Clock) -> Snapshot:
    status = session.status()
    return Snapshot(
        clock.now_ms(), status.status, status.configuration, book.pending(status.pending_timers)
    )
