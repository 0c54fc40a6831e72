"""The ``statifier`` commands on click: ``check``, ``run``, ``diagram`` and ``export``.

Imported only when the command line runs (``statifier.cli.main``), since click is the
``statifier[cli]`` extra. Each command takes ``--functions MODULE:NAME`` and ``--path DIR``
(the one rule of ``statifier.cli.kit`` for user code) and ``--version``. A CHART is an
SCXML file or ``MODULE:NAME``, a chart written in Python (``statifier.cli._files``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from statifier.chart.durations import format_duration
from statifier.cli import kit
from statifier.cli._files import chart_source, load_chart
from statifier.core.events import Event
from statifier.testing import MAX_STATES_LIMIT
from statifier.values import ValueRefused, brief, parse_json

DEFAULT_WAIT_MS = 60_000
"""How long ``run --live`` waits for pending timers after the last event, by default."""


class EventType(click.ParamType[Event, Any]):
    """``NAME`` or ``NAME=JSON``: an external event, its data read as bounded JSON."""

    name = "event"

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        """``NAME[=JSON]``."""
        return "NAME[=JSON]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The event (a usage error naming the option if ``value`` is not one)."""
        if isinstance(value, Event):
            return value
        text = str(value)
        name, sep, payload = text.partition("=")
        if not name.strip() or name != name.strip() or " " in name:
            self.fail(f"{brief(text, 60)}: expected NAME or NAME=JSON", param, ctx)
        data: Any = None
        if sep:
            try:
                data = parse_json(payload, max_chars=kit.MAX_JSON_ARGUMENT)
            except ValueRefused as exc:
                self.fail(f"{brief(text, 60)}: the data after '=' is {exc}", param, ctx)
        return Event(name=name, data=data)


EVENT = EventType()


def _user_code[F: Callable[..., Any]](function: F) -> F:
    """``--functions`` and ``--path``, and ``--version``, for every command."""
    return kit.version_option("statifier")(kit.path_option(kit.functions_option(function)))


_OUTPUT = click.option(
    "--output", "-o", type=click.Path(path_type=Path), default=None,
    help="write here instead of stdout",
)  # fmt: skip
"""``--output FILE``, for the commands that print a document (diagram, export)."""


def _functions(paths: tuple[str, ...], spec: str | None) -> Any:
    kit.set_import_path(paths)
    return kit.load_functions(spec)


@click.group(cls=kit.Group, help="SCXML statecharts: check, run and draw charts.")
@kit.version_option("statifier")
def statifier() -> None:
    """The ``statifier`` command."""


@statifier.command(
    help="Compile and lint charts (SCXML files, or MODULE:NAME of charts written in Python), "
    "print every diagnostic."
)
@click.argument("charts", nargs=-1, required=True, metavar="CHART...")
@click.option("--strict", is_flag=True, help="fail on warnings too")
@click.option(
    "--explore", type=click.IntRange(1, MAX_STATES_LIMIT), default=None, metavar="N",
    help="also search up to N positions of each chart, over the events it names, its "
    "timers and invocation answers: states never reached and actions that raise errors "
    "(findings fail --strict)",
)  # fmt: skip
@kit.json_option
@_user_code
def check(
    charts: tuple[str, ...],
    strict: bool,
    explore: int | None,
    as_json: bool,
    functions: str | None,
    paths: tuple[str, ...],
) -> int:
    """``statifier check``."""
    from statifier.cli._check import check as run_check

    loaded = _functions(paths, functions)
    sources = [chart_source(chart) for chart in charts]
    return run_check(sources, kit.Output(as_json), strict=strict, functions=loaded, explore=explore)


@statifier.command(help="Drive a chart with events on a virtual clock (or live, with --live).")
@click.argument("chart", metavar="CHART")
@click.option(
    "--event", "-e", "events", multiple=True, type=EVENT,
    help="an external event (repeatable); data after '=' is JSON",
)  # fmt: skip
@click.option(
    "--advance", type=kit.DURATION, default=None, metavar="DURATION",
    help="after the events, let this much virtual time pass (e.g. 7d); "
    "default: fire every pending timer",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="print one JSON record per line")
@click.option(
    "--trace", is_flag=True,
    help="print every microstep: events taken, transitions, states exited and entered",
)  # fmt: skip
@click.option(
    "--strict", is_flag=True,
    help="stop with exit status 1 when no transition matches an external event",
)  # fmt: skip
@click.option(
    "--live", is_flag=True,
    help="run a live asyncio session with real delays instead of the virtual clock; "
    "waits for pending timers (up to --wait)",
)  # fmt: skip
@click.option(
    "--wait", type=kit.DURATION, default=DEFAULT_WAIT_MS, metavar="DURATION",
    help="with --live: how long to wait for pending timers after the last event "
    f"(default: {format_duration(DEFAULT_WAIT_MS)})",
)  # fmt: skip
@click.option("--session-id", default="sess_cli", show_default=True, help="the session's id")
@_user_code
def run(
    chart: str,
    events: tuple[Event, ...],
    advance: int | None,
    as_json: bool,
    trace: bool,
    strict: bool,
    live: bool,
    wait: int,
    session_id: str,
    functions: str | None,
    paths: tuple[str, ...],
) -> int:
    """``statifier run``."""
    functions_ = _functions(paths, functions)
    source = chart_source(chart)
    loaded = load_chart(source, functions_)
    if isinstance(loaded, list):
        for diagnostic in loaded:
            print(diagnostic.format(chart))
        return 1
    place = source.place if source.built is not None else None
    if live:
        from statifier.cli._live import run_live

        return asyncio.run(
            run_live(
                loaded,
                events,
                sys.stdout,
                session_id=session_id,
                wait_ms=wait,
                as_json=as_json,
                trace=trace,
                strict=strict,
                chart=chart,
                place=place,
                resolver=source.resolver(),
            )
        )
    from statifier.cli._virtual import run_virtual

    return run_virtual(
        loaded,
        events,
        sys.stdout,
        session_id=session_id,
        advance_ms=advance,
        as_json=as_json,
        trace=trace,
        strict=strict,
        chart=chart,
        place=place,
        resolver=source.resolver(),
    )


@statifier.command(help="Draw a chart (Mermaid, Graphviz DOT or SVG).")
@click.argument("chart", metavar="CHART")
@click.option(
    "--format", "fmt", type=click.Choice(["mermaid", "dot", "svg"]), default="mermaid",
    show_default=True, help="SVG needs Graphviz's dot",
)  # fmt: skip
@click.option(
    "--position", type=click.Path(path_type=Path), default=None, metavar="BLOB",
    help="highlight the configuration of a stored position (statifier.core.position)",
)  # fmt: skip
@click.option(
    "--event", "-e", "events", multiple=True, type=EVENT,
    help="highlight the configuration after these events on a virtual clock",
)  # fmt: skip
@_OUTPUT
@_user_code
def diagram(
    chart: str,
    fmt: str,
    position: Path | None,
    events: tuple[Event, ...],
    output: Path | None,
    functions: str | None,
    paths: tuple[str, ...],
) -> int:
    """``statifier diagram``."""
    from statifier.cli._diagram import DiagramRequest
    from statifier.cli._diagram import diagram as draw

    if position is not None and events:
        raise click.UsageError("--position and --event exclude each other")
    loaded = _functions(paths, functions)
    request = DiagramRequest(chart_source(chart), fmt, position, events or None, output)
    return draw(request, sys.stdout, loaded)


@statifier.command(help="Write a chart written in Python as SCXML (compiled first).")
@click.argument("chart", metavar="MODULE:NAME")
@_OUTPUT
@_user_code
def export(
    chart: str,
    output: Path | None,
    functions: str | None,
    paths: tuple[str, ...],
) -> int:
    """``statifier export``."""
    from statifier.cli._export import export as write_scxml

    loaded = _functions(paths, functions)
    return write_scxml(chart_source(chart), output, sys.stdout, loaded)
