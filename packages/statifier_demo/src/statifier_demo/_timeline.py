"""The demo's timeline: one line per thing that happened, timed from the demo's start.

The demo process notes what it does (``demo``); the worker processes' log lines that
matter are shown as they come, under the worker's label (``w1`` ...). Lines arrive from
several reader threads, so printing takes a lock. Every entry is kept, for the checks.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

KIND_WIDTH = 9
"""Width of the kind column (``armed``, ``applied``, ``killed``...)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One timeline entry: when, who (``demo`` or a worker label), what kind, the text."""

    t: float
    """Seconds since the epoch."""
    who: str
    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    """Facts the run is checked against (ids, pids...)."""


def epoch(moment: datetime | None) -> float | None:
    """Seconds since the epoch of a database timestamp (naive values are UTC, as oban's)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


class Timeline:
    """Prints entries as they come (thread-safe) and keeps them."""

    def __init__(self, t0: float, out: TextIO | None = None) -> None:
        self.t0 = t0
        self.entries: list[Entry] = []
        self._out = out if out is not None else sys.stdout
        self._lock = threading.Lock()

    def note(self, kind: str, text: str, who: str = "demo", **data: Any) -> Entry:
        """Record and print one entry now."""
        entry = Entry(time.time(), who, kind, text, data)
        with self._lock:
            self.entries.append(entry)
            when = f"{entry.t - self.t0:+8.3f}s"
            self._write(f"{when}  {who:<6} {kind:<{KIND_WIDTH}} {text}")
        return entry

    def print(self, text: str = "") -> None:
        """Print a line as it is."""
        with self._lock:
            self._write(text)

    def _write(self, text: str) -> None:
        self._out.write(text + "\n")
        self._out.flush()

    def rel(self, moment: float | datetime | None) -> str:
        """``+seconds`` from the demo's start (``-`` for None)."""
        value = epoch(moment) if isinstance(moment, datetime) else moment
        return "-" if value is None else f"{value - self.t0:+.3f}s"

    def of(self, kind: str, who: str | None = None) -> list[Entry]:
        """The entries of ``kind`` (by ``who`` when given), in order."""
        return [e for e in self.entries if e.kind == kind and (who is None or e.who == who)]


def table(
    headers: Sequence[str], rows: Iterable[Sequence[Any]], show: Callable[[str], None]
) -> None:
    """Print a plain left-aligned table, two spaces between columns."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return "  " + "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    show(line(list(headers)))
    show(line(["-" * w for w in widths]))
    for row in cells:
        show(line(row))
