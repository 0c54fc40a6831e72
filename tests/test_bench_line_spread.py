"""``bench/line_spread.py``: bytecodes counted per line, and their spread summed up."""

from __future__ import annotations

import dis
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from bench.line_spread import TOP, Line, count_bytecodes, spread_of

LOOP = """\
def work(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""


def load(path: Path, source: str) -> ModuleType:
    """``source`` as a module of its own, read from ``path``."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_loops_body_is_counted_once_a_turn(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    module = load(inside / "loop.py", LOOP)
    few = count_bytecodes(lambda: module.work(10), inside)
    many = count_bytecodes(lambda: module.work(30), inside)
    path = str((inside / "loop.py").resolve())
    body = Line(path, 4)
    # Each of the body's instructions runs once a turn, as ``dis`` lists them.
    per_turn = [
        op for op in dis.get_instructions(module.work) if op.positions and op.positions.lineno == 4
    ]
    assert per_turn
    assert few[body] == 10 * len(per_turn)
    assert many[body] == 30 * len(per_turn)
    # A line run once a call counts the same for ten turns as for thirty.
    assert many[Line(path, 2)] == few[Line(path, 2)] > 0
    # Every line of the body ran, and nothing else did (the ``def`` line may count the
    # function's start, as an interpreter version has it).
    assert {Line(path, number) for number in (2, 3, 4, 5)} <= set(few)
    assert set(few) <= {Line(path, number) for number in (1, 2, 3, 4, 5)}


def test_only_files_below_the_folder_count_and_the_tool_is_given_back(tmp_path: Path) -> None:
    inside, outside = tmp_path / "pkg", tmp_path / "pkg_other"
    inside.mkdir()
    outside.mkdir()
    counted = load(inside / "counted.py", LOOP)
    # A sibling folder whose name starts with the counted one's is not below it.
    ignored = load(outside / "ignored.py", LOOP)

    def both() -> None:
        counted.work(3)
        ignored.work(3)

    found = count_bytecodes(both, inside)
    assert {line.path for line in found} == {str((inside / "counted.py").resolve())}
    assert all(sys.monitoring.get_tool(tool) is None for tool in (3, 4))


def test_the_tool_is_given_back_when_the_run_fails(tmp_path: Path) -> None:
    def failing() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        count_bytecodes(failing, tmp_path)
    assert all(sys.monitoring.get_tool(tool) is None for tool in (3, 4))


def line(number: int) -> Line:
    return Line("core.py", number)


def test_the_spread_sums_per_event_and_ranks_the_costliest() -> None:
    # Twelve lines: one of 30 bytecodes, eleven of 10 (140 over 2 events).
    counts = {line(0): 30, **{line(n): 10 for n in range(1, 12)}}
    spread = spread_of(counts, 2)
    assert spread.per_event == 70
    assert spread.lines == 12
    assert spread.costliest == line(0)
    assert spread.costliest_share == pytest.approx(30 / 140)
    # The TOP costliest: the 30 and nine of the tens, not all eleven.
    assert TOP == 10
    assert spread.top_share == pytest.approx((30 + 9 * 10) / 140)
    assert spread.describe() == (
        "70 bytecodes an event over 12 lines, none above 21.4%, the 10 costliest 86%"
    )


def test_a_tie_names_the_first_line_in_the_files_order() -> None:
    assert spread_of({line(7): 5, line(3): 5, Line("a.py", 9): 5}, 1).costliest == Line("a.py", 9)


def test_thousands_are_grouped_in_the_description() -> None:
    assert spread_of({line(1): 2_427_000}, 1_000).describe().startswith("2,427 bytecodes")


@pytest.mark.parametrize(("counts", "events"), [({line(1): 3}, 0), ({}, 5), ({line(1): 0}, 1)])
def test_nothing_to_spread_is_refused(counts: dict[Line, int], events: int) -> None:
    with pytest.raises(ValueError, match="no bytecodes"):
        spread_of(counts, events)
