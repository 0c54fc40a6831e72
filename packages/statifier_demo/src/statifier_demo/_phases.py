"""The two phase processes of the demo (``python -m statifier_demo --phase ...``).

Phase 1 (``first``) authorizes two cards in live sessions whose hold timers are oban jobs,
captures card A before its hold is due (the capture cancels A's timer job), then
"deploys": stops oban and both sessions and exits, with card B's timer still pending.

Phase 2 (``resume``) is a fresh interpreter with nothing in memory: it loads card B's
stored position, resumes the session under the same id, and only then runs the timers
queue. B's timer fires into the resumed session, which reaches ``expired``.

Every step is written to stdout as a timeline entry (``_timeline.Emitter``); the
process that started the phases prints them and checks the outcome.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import statifier
import statifier_oban.workers  # noqa: F401  (registers the timer worker with oban)
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg_pool import AsyncConnectionPool
from statifier.runtime.session import Halted, Message, Session
from statifier_oban import Config, DurableTimers, pending_for, telemetry
from statifier_oban.schema import describe, install

from ._chart import load_machine, seed
from ._errors import PhaseFailed
from ._store import (
    TimerRow,
    create_positions_table,
    load_positions,
    save_position,
    timer_rows,
)
from ._timeline import Emitter, epoch

TIMERS_QUEUE = "timers"
"""The queue the demo's timer jobs go to (the host names it: ``Config(timers_queue=...)``)."""

QUEUE_LIMIT = 10
"""How many timer jobs one demo process runs at once."""

STEP_TIMEOUT_S = 10.0
"""The longest the demo waits for a session to take one step."""

FIRE_GRACE_S = 15.0
"""How long after card B's due time phase 2 waits for its timer before giving up."""

FAULTS = ("none", "skip-resume", "unknown-session")
"""Failures the demo can inject (to show that its checks catch them):

``skip-resume``: phase 2 runs the timers queue without resuming card B's session, so the
timer finds no live session and is discarded. ``unknown-session``: phase 2 is asked to
resume a session that has no stored position.
"""


@dataclass(frozen=True, slots=True)
class PhaseOptions:
    """What a phase process is told by the process that started it."""

    url: str
    """Conninfo of the database (passed through the environment, not the command line)."""
    t0: float
    """The demo's time origin (seconds since the epoch)."""
    hold: str
    """The hold delay given to new sessions (e.g. ``3s``)."""
    card_a: str
    """Card A's session id (its timer scope)."""
    card_b: str
    """Card B's session id (its timer scope)."""
    chart: Path | None
    """The card-authorization chart (None: the one shipped in this package)."""
    fault: str = "none"
    """A failure to inject (see :data:`FAULTS`)."""


class DemoHost:
    """One phase process's host: pool, oban instance, config, sessions and their hooks."""

    def __init__(self, options: PhaseOptions, out: Emitter, node: str) -> None:
        self.options = options
        self.out = out
        self.node = node
        self.pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            options.url, open=False, min_size=2, max_size=QUEUE_LIMIT + 4
        )
        self.oban: Oban | None = None
        self.config: Config | None = None
        self.sessions: dict[str, Session] = {}
        self._running = False
        self.due: dict[str, float] = {}
        """When each scope's pending timer is due (seconds since the epoch)."""
        self.saved: dict[str, tuple[str, tuple[str, ...]]] = {}
        """The last stored ``(status, configuration)`` of each session."""
        self._handler_id = f"statifier-oban-demo-{os.getpid()}"
        self._queue_started: float | None = None

    async def open(self) -> None:
        """Open the pool and build (not start) the server-mode oban instance and config.

        ``statifier_oban`` is imported above, before the ``Oban`` is built, so its prompt
        stager is in effect: a due timer fires within about 100 ms.
        """
        await self.pool.open(wait=True, timeout=STEP_TIMEOUT_S)
        self.oban = Oban(
            pool=self.pool,
            name=f"statifier-oban-demo-{self.node}",
            node=self.node,
            queues={TIMERS_QUEUE: QUEUE_LIMIT},
            shutdown_grace_period=5.0,
        )
        self.config = Config(oban=self.oban, timers_queue=TIMERS_QUEUE)
        oban_telemetry.attach(self._handler_id, telemetry.events(), self.on_telemetry)

    async def start_oban(self) -> None:
        """Start running the timers queue in this process."""
        assert self.oban is not None
        self._running = True  # a start that fails halfway still gets a stop
        await self.oban.start()
        self._queue_started = time.time()
        self.out.emit(
            "oban",
            f"oban started: queue {TIMERS_QUEUE}={QUEUE_LIMIT}, node {self.node}",
            node=self.node,
        )

    async def stop_oban(self) -> None:
        """Stop the queue (a no-op unless it runs)."""
        if self.oban is not None and self._running:
            self._running = False
            await self.oban.stop()

    async def close(self) -> None:
        """Stop everything this host started (sessions, oban, pool); safe to call twice."""
        oban_telemetry.detach(self._handler_id)
        await self.stop_oban()
        for session in list(self.sessions.values()):
            await session.stop()
        await self.pool.close()

    # -- sessions --------------------------------------------------------------------------

    async def start_session(
        self, machine: statifier.Machine, session_id: str, **options: Any
    ) -> Session:
        """``Session.start`` with durable timers, the position store and the timeline."""
        assert self.config is not None
        session = await Session.start(
            machine,
            session_id=session_id,
            delayed_sends=DurableTimers(self.config),
            on_step=self.on_step,
            subscribers=[self.on_message],
            **options,
        )
        self.sessions[session.session_id] = session
        return session

    async def on_step(self, session: Session) -> None:
        """After every step: store the position, then say so."""
        self.sessions.setdefault(session.session_id, session)
        size = await save_position(self.pool, session)
        status = session.status()
        self.saved[session.session_id] = (status.status, status.configuration)
        self.out.emit(
            "saved",
            f"{session.session_id}  position stored: {_states(status.configuration)} "
            f"({status.status}, macrostep {status.macrostep}, {size} bytes)",
            scope=session.session_id,
            status=status.status,
            configuration=list(status.configuration),
        )

    def on_message(self, session_id: str, message: Message) -> None:
        """Session subscriber: report how the session halted."""
        if not isinstance(message, Halted):
            return
        session = self.sessions.get(session_id)
        where = _states(session.status().configuration) if session is not None else "?"
        self.out.emit(
            "halted",
            f"{session_id}  session halted: {message.reason} in {where}",
            scope=session_id,
            reason=message.reason,
        )

    def send(self, session: Session, event: str) -> None:
        """Send an external event to a session, and say so."""
        self.out.emit("event", f"{session.session_id}  <- {event}", scope=session.session_id)
        session.send_event(event)

    def stored(self, session_id: str) -> tuple[str, tuple[str, ...]]:
        """The last stored ``(status, configuration)`` of a session (``("", ())``: none)."""
        return self.saved.get(session_id, ("", ()))

    async def wait_for(self, session: Session, state: str) -> None:
        """Wait until the stored position of ``session`` has ``state`` active."""

        async def reached() -> None:
            while state not in self.stored(session.session_id)[1]:
                await asyncio.sleep(0.01)

        await _within(reached(), STEP_TIMEOUT_S, f"{session.session_id} never reached {state}")

    # -- telemetry ---------------------------------------------------------------------------

    def on_telemetry(self, name: str, meta: dict[str, Any]) -> None:
        """statifier_oban's timer events, as timeline entries."""
        scope = meta.get("scope")
        job_id = meta.get("job_id")
        send = f'<send id="{meta.get("send_id")}">'
        if name == telemetry.TIMER_SCHEDULED:
            due = epoch(meta.get("scheduled_at"))
            if isinstance(scope, str) and due is not None:
                self.due[scope] = due
            again = "  (already stored: conflict)" if meta.get("conflict") else ""
            self.out.emit(
                "armed",
                f"{scope}  {send} -> job {job_id} in queue {meta.get('queue')}, "
                f"due {self.out.rel(meta.get('scheduled_at'))} "
                f"({meta.get('delay_ms')} ms){again}",
                scope=scope,
                job_id=job_id,
            )
        elif name == telemetry.TIMER_CANCELLED:
            count = meta.get("count")
            why = (
                "nothing pending (the job firing right now is never cancelled)"
                if count == 0
                else f"{count} pending job(s) cancelled"
            )
            self.out.emit(
                "cancelled",
                f'{scope}  <cancel sendid="{meta.get("send_id")}">: {why}',
                scope=scope,
                count=count,
            )
        elif name == telemetry.TIMER_FIRED:
            due = self.due.get(scope) if isinstance(scope, str) else None
            when = ""
            if due is not None:
                when = f" (due {self.out.rel(due)}, fired {time.time() - due:.3f} s after"
                started = self._queue_started
                if started is not None and due < started:
                    when += ": it waited in the database until this process ran the queue"
                when += ")"
            self.out.emit(
                "fired",
                f"{scope}  job {job_id} (attempt {meta.get('attempt')}) fired{when}: "
                "authorization.expired delivered into the live session",
                scope=scope,
                job_id=job_id,
                attempt=meta.get("attempt"),
                node=self.node,
            )
        elif name == telemetry.TIMER_DISCARDED:
            self.out.emit(
                "discarded",
                f"{scope}  job {job_id} (attempt {meta.get('attempt')}) discarded: "
                f"{meta.get('reason')} (the job is cancelled, the event dropped)",
                scope=scope,
                job_id=job_id,
                reason=meta.get("reason"),
            )
        elif name == telemetry.TIMER_SCHEDULE_REJECTED:
            self.out.emit(
                "rejected",
                f"{scope}  {send} refused: {meta.get('reason')}",
                scope=scope,
                reason=meta.get("reason"),
            )

    # -- job rows ----------------------------------------------------------------------------

    async def rows(self, scope: str) -> list[TimerRow]:
        """The timer job rows of ``scope``."""
        return await timer_rows(self.pool, [scope])

    def show_row(self, row: TimerRow) -> None:
        """One timeline entry with a job row's state."""
        due = epoch(row.scheduled_at)
        if not row.finished and due is not None:
            self.due[row.scope] = due
        detail = {
            "scheduled": f"due {self.out.rel(row.scheduled_at)}"
            + (", overdue: no process runs the queue yet" if row.due_in < 0 else ""),
            "available": f"due {self.out.rel(row.scheduled_at)}, waiting for a worker",
            "cancelled": f"cancelled at {self.out.rel(row.cancelled_at)}",
            "completed": (
                f"completed at {self.out.rel(row.completed_at)}, attempt {row.attempt}, "
                f"by node {row.node}"
            ),
        }.get(row.state, f"attempt {row.attempt}, errors: {'; '.join(row.errors) or '-'}")
        self.out.emit(
            "row",
            f"{row.scope}  job {row.id} is {row.state} ({detail})",
            scope=row.scope,
            job_id=row.id,
            state=row.state,
        )


def _states(configuration: tuple[str, ...] | list[str]) -> str:
    return ", ".join(configuration) if configuration else "(no active state)"


async def _within(awaitable: Awaitable[None], timeout: float, message: str) -> None:
    try:
        async with asyncio.timeout(timeout):
            await awaitable
    except TimeoutError:
        raise PhaseFailed(message) from None


async def first_phase(options: PhaseOptions, out: Emitter) -> int:
    """Phase 1: authorize both cards, capture A, then "deploy" with B's timer pending."""
    node = f"demo-phase1.{os.getpid()}"
    out.emit("process", f"process 1 up: {describe(options.url)}, hold {options.hold}")
    await install(options.url)
    host = DemoHost(options, out, node)
    try:
        await host.open()
        async with host.pool.connection() as conn:
            await create_positions_table(conn)
        out.emit("schema", "installed oban's tables, the timer indexes and demo_positions")
        await host.start_oban()
        machine = load_machine(options.chart)
        card_a = await host.start_session(machine, options.card_a, datamodel=seed(options.hold))
        card_b = await host.start_session(machine, options.card_b, datamodel=seed(options.hold))

        # Card A is captured before its hold is due: leaving `authorized` runs the
        # <cancel sendid="hold">, which cancels A's timer job in the database.
        host.send(card_a, "capture.requested")
        await host.wait_for(card_a, "capturing")
        for row in await host.rows(card_a.session_id):
            host.show_row(row)
        host.send(card_a, "capture.succeeded")
        await host.wait_for(card_a, "settled")

        # "A deploy": the worker and the sessions go away while B's hold is pending.
        await host.stop_oban()
        rows = await host.rows(card_b.session_id)
        pending = (await pending_for(_config(host), [card_b.session_id]))[card_b.session_id]
        job = rows[0] if rows else None
        due = f"job {job.id} {job.state}, due in {job.due_in:.3f} s" if job else "no job!"
        out.emit(
            "deploy",
            f"deploy: oban stopped; stopping both sessions and exiting with "
            f"{card_b.session_id}'s hold pending ({pending} pending timer: {due})",
            scope=card_b.session_id,
            pending=pending,
            state=job.state if job else None,
            due_in=job.due_in if job else None,
        )
        await card_a.stop()
        await card_b.stop()
    finally:
        await host.close()
    out.emit("exit", "process 1 exits: no session and no timer left in memory")
    return 0


async def resume_phase(options: PhaseOptions, out: Emitter) -> int:
    """Phase 2: resume card B from its stored position; its timer fires into it."""
    node = f"demo-phase2.{os.getpid()}"
    scope = options.card_b
    out.emit("process", f"process 2 up: a fresh interpreter, {describe(options.url)}")
    host = DemoHost(options, out, node)
    try:
        await host.open()
        stored = (await load_positions(host.pool, [scope])).get(scope)
        if stored is None:
            raise PhaseFailed(f"{scope} has no stored position: nothing to resume")
        out.emit(
            "loaded",
            f"{scope}  stored position: {_states(stored.configuration)} "
            f"({stored.status}, {len(stored.position)} bytes, "
            f"stored at {out.rel(stored.updated_at)})",
            scope=scope,
        )
        rows = await host.rows(scope)
        for row in rows:
            host.show_row(row)
        machine = load_machine(options.chart)
        if stored.chart_identity != machine.identity:
            raise PhaseFailed(
                f"{scope} was stored by chart {stored.chart_identity}, not {machine.identity}"
            )
        session: Session | None = None
        if options.fault == "skip-resume":
            out.emit("fault", f"{scope}  NOT resumed (--fault skip-resume)", scope=scope)
        else:
            # Resume before the queue runs: a timer firing into a session this process does
            # not hold (yet) is discarded, exactly as for a session that is gone.
            session = await host.start_session(machine, scope, resume=stored.position)
            status = session.status()
            out.emit(
                "resumed",
                f"{session.session_id}  resumed from the stored position in "
                f"{_states(status.configuration)} under the same session id; "
                f"in-process timers: {status.pending_timers}",
                scope=scope,
                session_id=session.session_id,
                pending_timers=status.pending_timers,
            )
        await host.start_oban()
        due_in = max((row.due_in for row in rows if not row.finished), default=0.0)
        await _within(
            _settled(host, scope, session),
            max(due_in, 0.0) + FIRE_GRACE_S,
            f"{scope}'s timer did not finish within {FIRE_GRACE_S:.0f} s of its due time",
        )
        for row in await host.rows(scope):
            host.show_row(row)
        await host.stop_oban()
        if session is not None:
            await session.stop()
    finally:
        await host.close()
    out.emit("exit", "process 2 exits")
    return 0


async def _settled(host: DemoHost, scope: str, session: Session | None) -> None:
    """Until every timer job of ``scope`` is finished and the session (if any) halted."""
    while True:
        rows = await host.rows(scope)
        halted = session is None or host.stored(scope)[0] not in ("", "running")
        if rows and all(row.finished for row in rows) and halted:
            return
        await asyncio.sleep(0.05)


def _config(host: DemoHost) -> Config:
    assert host.config is not None
    return host.config


PHASES: dict[str, Callable[[PhaseOptions, Emitter], Awaitable[int]]] = {
    "first": first_phase,
    "resume": resume_phase,
}
"""The phase functions by ``--phase`` name."""


async def run_phase(name: str, options: PhaseOptions, out: Emitter) -> int:
    """Run phase ``name``; a ``PhaseFailed`` or any error is one ``error`` entry and 1."""
    try:
        return await PHASES[name](options, out)
    except PhaseFailed as exc:
        out.emit("error", str(exc))
    except Exception as exc:
        out.emit("error", f"{type(exc).__name__}: {' '.join(str(exc).split())}")
    return 1
