"""``statifier diagram``: draw a chart as Mermaid, Graphviz DOT or SVG.

``--position BLOB`` (a file written by ``statifier.core.position.dumps``) or ``--event``
(events run on a virtual clock first) highlights a configuration. SVG runs Graphviz's
``dot``; without it the command says how to get it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import TextIO

from statifier.chart.diagram import DiagramError, svg_of_dot, to_dot, to_mermaid
from statifier.chart.model import Machine
from statifier.cli import load_chart
from statifier.cli._files import files_beside
from statifier.core import position
from statifier.datamodel.host import HostFunction
from statifier.errors import PositionError
from statifier.virtual.driver import VirtualDriver


def diagram(
    args: argparse.Namespace, out: TextIO, functions: Mapping[str, HostFunction] | None
) -> int:
    """Print (or write) the diagram; returns the exit code."""
    machine = load_chart(args.chart, functions)
    if not isinstance(machine, Machine):
        for line in machine:
            print(line, file=out)
        return 1
    try:
        active = _active(machine, args)
    except (OSError, PositionError) as exc:
        print(f"statifier diagram: --position {args.position}: {exc}", file=sys.stderr)
        return 1
    if args.format == "mermaid":
        text = to_mermaid(machine, active).encode()
    else:
        text = to_dot(machine, active).encode()
    if args.format == "svg":
        rendered = _svg(text)
        if rendered is None:
            return 1
        text = rendered
    if args.output is not None:
        args.output.write_bytes(text)
    else:
        out.write(text.decode())
    return 0


def _active(machine: Machine, args: argparse.Namespace) -> frozenset[int]:
    if args.position is not None:
        return position.loads(args.position.read_bytes(), machine).configuration
    if args.event is None:
        return frozenset()
    driver = VirtualDriver(machine, session_id="sess_diagram", resolver=files_beside(args.chart))
    driver.start()
    driver.run_until_idle()
    for event in args.event:
        if driver.sessions[driver.top].halted:
            break
        driver.send(event)
        driver.run_until_idle()
    return driver.state.configuration


def _svg(dot_source: bytes) -> bytes | None:
    try:
        return svg_of_dot(dot_source)
    except DiagramError as exc:
        print(f"statifier diagram: {exc}", file=sys.stderr)
        return None
