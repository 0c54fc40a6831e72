"""``statifier check``: compile charts, lint them, print every diagnostic as compilers do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from statifier.chart.lint import lint
from statifier.chart.model import Machine
from statifier.cli import load_chart
from statifier.datamodel.host import HostFunction
from statifier.errors import Diagnostic


def check(
    paths: Sequence[Path],
    out: TextIO,
    *,
    strict: bool,
    functions: Mapping[str, HostFunction] | None,
) -> int:
    """Exit code 1 if any chart has an error (or, with ``strict``, a warning), else 0."""
    failed = False
    for path in paths:
        machine = load_chart(path, functions)
        if not isinstance(machine, Machine):
            for line in machine:
                print(line, file=out)
            failed = True
            continue
        found = [*machine.warnings, *lint(machine)]
        _print(path, found, out)
        warnings = sum(d.severity == "warning" for d in found)
        notes = len(found) - warnings
        summary = f"{len(machine.states) - 1} states, {len(machine.transitions)} transitions"
        if warnings:
            summary += f", {warnings} warning{'s' if warnings != 1 else ''}"
        if notes:
            summary += f", {notes} note{'s' if notes != 1 else ''}"
        if strict and warnings:
            print(f"{path}: failed ({summary}; --strict)", file=out)
            failed = True
        else:
            print(f"{path}: ok ({summary})", file=out)
    return 1 if failed else 0


def _print(path: Path, diagnostics: Sequence[Diagnostic], out: TextIO) -> None:
    for diagnostic in sorted(diagnostics, key=lambda d: (d.line, d.column)):
        print(diagnostic.format(str(path)), file=out)
