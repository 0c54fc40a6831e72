"""The ``statifier`` command line.

``check``
    Compile charts, print every error, warning and note as ``file:line:col: severity:
    message [code]``; exit 1 on an error (or, with ``--strict``, a warning).
``run``
    Drive a chart with events on a virtual clock (or, with ``--live``, in a live session
    with real delays) and print what happened after each step; ``--json`` prints one JSON
    record per line (the shape is in ``statifier.cli._report``).
``diagram``
    Draw a chart as Mermaid, Graphviz DOT or SVG, optionally with a configuration
    highlighted.

Every command takes ``--version``; ``--functions MODULE:NAME`` names a mapping of host
functions the chart may call. A ``src`` in the chart (``<script>``, ``<data>``,
``<invoke>``) names a file relative to the chart's directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from statifier.chart.compiler import compile_chart
from statifier.chart.durations import InvalidDuration, format_duration, parse_duration
from statifier.chart.model import Machine
from statifier.cli._files import files_beside
from statifier.core.events import Event
from statifier.datamodel.host import HostFunction, HostFunctionError, import_functions
from statifier.errors import ChartError

DEFAULT_WAIT_MS = 60_000
"""How long ``run --live`` waits for pending timers after the last event, by default."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code (2 for usage errors, as argparse does)."""
    args = build_parser().parse_args(argv)
    try:
        functions = _load_functions(args.functions) if args.functions else None
    except _UsageError as exc:
        print(f"statifier {args.command}: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        from statifier.cli._check import check

        return check(args.charts, sys.stdout, strict=args.strict, functions=functions)
    if args.command == "diagram":
        from statifier.cli._diagram import diagram

        return diagram(args, sys.stdout, functions)
    return _run(args, functions)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    from statifier import __version__

    version = f"%(prog)s {__version__}"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--version", action="version", version=version)
    common.add_argument(
        "--functions",
        metavar="MODULE:NAME",
        help="a mapping of host functions the chart may call, e.g. myapp.rules:FUNCTIONS "
        "(imported from the current directory too)",
    )
    parser = argparse.ArgumentParser(prog="statifier", description="SCXML statecharts")
    parser.add_argument("--version", action="version", version=version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser(
        "check", parents=[common], help="compile and lint charts, print every diagnostic"
    )
    check.add_argument("charts", nargs="+", type=Path, metavar="CHART")
    check.add_argument("--strict", action="store_true", help="fail on warnings too")

    run = commands.add_parser(
        "run", parents=[common], help="drive a chart with events on a virtual clock"
    )
    run.add_argument("chart", type=Path, metavar="CHART")
    run.add_argument(
        "--event",
        "-e",
        action="append",
        default=[],
        type=_event_argument,
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
    run.add_argument("--json", action="store_true", help="print one JSON record per line")
    run.add_argument(
        "--trace",
        action="store_true",
        help="print every microstep: events taken, transitions, states exited and entered",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="stop with exit status 1 when no transition matches an external event",
    )
    run.add_argument(
        "--live",
        action="store_true",
        help="run a live asyncio session with real delays instead of the virtual "
        "clock; waits for pending timers (up to --wait)",
    )
    run.add_argument(
        "--wait",
        type=_duration_ms,
        default=DEFAULT_WAIT_MS,
        metavar="DURATION",
        help="with --live: how long to wait for pending timers after the last event "
        f"(default: {format_duration(DEFAULT_WAIT_MS)})",
    )
    run.add_argument("--session-id", default="sess_cli", help="default: %(default)s")

    diagram = commands.add_parser(
        "diagram", parents=[common], help="draw a chart (Mermaid, Graphviz DOT or SVG)"
    )
    diagram.add_argument("chart", type=Path, metavar="CHART")
    diagram.add_argument(
        "--format",
        choices=("mermaid", "dot", "svg"),
        default="mermaid",
        help="default: %(default)s (SVG needs Graphviz's dot)",
    )
    where = diagram.add_mutually_exclusive_group()
    where.add_argument(
        "--position",
        type=Path,
        metavar="BLOB",
        help="highlight the configuration of a stored position (statifier.core.position)",
    )
    where.add_argument(
        "--event",
        "-e",
        action="append",
        default=None,
        type=_event_argument,
        metavar="NAME[=JSON]",
        help="highlight the configuration after these events on a virtual clock",
    )
    diagram.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    return parser


class _UsageError(Exception):
    """A command-line value that cannot be used."""


def _duration_ms(text: str) -> int:
    try:
        return parse_duration(text)
    except InvalidDuration as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _event_argument(text: str) -> Event:
    """``NAME`` or ``NAME=JSON``; argparse names the option in the error."""
    name, sep, payload = text.partition("=")
    if not name.strip() or name != name.strip() or " " in name:
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME or NAME=JSON")
    data: Any = None
    if sep:
        try:
            data = json.loads(payload, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(
                f"{text!r}: the data after '=' is not JSON ({exc.msg} at column {exc.colno})"
            ) from None
        except ValueError as exc:
            raise argparse.ArgumentTypeError(
                f"{text!r}: the data after '=' is not JSON ({exc})"
            ) from None
    return Event(name=name, data=data)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _load_functions(spec: str) -> Mapping[str, HostFunction]:
    # The chart's own helpers sit beside it: this command imports from the working
    # directory (statifier-oban's worker does not, ADR 13).
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        return import_functions(spec)
    except HostFunctionError as exc:
        raise _UsageError(f"--functions {exc}") from None


def load_chart(path: Path, functions: Mapping[str, HostFunction] | None) -> Machine | list[str]:
    """The compiled chart, or the lines to print when it cannot be compiled."""
    try:
        return compile_chart(path.read_bytes(), functions=functions, resolver=files_beside(path))
    except ChartError as exc:
        return [d.format(str(path)) for d in sorted(exc.diagnostics, key=lambda d: d.line)]
    except OSError as exc:
        return [f"{path}: error: {exc.strerror or exc}"]
    except HostFunctionError as exc:
        return [f"{path}: error: {exc}"]


def _run(args: argparse.Namespace, functions: Mapping[str, HostFunction] | None) -> int:
    loaded = load_chart(args.chart, functions)
    if not isinstance(loaded, Machine):
        for line in loaded:
            print(line)
        return 1
    if args.live:
        from statifier.cli._live import run_live

        return asyncio.run(
            run_live(
                loaded,
                args.event,
                sys.stdout,
                session_id=args.session_id,
                wait_ms=args.wait,
                as_json=args.json,
                trace=args.trace,
                strict=args.strict,
                chart=str(args.chart),
                resolver=files_beside(args.chart),
            )
        )
    from statifier.cli._virtual import run_virtual

    return run_virtual(
        loaded,
        args.event,
        sys.stdout,
        session_id=args.session_id,
        advance_ms=args.advance,
        as_json=args.json,
        trace=args.trace,
        strict=args.strict,
        chart=str(args.chart),
        resolver=files_beside(args.chart),
    )
