"""How thinly a piece of Python code's cost is spread over its lines (``bench/interpreter.py``).

A goal that asks an event to get a tenth faster is easy when one line holds a tenth of
the event, and hard when no line holds more than a few hundredths: then every line the
event runs must get cheaper. ``count_bytecodes`` counts the bytecodes each line runs
(``sys.monitoring``'s instruction events, CPython 3.12 and later); ``spread_of`` sums
them up per event. Bytecodes stand for time only roughly (a call and an addition are one
each), so the bench prints them beside its timings, never in their place.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType

TOP = 10
"""How many of the costliest lines ``Spread.top_share`` adds up."""

_TOOL_NAME = "statifier-bench-line-spread"


@dataclass(frozen=True, slots=True)
class Line:
    """One line of source: its file and number."""

    path: str
    number: int


@dataclass(frozen=True, slots=True)
class Spread:
    """Bytecodes an event, over how many lines, and the share of the costliest."""

    per_event: float
    lines: int
    costliest: Line
    costliest_share: float
    top_share: float
    """The share of the ``TOP`` costliest lines together."""

    def describe(self) -> str:
        """The spread in one phrase, for a verdict's note."""
        return (
            f"{self.per_event:,.0f} bytecodes an event over {self.lines} lines, none above "
            f"{self.costliest_share:.1%}, the {TOP} costliest {self.top_share:.0%}"
        )


def spread_of(counts: Mapping[Line, int], events: int) -> Spread:
    """The spread of ``counts`` (bytecodes per line over ``events`` events).

    Raises ``ValueError`` when there is nothing to spread (no event, or no line ran)."""
    total = sum(counts.values())
    if events <= 0 or total <= 0:
        raise ValueError(f"no bytecodes to spread: {total} over {events} events")
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0].path, item[0].number))
    costliest, most = ranked[0]
    return Spread(
        per_event=total / events,
        lines=len(ranked),
        costliest=costliest,
        costliest_share=most / total,
        top_share=sum(count for _, count in ranked[:TOP]) / total,
    )


def count_bytecodes(run: Callable[[], None], under: Path) -> Counter[Line]:
    """The bytecodes each line of a file below the folder ``under`` ran while ``run`` ran.

    Raises ``RuntimeError`` when every ``sys.monitoring`` tool id is taken."""
    monitoring = sys.monitoring
    tool = _free_tool()
    # Keyed by the code object's identity: code objects compare equal by their contents,
    # so the same function in two files would count as one.
    by_offset: Counter[tuple[int, int]] = Counter()
    codes: dict[int, CodeType] = {}

    def counted(code: CodeType, offset: int) -> None:
        ident = id(code)
        codes[ident] = code
        by_offset[ident, offset] += 1

    monitoring.use_tool_id(tool, _TOOL_NAME)
    try:
        monitoring.register_callback(tool, monitoring.events.INSTRUCTION, counted)
        monitoring.set_events(tool, monitoring.events.INSTRUCTION)
        try:
            run()
        finally:
            monitoring.set_events(tool, monitoring.events.NO_EVENTS)
            monitoring.register_callback(tool, monitoring.events.INSTRUCTION, None)
    finally:
        monitoring.free_tool_id(tool)
    return _by_line(codes, by_offset.items(), str(under.resolve()) + os.sep)


def _free_tool() -> int:
    # Tool ids 0 to 5; 0, 1, 2 and 5 are named for debuggers, coverage, profilers and
    # optimizers, so the others are tried first.
    for tool in (3, 4, 2, 1, 0, 5):
        if sys.monitoring.get_tool(tool) is None:
            return tool
    raise RuntimeError("every sys.monitoring tool id is in use")


def _by_line(
    codes: Mapping[int, CodeType], by_offset: Iterable[tuple[tuple[int, int], int]], under: str
) -> Counter[Line]:
    lines: Counter[Line] = Counter()
    tables: dict[int, dict[int, int]] = {}
    for (ident, offset), count in by_offset:
        code = codes[ident]
        path = code.co_filename
        if not path.startswith(under):
            continue
        table = tables.get(ident)
        if table is None:
            table = tables[ident] = _line_table(code)
        number = table.get(offset)
        if number is not None:
            lines[Line(path, number)] += count
    return lines


def _line_table(code: CodeType) -> dict[int, int]:
    # co_lines() gives ranges of byte offsets; instructions are two bytes each.
    table: dict[int, int] = {}
    for start, end, number in code.co_lines():
        if number is not None:
            for offset in range(start, end, 2):
                table[offset] = number
    return table
