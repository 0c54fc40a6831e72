"""``statifier-oban worker`` as a subprocess, for the tests that run it as production would.

``WorkerProcess.start(...)`` runs ``python -m statifier_oban.cli worker`` with the given
options and reads its stdout line by line (``lines.wait_for(text)``); every process still
running at teardown is killed (``worker_processes_fixture``). ``wait_for_job`` polls a job's state
from a synchronous connection.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from oban_support.processes import Lines


class WorkerProcesses:
    """Starts ``statifier-oban worker`` processes; kills the ones still running at the end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def start(
        self, *args: str, cwd: Path, env: dict[str, str] | None = None
    ) -> tuple[subprocess.Popen[str], Lines]:
        """Run ``python -m statifier_oban.cli worker ARGS`` in ``cwd``; wait for ``running``."""
        process = subprocess.Popen(  # noqa: S603 - our interpreter and CLI, fixed arguments
            [sys.executable, "-m", "statifier_oban.cli", "worker", *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self.started.append(process)
        lines = Lines(process)
        lines.wait_for("statifier-oban worker: running queues")
        return process, lines

    def kill_all(self) -> None:
        """SIGKILL and reap every process still running."""
        for process in self.started:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)


def worker_processes_fixture() -> Any:
    """A fixture ``worker_processes``: a ``WorkerProcesses`` killed at teardown.

    Use as ``worker_processes = worker_processes_fixture()`` in a test module.
    """

    @pytest.fixture(name="worker_processes")
    def worker_processes() -> Iterator[WorkerProcesses]:
        """``statifier-oban worker`` subprocesses, all killed at teardown."""
        processes = WorkerProcesses()
        try:
            yield processes
        finally:
            processes.kill_all()

    return worker_processes


def wait_for_job(url: str, job_id: int, states: set[str], timeout: float = 20.0) -> str:
    """Poll job ``job_id`` until its state is in ``states``; return it."""
    deadline = time.monotonic() + timeout
    state = "?"
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT state::text FROM oban_jobs WHERE id = %s", [job_id]
            ).fetchone()
        state = row[0] if row else "missing"
        if state in states:
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} stayed {state}")
