"""``statifier run`` on the virtual clock: timers fire in virtual time, nothing sleeps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TextIO

from statifier.chart.compiler import Resolver
from statifier.chart.model import Machine
from statifier.cli._report import PendingTimer, Reporter, Snapshot, describe_pending
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.virtual.driver import VirtualDriver


def run_virtual(
    machine: Machine,
    events: Sequence[Event],
    out: TextIO,
    *,
    session_id: str,
    advance_ms: int | None,
    as_json: bool,
    trace: bool,
    strict: bool,
    chart: str = "<chart>",
    place: Callable[[int], str] | None = None,
    resolver: Resolver | None = None,
) -> int:
    """Drive ``machine`` with ``events``, then let timers fire; returns the exit code."""
    batch: list[tuple[str, fx.Effect, int]] = []
    driver = VirtualDriver(
        machine,
        session_id=session_id,
        resolver=resolver,
        observer=lambda sid, effect: batch.append((sid, effect, driver.now_ms)),
        trace=True,  # the reporter needs the trace to tell unmatched events apart
    )

    def machine_for(sid: str) -> Machine | None:
        session = driver.sessions.get(sid)
        return session.state.machine if session is not None else None

    reporter = Reporter(
        out, session_id, machine_for, as_json=as_json, trace=trace, chart=chart, place=place
    )

    def step(label: str) -> None:
        reporter.header(label, driver.now_ms)
        for sid, effect, t_ms in batch:
            reporter.effect(sid, effect, t_ms)
        batch.clear()
        reporter.step(label, _snapshot(driver))

    driver.start()
    driver.run_until_idle()
    step("initialize")
    for event in events:
        if driver.sessions[driver.top].halted:
            reporter.end(
                "halted",
                _snapshot(driver),
                f"halted: event {event.name!r} and the ones after it were not processed",
            )
            return 0
        driver.send(event)
        driver.run_until_idle()
        step(f"event {event.name}")
        if strict and reporter.unmatched:
            reporter.end(
                "strict",
                _snapshot(driver),
                f"error: no transition matched {reporter.unmatched[0]!r} (--strict)",
            )
            return 1
    if not driver.sessions[driver.top].halted and driver.pending_timers():
        driver.advance(advance_ms)
        step("timers")
    snapshot = _snapshot(driver)
    if strict and reporter.unmatched:
        reporter.end("strict", snapshot, f"error: unmatched events {reporter.unmatched} (--strict)")
        return 1
    if driver.sessions[driver.top].halted:
        reporter.end("halted", snapshot)
    elif snapshot.pending:
        message = "still pending: " + describe_pending(snapshot.pending, driver.now_ms, session_id)
        reporter.end("idle", snapshot, message)
    else:
        reporter.end("idle", snapshot)
    return 0


def _snapshot(driver: VirtualDriver) -> Snapshot:
    state = driver.state
    done = next((e for e in reversed(driver.effects) if isinstance(e, fx.Done)), None)
    configuration = done.configuration if done is not None else state.configuration_ids()
    pending = tuple(
        PendingTimer(timer.session_id, timer.effect.event, timer.effect.send_id, timer.due_ms)
        for timer in driver.pending_timers()
    )
    status = "budget_exhausted" if driver.sessions[driver.top].exhausted else state.status
    return Snapshot(driver.now_ms, status, configuration, pending)
