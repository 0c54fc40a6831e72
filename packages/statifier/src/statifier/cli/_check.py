"""``statifier check``: compile charts, lint them, print every diagnostic as compilers do.

Text: one ``file:line:col: severity: message [code]`` line per diagnostic, then one
``file: ok (...)`` or ``file: failed (...)`` line per chart. ``--json``: one
``{"record": "diagnostic", "file", "line", "column", "severity", "code", "message"}``
object per diagnostic, then ``{"record": "chart", "file", "result": "ok" | "failed",
"states", "transitions", "warnings", "notes"}`` per chart (``states`` and the counts
after it are absent for a chart that does not compile).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from statifier.chart.lint import lint
from statifier.chart.model import Machine
from statifier.cli._files import load_chart
from statifier.cli.kit import Output
from statifier.datamodel.host import HostFunction
from statifier.errors import Diagnostic


def check(
    paths: Sequence[Path],
    output: Output,
    *,
    strict: bool,
    functions: Mapping[str, HostFunction] | None,
) -> int:
    """Exit code 1 if any chart has an error (or, with ``strict``, a warning), else 0."""
    failed = False
    for path in paths:
        machine = load_chart(path, functions)
        if not isinstance(machine, Machine):
            _print(path, machine, output)
            if output.as_json:  # in text, the diagnostics say it all
                output.record_json({"record": "chart", "file": str(path), "result": "failed"})
            failed = True
            continue
        found = [*machine.warnings, *lint(machine)]
        _print(path, found, output)
        warnings = sum(d.severity == "warning" for d in found)
        notes = len(found) - warnings
        summary = f"{len(machine.states) - 1} states, {len(machine.transitions)} transitions"
        if warnings:
            summary += f", {warnings} warning{'s' if warnings != 1 else ''}"
        if notes:
            summary += f", {notes} note{'s' if notes != 1 else ''}"
        fails = strict and warnings > 0
        record = {
            "record": "chart",
            "file": str(path),
            "result": "failed" if fails else "ok",
            "states": len(machine.states) - 1,
            "transitions": len(machine.transitions),
            "warnings": warnings,
            "notes": notes,
        }
        if fails:
            output.line(f"{path}: failed ({summary}; --strict)", record)
            failed = True
        else:
            output.line(f"{path}: ok ({summary})", record)
    return 1 if failed else 0


def _print(path: Path, diagnostics: Sequence[Diagnostic], output: Output) -> None:
    for diagnostic in sorted(diagnostics, key=lambda d: (d.line, d.column)):
        output.line(
            diagnostic.format(str(path)),
            {
                "record": "diagnostic",
                "file": str(path),
                "line": diagnostic.line,
                "column": diagnostic.column,
                "severity": diagnostic.severity,
                "code": diagnostic.code,
                "message": diagnostic.message,
            },
        )
