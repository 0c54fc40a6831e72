"""CPU time the benchmarks read from ``/proc`` (Linux): a PostgreSQL server's, and the
whole machine's.

A local server's CPU is the user and system time of its postmaster and every process it
started (backends, background workers) since a reading; a backend that exits between two
readings takes its time with it, so the benchmarks keep their connections open. The
machine's busy time (every CPU, ``/proc/stat``) tells how much of it other work took while
a round ran: on a shared machine that, not the code, often bounds a rate.
"""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def process_cpu(pid: int) -> float:
    """User plus system seconds of one process (0 if it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def parent_of(pid: int) -> int | None:
    """The parent process id of ``pid`` (None if it cannot be read)."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None else None


class ServerCpu:
    """The CPU seconds of a local PostgreSQL server: its postmaster and its children."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster

    @classmethod
    def of_backend(cls, backend_pid: int) -> ServerCpu | None:
        """The server whose backend is ``backend_pid`` (``SELECT pg_backend_pid()``), or
        None when its processes cannot be read (a remote server)."""
        postmaster = parent_of(backend_pid)
        if postmaster is None or postmaster <= 1:
            return None
        return cls(postmaster)

    def seconds(self) -> float:
        """CPU seconds of the postmaster and its children so far."""
        total = process_cpu(self.postmaster)
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and parent_of(int(entry.name)) == self.postmaster:
                total += process_cpu(int(entry.name))
        return total


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine so far, all CPUs (``/proc/stat``: every
    state but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = stat.readline().split()[1:]
    values = [int(value) for value in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / TICKS
