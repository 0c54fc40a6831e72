"""``statifier check``: compile charts, lint them, print every diagnostic as compilers do.

Text: one ``file:line:col: severity: message [code]`` line per diagnostic, with
``--explore N`` the exploration's lines (``statifier.testing.Exploration.lines``), then
one ``file: ok (...)`` or ``file: failed (...)`` line per chart. ``--json``: one
``{"record": "diagnostic", "file", "line", "column", "severity", "code", "message"}``
object per diagnostic, with ``--explore`` one ``{"record": "exploration", "file",
"positions", "complete", "events", "unreached", "finals_unreached", "errors": [{"states",
"action", "error", "line", "message", "path"}]}``, then ``{"record": "chart", "file",
"result": "ok" | "failed", "states", "transitions", "warnings", "notes"}`` per chart
(with ``"findings"`` when explored; ``states`` and the counts after it are absent for a
chart that does not compile). A chart written in Python (``MODULE:NAME``) is compiled from
its export; its diagnostics name the Python file and line that made each element, and its
chart line names it ``MODULE:NAME``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from statifier.chart.lint import lint
from statifier.chart.model import Machine
from statifier.cli._files import ChartSource, load_chart
from statifier.cli.kit import Output
from statifier.datamodel.host import HostFunction
from statifier.errors import Diagnostic


def check(
    sources: Sequence[ChartSource],
    output: Output,
    *,
    strict: bool,
    functions: Mapping[str, HostFunction] | None,
    explore: int | None = None,
) -> int:
    """Exit code 1 if any chart has an error (or, with ``strict``, a warning or a finding
    of the exploration), else 0. ``explore`` bounds the positions ``--explore`` visits
    per chart (None: no exploration)."""
    failed = False
    for source in sources:
        path = source.name
        machine = load_chart(source, functions)
        if not isinstance(machine, Machine):
            _print(path, machine, output)
            if output.as_json:  # in text, the diagnostics say it all
                output.record_json({"record": "chart", "file": path, "result": "failed"})
            failed = True
            continue
        found = [*machine.warnings, *(source.locate(d) for d in lint(machine))]
        _print(path, found, output)
        findings = _explore(source, machine, explore, output) if explore is not None else 0
        warnings = sum(d.severity == "warning" for d in found)
        notes = len(found) - warnings
        summary = f"{len(machine.states) - 1} states, {len(machine.transitions)} transitions"
        if warnings:
            summary += f", {warnings} warning{'s' if warnings != 1 else ''}"
        if notes:
            summary += f", {notes} note{'s' if notes != 1 else ''}"
        if findings:
            summary += f", {findings} exploration finding{'s' if findings != 1 else ''}"
        fails = strict and (warnings > 0 or findings > 0)
        record = {
            "record": "chart",
            "file": path,
            "result": "failed" if fails else "ok",
            "states": len(machine.states) - 1,
            "transitions": len(machine.transitions),
            "warnings": warnings,
            "notes": notes,
        }
        if explore is not None:
            record["findings"] = findings
        if fails:
            output.line(f"{path}: failed ({summary}; --strict)", record)
            failed = True
        else:
            output.line(f"{path}: ok ({summary})", record)
    return 1 if failed else 0


def _explore(source: ChartSource, machine: Machine, max_states: int, output: Output) -> int:
    """``--explore``: search the chart's positions, print what was found; the number of
    findings (states never reached, errors)."""
    from statifier.testing import explore

    found = explore(machine, max_states=max_states, resolver=source.resolver())
    if output.as_json:
        output.record_json({"record": "exploration", "file": source.name, **found.record()})
    else:
        for line in found.lines(source.name):
            output.line(line)
    return found.findings


def _print(path: str, diagnostics: Sequence[Diagnostic], output: Output) -> None:
    for diagnostic in sorted(diagnostics, key=lambda d: (d.file or "", d.line, d.column)):
        output.line(
            diagnostic.format(path),
            {
                "record": "diagnostic",
                "file": diagnostic.file or path,
                "line": diagnostic.line,
                "column": diagnostic.column,
                "severity": diagnostic.severity,
                "code": diagnostic.code,
                "message": diagnostic.message,
            },
        )
