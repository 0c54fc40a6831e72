"""``bench/callgrind_names.py``: perf trampolines named in a callgrind dump, and the
Python functions read back from ``callgrind_annotate`` (files written here)."""

from __future__ import annotations

from pathlib import Path

from bench.callgrind_names import name_trampolines, parse_annotated, read_perf_map

MAP = """\
547c000 b py::_find_and_load:<frozen importlib._bootstrap>
547c00b b py::Executions._run:/src/_executions.py
547c016 b py::read_json:/src/values.py
"""

DUMP = """\
fn=(1) 0x000000000547c00b
calls=2 0x547c016
cfn=(2) 0x000000000547c016
fn=(3) 0x0000000000033fb0
fn=(1)
cfn=(2)
fn=(4) PyObject_Call
"""


def test_a_perf_map_gives_names_without_spaces(tmp_path: Path) -> None:
    path = tmp_path / "perf-1.map"
    path.write_text(MAP)
    names = read_perf_map(path)
    assert names[0x547C000] == "py::_find_and_load:<frozen_importlib._bootstrap>"
    assert names[0x547C00B] == "py::Executions._run:/src/_executions.py"
    assert len(names) == 3


def test_only_the_trampolines_of_the_map_are_named(tmp_path: Path) -> None:
    path = tmp_path / "perf-1.map"
    path.write_text(MAP)
    dump = tmp_path / "ours.1.1"
    dump.write_text(DUMP)
    named = name_trampolines(dump, read_perf_map(path))
    assert named.name == "ours.1.1.named"
    assert named.read_text().splitlines() == [
        "fn=(1) py::Executions._run:/src/_executions.py",
        "calls=2 0x547c016",
        "cfn=(2) py::read_json:/src/values.py",
        "fn=(3) 0x0000000000033fb0",  # a library's code, not a trampoline
        "fn=(1)",
        "cfn=(2)",
        "fn=(4) PyObject_Call",
    ]


def test_python_functions_are_read_largest_first_with_recursion_folded() -> None:
    report = """\
--------------------------------------------------------------------------------
Ir
--------------------------------------------------------------------------------
1,000,000 (100.0%)  PROGRAM TOTALS

  900,000 (90.00%)  ???:py::Handle._run:/asyncio/events.py [???]
  300,000 (30.00%)  /Python/ceval.c:_PyEval_EvalFrameDefault [/lib/libpython3.12.so]
  120,000 (12.00%)  ???:py::read_json:/src/values.py'2 [???]
  250,000 (25.00%)  ???:py::read_json:/src/values.py [???]
    9,999 ( 1.00%)  ???:py::Executions._run:/src/_executions.py [???]
"""
    assert parse_annotated(report) == [
        (900_000, "Handle._run:/asyncio/events.py"),
        (250_000, "read_json:/src/values.py"),
        (9_999, "Executions._run:/src/_executions.py"),
    ]
