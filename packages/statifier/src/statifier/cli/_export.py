"""``statifier export MODULE:NAME``: a chart written in Python (``statifier.build``), as
SCXML.

The chart is compiled first, with the command's ``--functions``: a chart that does not
compile is not written, and its errors are printed on stderr at the Python lines that made
them (so that ``statifier export app.charts:CARD > card.scxml`` never writes diagnostics
into the file). Warnings are printed on stderr too; the SCXML goes to stdout or
``--output``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from statifier.cli._files import ChartSource, load_chart
from statifier.cli.kit import CommandError
from statifier.datamodel.host import HostFunction


def export(
    source: ChartSource,
    output: Path | None,
    out: TextIO,
    functions: Mapping[str, HostFunction] | None,
) -> int:
    """Write the SCXML of ``source``; returns the exit code (1 when it does not compile)."""
    if source.exported is None:
        raise CommandError(
            f"CHART {source.name}: export takes MODULE:NAME, a chart written in Python "
            "(an SCXML file is SCXML already)"
        )
    machine = load_chart(source, functions)
    found = machine if isinstance(machine, list) else list(machine.warnings)
    for diagnostic in found:
        print(diagnostic.format(source.name), file=sys.stderr)
    if isinstance(machine, list):
        return 1
    if output is not None:
        output.write_text(source.exported.text, encoding="utf-8")
    else:
        out.write(source.exported.text)
    return 0
