"""Worker processes for the multi-process tests (a support module: pytest does not collect it).

``WorkerProcesses`` starts a worker script by path (``python SCRIPT <conninfo> <oban
name> <node> <queue>``), each with its own oban name (so each leads its own name and runs
its own lifeline) and a log file; ``running`` waits until one has registered its queue's
producer; ``worker_processes_fixture`` makes a fixture that kills every process still
alive at teardown. Used by the SIGKILL tests of timers and of durable executions.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool
from support_common import wait_until


class WorkerProcesses:
    """Worker processes of one test, by label; every one still alive is killed at teardown."""

    def __init__(self, script: str, conninfo: str, queue: str, logs: Path) -> None:
        self.script = script
        self.conninfo = conninfo
        self.queue = queue
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, label: str) -> tuple[subprocess.Popen[bytes], str]:
        """Start worker ``label`` (its own oban name and node); return it and its node."""
        name = f"proc_{label}_{uuid.uuid4().hex[:8]}"
        node = f"{name}.node"
        with (self.logs / f"{label}.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, self.script, self.conninfo, name, node, self.queue],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.processes[label] = process
        return process, node

    def kill_all(self) -> None:
        """SIGKILL and reap every process still running."""
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)

    def log(self, label: str) -> str:
        """The end of what worker ``label`` printed (for failure messages)."""
        return (self.logs / f"{label}.log").read_text(errors="replace")[-3000:]


def worker_processes_fixture(script: str, kind: str) -> Any:
    """A fixture ``workers`` on the module's ``database``: a ``WorkerProcesses`` running
    ``script`` on a fresh queue named after ``kind``, killed at teardown."""

    @pytest.fixture(name="workers")
    def workers(database: str, tmp_path: Path) -> Iterator[WorkerProcesses]:
        """Spawns worker processes; kills them all at teardown, whatever happened."""
        spawned = WorkerProcesses(script, database, f"{kind}_{uuid.uuid4().hex[:8]}", tmp_path)
        try:
            yield spawned
        finally:
            spawned.kill_all()

    return workers


async def scalar(pool: AsyncConnectionPool, query: Any, params: Any = None) -> Any:
    """The first column of the first row."""
    async with pool.connection() as conn:
        row = await (await conn.execute(query, params)).fetchone()
    assert row is not None
    return row[0]


async def running(
    pool: AsyncConnectionPool, node: str, process: subprocess.Popen[bytes], timeout: float = 30
) -> None:
    """Wait until the worker process on ``node`` has registered its queue's producer."""

    async def ready() -> bool:
        assert process.poll() is None, f"worker exited with {process.returncode}"
        count = "SELECT count(*) FROM oban_producers WHERE node = %s"
        return bool(await scalar(pool, count, [node]))

    await wait_until(ready, timeout=timeout, interval=0.05, what=f"worker {node} running")
