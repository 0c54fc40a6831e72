"""The ``statifier`` command line: ``check`` charts and ``run`` them on a virtual clock."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from statifier.chart.compiler import compile_chart
from statifier.chart.model import Machine
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.errors import ChartError
from statifier.virtual.driver import VirtualDriver


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="statifier", description="SCXML statecharts")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="compile charts and print every diagnostic")
    check.add_argument("charts", nargs="+", type=Path)

    run = commands.add_parser("run", help="drive a chart with events on a virtual clock")
    run.add_argument("chart", type=Path)
    run.add_argument(
        "--event",
        "-e",
        action="append",
        default=[],
        metavar="NAME[=JSON]",
        help="an external event (repeatable); data after '=' is JSON",
    )
    run.add_argument(
        "--advance",
        type=_duration_ms,
        default=None,
        metavar="DURATION",
        help="after the events, let this much virtual time pass (e.g. 7d); "
        "default: fire every pending timer",
    )
    run.add_argument("--json", action="store_true", help="print one JSON object per step")
    run.add_argument(
        "--live",
        action="store_true",
        help="run a live asyncio session with real delays instead of the virtual "
        "clock; waits for pending timers (up to --wait)",
    )
    run.add_argument(
        "--wait",
        type=_duration_ms,
        default=60_000,
        metavar="DURATION",
        help="with --live: how long to wait for timers after the last event",
    )
    run.add_argument("--session-id", default="sess_cli")

    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args.charts, sys.stdout)
    return _run(args, sys.stdout)


def _duration_ms(text: str) -> int:
    from statifier.chart.durations import InvalidDuration, parse_duration

    try:
        return parse_duration(text)
    except InvalidDuration as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _check(paths: Sequence[Path], out: TextIO) -> int:
    failed = False
    for path in paths:
        try:
            machine = compile_chart(path.read_bytes())
        except OSError as exc:
            print(f"{path}: error: {exc.strerror}", file=out)
            failed = True
            continue
        except ChartError as exc:
            for diagnostic in exc.diagnostics:
                print(diagnostic.format(str(path)), file=out)
            failed = True
            continue
        for warning in machine.warnings:
            print(warning.format(str(path)), file=out)
        states = len(machine.states) - 1
        print(f"{path}: ok ({states} states, {len(machine.transitions)} transitions)", file=out)
    return 1 if failed else 0


def _parse_event(text: str) -> Event:
    name, sep, payload = text.partition("=")
    data = json.loads(payload) if sep else None
    return Event(name=name, data=data)


def _run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        machine = compile_chart(args.chart.read_bytes())
        events = [_parse_event(e) for e in args.event]
    except ChartError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic.format(str(args.chart)), file=out)
        return 1
    except (OSError, json.JSONDecodeError) as exc:
        print(f"statifier: {exc}", file=out)
        return 2
    if args.live:
        return asyncio.run(_run_live(machine, events, args, out))
    printer = _Printer(machine, out, args.json)
    driver = VirtualDriver(machine, session_id=args.session_id, observer=printer.collect)
    driver.start()
    driver.run_until_idle()
    printer.step("initialize", driver)
    for event in events:
        if driver.sessions[driver.top].halted:
            print(f"(halted: event {event.name!r} not processed)", file=out)
            break
        driver.send(event)
        driver.run_until_idle()
        printer.step(f"event {event.name}", driver)
    if not driver.sessions[driver.top].halted and driver.pending_timers():
        driver.advance(args.advance)
        printer.step("timers", driver)
    return 0


async def _run_live(
    machine: Machine, events: list[Event], args: argparse.Namespace, out: TextIO
) -> int:
    from statifier.runtime.session import Halted, Message, Session

    loop = asyncio.get_running_loop()
    started = loop.time()

    def show(session_id: str, message: Message) -> None:
        elapsed = int((loop.time() - started) * 1000)
        if isinstance(message, fx.DatamodelInit):
            return
        if args.json:
            body = {"kind": type(message).__name__} | (
                {"reason": message.reason} if isinstance(message, Halted) else _jsonable(message)
            )
            print(
                json.dumps({"t_ms": elapsed, "session": session_id} | body, default=repr), file=out
            )
        else:
            text = (
                f"halted: {message.reason}" if isinstance(message, Halted) else _describe(message)
            )
            print(f"[{elapsed:>6} ms] {text}", file=out)

    session = await Session.start(machine, session_id=args.session_id, subscribers=[show])
    for event in events:
        session.send_event(event)
    deadline = started + args.wait / 1000
    while loop.time() < deadline:
        status = session.status()
        if status.status != "running" or (not status.queued_events and not status.pending_timers):
            break
        await asyncio.sleep(0.01)
    status = session.status()
    if not args.json:
        print(
            f"status: {status.status}; active: {', '.join(status.configuration) or '-'}", file=out
        )
    await session.stop()
    return 0


class _Printer:
    def __init__(self, machine: Machine, out: TextIO, as_json: bool) -> None:
        self.machine = machine
        self.out = out
        self.as_json = as_json
        self.batch: list[tuple[str, fx.Effect]] = []

    def collect(self, session_id: str, effect: fx.Effect) -> None:
        self.batch.append((session_id, effect))

    def step(self, label: str, driver: VirtualDriver) -> None:
        state = driver.state
        batch, self.batch = self.batch, []
        if self.as_json:
            record = {
                "step": label,
                "virtual_ms": driver.now_ms,
                "status": state.status,
                "configuration": list(
                    next(
                        (e.configuration for _, e in batch if isinstance(e, fx.Done)),
                        state.configuration_ids(),
                    )
                ),
                "effects": [
                    {"session": sid, "effect": type(e).__name__, **_jsonable(e)} for sid, e in batch
                ],
            }
            print(json.dumps(record, default=repr), file=self.out)
            return
        print(f"== {label} (t={driver.now_ms} ms)", file=self.out)
        done = next((e for _, e in batch if isinstance(e, fx.Done)), None)
        active = done.configuration if done is not None else state.active_leaf_ids()
        print(f"   status: {state.status}; active: {', '.join(active) or '-'}", file=self.out)
        for sid, effect in batch:
            if isinstance(effect, fx.DatamodelInit):
                continue
            prefix = "" if sid == driver.top else f"[{sid}] "
            print(f"   {prefix}{_describe(effect)}", file=self.out)


def _jsonable(effect: fx.Effect) -> dict[str, Any]:
    fields = dataclasses.asdict(effect)
    return {k: v for k, v in fields.items() if k not in ("macrostep", "microstep", "round")} | {
        "counters": [effect.macrostep, effect.microstep, effect.round]
    }


def _describe(effect: fx.Effect) -> str:
    if isinstance(effect, fx.SendDelayed):
        return f"schedule {effect.event!r} in {effect.delay_ms} ms (send_id {effect.send_id})"
    if isinstance(effect, fx.Send):
        return f"send {effect.event!r} to {effect.target or 'self'}"
    if isinstance(effect, fx.Cancel):
        return f"cancel send_id {effect.send_id}"
    if isinstance(effect, fx.Log):
        return f"log {effect.label or ''}: {effect.value!r}"
    if isinstance(effect, fx.Done):
        return f"done (final: {', '.join(effect.configuration)}; donedata {effect.donedata!r})"
    if isinstance(effect, fx.DatamodelChange):
        return f"set {effect.location} = {effect.new_value!r}"
    if isinstance(effect, fx.Invoke):
        return f"invoke {effect.invoke_id} ({effect.type})"
    if isinstance(effect, fx.CancelInvoke):
        return f"cancel invocation {effect.invoke_id}"
    if isinstance(effect, fx.BudgetExhausted):
        return f"round budget of {effect.budget} exhausted"
    return type(effect).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
