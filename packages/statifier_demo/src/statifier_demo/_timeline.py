"""The demo's timeline: one line per thing that happened, with a time relative to the start.

The demo runs in three processes: the one the user started (which owns the database and
checks the outcome) and two phase processes. A phase process writes every entry as one
JSON object per line on its stdout (:class:`Emitter`); the first process reads them as
they come, prints them (:class:`Timeline`) and keeps them to check the run afterwards.
All three share one time origin, ``t0`` (seconds since the epoch), so every line reads
as ``+seconds`` from the moment the demo started.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

KIND_WIDTH = 9
"""Width of the kind column (``armed``, ``cancelled``, ``fired``...)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One timeline entry: when, which process, what kind, a readable text, and data."""

    t: float
    """Seconds since the epoch."""
    proc: str
    """``demo`` (the process the user started), ``p1`` or ``p2`` (the phase processes)."""
    pid: int
    """The process id of ``proc``."""
    kind: str
    """A short word: ``armed``, ``cancelled``, ``fired``, ``deploy``, ``resumed``..."""
    text: str
    """The line as a reader should see it."""
    data: dict[str, Any] = field(default_factory=dict)
    """Facts the run is checked against (job ids, states, session ids...)."""

    def to_json(self) -> str:
        """The entry as one line of JSON (the wire format between the processes)."""
        return json.dumps(
            {
                "t": self.t,
                "proc": self.proc,
                "pid": self.pid,
                "kind": self.kind,
                "text": self.text,
                "data": self.data,
            },
            default=str,
        )

    @classmethod
    def from_json(cls, line: str) -> Entry | None:
        """Parse one line written by :meth:`to_json`; None for anything else."""
        try:
            value = json.loads(line)
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        try:
            entry = cls(
                t=float(value["t"]),
                proc=str(value["proc"]),
                pid=int(value["pid"]),
                kind=str(value["kind"]),
                text=str(value["text"]),
                data=dict(value.get("data") or {}),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return entry


def epoch(moment: datetime | None) -> float | None:
    """Seconds since the epoch of a database timestamp (naive values are UTC, as oban's)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def relative(t0: float, moment: float | datetime | None) -> str:
    """``+1.234s`` from ``t0`` (``-`` for None)."""
    value = epoch(moment) if isinstance(moment, datetime) else moment
    if value is None:
        return "-"
    return f"{value - t0:+.3f}s"


class Emitter:
    """The phase-process side: writes entries as JSON lines (flushed at once)."""

    def __init__(self, proc: str, t0: float, out: TextIO | None = None) -> None:
        self.proc = proc
        self.t0 = t0
        self.pid = os.getpid()
        self._out = out if out is not None else sys.stdout

    def emit(self, kind: str, text: str, **data: Any) -> Entry:
        """Write one entry now and return it."""
        entry = Entry(time.time(), self.proc, self.pid, kind, text, data)
        self._out.write(entry.to_json() + "\n")
        self._out.flush()
        return entry

    def rel(self, moment: float | datetime | None) -> str:
        """``+seconds`` from the demo's start."""
        return relative(self.t0, moment)


class Timeline:
    """The first process's side: prints entries as they come and keeps them."""

    def __init__(self, t0: float, out: TextIO | None = None) -> None:
        self.t0 = t0
        self.entries: list[Entry] = []
        self._out = out if out is not None else sys.stdout
        self._pid = os.getpid()

    def show(self, entry: Entry) -> None:
        """Print ``entry`` as one line and keep it."""
        self.entries.append(entry)
        where = "demo" if entry.proc == "demo" else f"{entry.proc}:{entry.pid}"
        when = f"{entry.t - self.t0:+8.3f}s"
        self.print(f"{when}  {where:<10} {entry.kind:<{KIND_WIDTH}} {entry.text}")

    def note(self, kind: str, text: str, **data: Any) -> Entry:
        """An entry of this process (``demo``), shown at once."""
        entry = Entry(time.time(), "demo", self._pid, kind, text, data)
        self.show(entry)
        return entry

    def raw(self, proc: str, line: str) -> None:
        """A line a phase process wrote that is not an entry (shown as it is)."""
        self.print(f"{'':>10}  {proc:<10} | {line}")

    def print(self, text: str = "") -> None:
        """Print a line and flush (the timeline is read while it is written)."""
        self._out.write(text + "\n")
        self._out.flush()

    def rel(self, moment: float | datetime | None) -> str:
        """``+seconds`` from the demo's start."""
        return relative(self.t0, moment)

    def of(self, kind: str, proc: str | None = None) -> list[Entry]:
        """The entries of ``kind`` (of process ``proc`` when given), in order."""
        return [e for e in self.entries if e.kind == kind and (proc is None or e.proc == proc)]


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
