"""Python function names in a callgrind profile (``bench/executions.py --callgrind
--python-names``).

Callgrind counts instructions by C function, so a Python program's profile says how much
the interpreter spent, not in which Python function. Python 3.12 can enter each Python
function through a small trampoline of its own (``PYTHONPERFSUPPORT=1``) and lists them
in ``/tmp/perf-<pid>.map`` (address, size, ``py::<qualified name>:<file>``) for Linux
``perf``; callgrind sees each trampoline as a function without a symbol, named by its
address. Naming those addresses from the map gives each Python function its inclusive
instructions: what it cost with everything it called, collections of the garbage it
made included. The trampolines themselves cost instructions (a durable step about 15%
more), so totals compare only between runs made the same way.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

UNNAMED = re.compile(r"^(c?fn=\(\d+\)) 0x([0-9a-f]+)$")
"""A callgrind dump's first mention of a function without a symbol: its id and address."""

ANNOTATED = re.compile(r"^\s*([\d,]+) \([\s\d.]+%\)\s+\S*?py::(\S+)")
"""A line of ``callgrind_annotate`` naming a Python function: its instructions, its name."""


PERF_MAPS = Path("/tmp")  # noqa: S108 - where CPython writes them, not ours to choose
"""Where a process with perf support lists its trampolines (``perf-<pid>.map``)."""


def perf_map(pid: int) -> dict[int, str]:
    """The trampolines process ``pid`` listed: start address to ``name:file`` (spaces,
    which callgrind's names cannot hold, made underscores)."""
    return read_perf_map(PERF_MAPS / f"perf-{pid}.map")


def read_perf_map(path: Path) -> dict[int, str]:
    """The trampolines of a perf map file (see :func:`perf_map`)."""
    names: dict[int, str] = {}
    for line in path.read_text().splitlines():
        address, _size, name = line.split(" ", 2)
        names[int(address, 16)] = name.replace(" ", "_")
    return names


def name_trampolines(dump: Path, names: dict[int, str]) -> Path:
    """A copy of ``dump`` (next to it, ``.named``) whose trampolines carry their names."""
    named = dump.with_name(dump.name + ".named")
    with dump.open() as source, named.open("w") as target:
        for line in source:
            found = UNNAMED.match(line.rstrip("\n"))
            if found is not None and int(found.group(2), 16) in names:
                line = f"{found.group(1)} {names[int(found.group(2), 16)]}\n"
            target.write(line)
    return named


def python_costs(named: Path) -> list[tuple[int, str]]:
    """Each Python function of a named dump with its inclusive instructions, largest
    first (read from ``callgrind_annotate --inclusive=yes``)."""
    program = shutil.which("callgrind_annotate") or "callgrind_annotate"
    report = subprocess.run(  # noqa: S603 - valgrind's own tool on our own dump
        [program, "--inclusive=yes", "--threshold=100", str(named)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return parse_annotated(report)


def parse_annotated(report: str) -> list[tuple[int, str]]:
    """The Python functions of a ``callgrind_annotate`` report, largest first."""
    costs: dict[str, int] = {}
    for line in report.splitlines():
        found = ANNOTATED.match(line)
        if found is not None:
            # A recursive function's inner entries carry a suffix ('2): the outermost
            # one holds the whole cost.
            name = re.sub(r"'\d+$", "", found.group(2))
            costs[name] = max(costs.get(name, 0), int(found.group(1).replace(",", "")))
    return sorted(((count, name) for name, count in costs.items()), reverse=True)
