"""``statifier diagram``: draw a chart as Mermaid, Graphviz DOT or SVG.

``--position BLOB`` (a file written by ``statifier.core.position.dumps``) or ``--event``
(events run on a virtual clock first) highlights a configuration. SVG runs Graphviz's
``dot``; without it the command says how to get it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from statifier.chart.diagram import DiagramError, svg_of_dot, to_dot, to_mermaid
from statifier.chart.model import Machine
from statifier.cli._files import ChartSource, load_chart
from statifier.cli.kit import CommandError
from statifier.core import position
from statifier.core.events import Event
from statifier.datamodel.host import HostFunction
from statifier.errors import PositionError
from statifier.virtual.driver import VirtualDriver


@dataclass(frozen=True, slots=True)
class DiagramRequest:
    """What ``statifier diagram`` was asked to draw."""

    chart: ChartSource
    format: str = "mermaid"
    position: Path | None = None
    events: tuple[Event, ...] | None = None
    output: Path | None = None


def diagram(
    request: DiagramRequest, out: TextIO, functions: Mapping[str, HostFunction] | None
) -> int:
    """Print (or write) the diagram; returns the exit code (``CommandError`` for a
    position that cannot be read or an SVG Graphviz cannot draw)."""
    machine = load_chart(request.chart, functions)
    if not isinstance(machine, Machine):
        for diagnostic in machine:
            print(diagnostic.format(request.chart.name), file=out)
        return 1
    try:
        active = _active(machine, request)
    except (OSError, PositionError) as exc:
        raise CommandError(f"--position {request.position}: {exc}") from None
    if request.format == "mermaid":
        text = to_mermaid(machine, active).encode()
    else:
        text = to_dot(machine, active).encode()
    if request.format == "svg":
        text = _svg(text)
    if request.output is not None:
        request.output.write_bytes(text)
    else:
        out.write(text.decode())
    return 0


def _active(machine: Machine, request: DiagramRequest) -> frozenset[int]:
    if request.position is not None:
        return position.loads(request.position.read_bytes(), machine).configuration
    if request.events is None:
        return frozenset()
    driver = VirtualDriver(machine, session_id="sess_diagram", resolver=request.chart.resolver())
    driver.start()
    driver.run_until_idle()
    for event in request.events:
        if driver.sessions[driver.top].halted:
            break
        driver.send(event)
        driver.run_until_idle()
    return driver.state.configuration


def _svg(dot_source: bytes) -> bytes:
    try:
        return svg_of_dot(dot_source)
    except DiagramError as exc:
        raise CommandError(str(exc)) from None
