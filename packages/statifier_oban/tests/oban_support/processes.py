"""Worker processes for the multi-process tests.

``WorkerProcesses`` starts a worker module of this package (``python -m MODULE <conninfo>
<oban name> <node> <queue>``), each with its own oban name (so each leads its own name and
runs its own lifeline) and a log file; ``running`` waits until one has registered its
queue's producer; ``worker_processes_fixture`` makes a fixture that kills every process
still alive at teardown. Used by the SIGKILL tests of timers and of durable executions.

A worker process imports test helpers (and resolves the deliveries named on job rows) the
way the test process does: through pytest's ``pythonpath``, handed to it explicitly as
``PYTHONPATH`` by ``subprocess_env``, never through its working directory. ``Lines`` reads
a subprocess's output line by line with a deadline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool

from oban_support.common import wait_until


class WorkerProcesses:
    """Worker processes of one test, by label; every one still alive is killed at teardown."""

    def __init__(
        self, module: str, conninfo: str, queue: str, logs: Path, env: dict[str, str]
    ) -> None:
        self.module = module
        self.conninfo = conninfo
        self.queue = queue
        self.logs = logs
        self.env = env
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, label: str) -> tuple[subprocess.Popen[bytes], str]:
        """Start worker ``label`` (its own oban name and node); return it and its node."""
        name = f"proc_{label}_{uuid.uuid4().hex[:8]}"
        node = f"{name}.node"
        with (self.logs / f"{label}.log").open("wb") as log:
            process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
                [sys.executable, "-m", self.module, self.conninfo, name, node, self.queue],
                env=self.env,
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


def subprocess_env(config: pytest.Config) -> dict[str, str]:
    """This environment, with pytest's ``pythonpath`` entries first on ``PYTHONPATH``.

    A subprocess started with it imports ``oban_support`` (and every other test helper)
    exactly as the tests do, whatever its working directory.
    """
    entries = [str(path) for path in config.getini("pythonpath")]
    inherited = os.environ.get("PYTHONPATH")
    if inherited:
        entries.append(inherited)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(entries)}


def worker_processes_fixture(module: str, kind: str) -> Any:
    """A fixture ``workers`` on the module's ``database``: a ``WorkerProcesses`` running
    ``python -m module`` on a fresh queue named after ``kind``, killed at teardown."""

    @pytest.fixture(name="workers")
    def workers(
        database: str, tmp_path: Path, pytestconfig: pytest.Config
    ) -> Iterator[WorkerProcesses]:
        """Spawns worker processes; kills them all at teardown, whatever happened."""
        queue_name = f"{kind}_{uuid.uuid4().hex[:8]}"
        env = subprocess_env(pytestconfig)
        spawned = WorkerProcesses(module, database, queue_name, tmp_path, env)
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


class Lines:
    """The stdout of a subprocess, line by line, readable with a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.seen: list[str] = []
        self._queue: Queue[str | None] = Queue()
        self._thread = threading.Thread(target=self._pump, args=(process,), daemon=True)
        self._thread.start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        """The first (new) line containing ``text``; fails after ``timeout`` or at EOF."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                raise AssertionError(f"no line with {text!r} in {timeout} s: {self.seen}") from None
            if line is None:
                raise AssertionError(f"output ended without {text!r}: {self.seen}")
            self.seen.append(line)
            if text in line:
                return line

    def rest(self, timeout: float = 10.0) -> list[str]:
        """Every remaining line until EOF."""
        self._thread.join(timeout)
        while not self._queue.empty():
            line = self._queue.get()
            if line is not None:
                self.seen.append(line)
        return self.seen
