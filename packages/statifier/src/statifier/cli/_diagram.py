"""``statifier diagram``: draw a chart as Mermaid, Graphviz DOT or SVG.

``--position BLOB`` (a file written by ``statifier.core.position.dumps``) or ``--event``
(events run on a virtual clock first) highlights a configuration. SVG runs Graphviz's
``dot``; without it the command says how to get it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TextIO

from statifier.chart.diagram import to_dot, to_mermaid
from statifier.chart.model import Machine
from statifier.cli import load_chart
from statifier.cli._files import files_beside
from statifier.core import position
from statifier.datamodel.host import HostFunction
from statifier.errors import PositionError
from statifier.virtual.driver import VirtualDriver

GRAPHVIZ_HINT = (
    "SVG needs Graphviz's 'dot' on the PATH: install Graphviz (Debian/Ubuntu: "
    "apt-get install graphviz; macOS: brew install graphviz; Windows: winget install "
    "graphviz, or https://graphviz.org/download/), or use --format mermaid or --format dot"
)
DOT_TIMEOUT_S = 60


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
    dot = shutil.which("dot")
    if dot is None:
        print(f"statifier diagram: {GRAPHVIZ_HINT}", file=sys.stderr)
        return None
    try:
        done = subprocess.run(  # noqa: S603 - Graphviz found by which(), one fixed flag, no shell
            [dot, "-Tsvg"], input=dot_source, capture_output=True, timeout=DOT_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"statifier diagram: running {dot} failed: {exc}", file=sys.stderr)
        return None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        print(f"statifier diagram: dot failed: {message}", file=sys.stderr)
        return None
    return done.stdout
