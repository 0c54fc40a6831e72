"""Worker processes for the benchmarks that run oban queues in processes of their own.

A benchmark script starts copies of itself with ``--worker --url URL --node wN --limit N``
(:class:`WorkerProcesses`); each runs :func:`serve_until_stdin_closes`: it prints ``ready``
once its queues run and stops when its stdin closes. The parent reads their CPU time from
``/proc`` (Linux), which other load on the machine hardly moves.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence

from cpu_meter import process_cpu
from oban import Oban


class WorkerStartFailed(RuntimeError):
    """A worker process did not report ``ready``."""


class WorkerProcesses:
    """``count`` worker processes of ``script`` (each ``script --worker ...``, then
    ``extra`` arguments; ``env`` is added to the environment, ``node_prefix`` names the
    nodes ``<prefix>1``, ``<prefix>2``...; ``launcher`` goes before the interpreter, a
    profiler's command line)."""

    def __init__(
        self,
        script: str,
        url: str,
        count: int,
        limit: int,
        *,
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        node_prefix: str = "w",
        launcher: Sequence[str] = (),
    ) -> None:
        self.script = script
        self.launcher = tuple(launcher)
        self.url = url
        self.count = count
        self.limit = limit
        self.extra = tuple(extra)
        self.env = None if env is None else {**os.environ, **env}
        self.node_prefix = node_prefix
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self) -> None:
        """Start every process and wait for its ``ready`` line."""
        for i in range(self.count):
            argv = [
                "--worker",
                "--url",
                self.url,
                "--node",
                f"{self.node_prefix}{i + 1}",
                "--limit",
                str(self.limit),
                *self.extra,
            ]
            proc = await asyncio.create_subprocess_exec(
                *self.launcher,
                sys.executable,
                self.script,
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=self.env,
            )
            self.procs.append(proc)
        for proc in self.procs:
            assert proc.stdout is not None  # noqa: S101 - started with stdout=PIPE
            # A profiler's launcher slows the start-up tenfold or more.
            line = await asyncio.wait_for(proc.stdout.readline(), 600 if self.launcher else 60)
            if line.strip() != b"ready":
                raise WorkerStartFailed(f"a worker process did not start (said {line!r})")

    def cpu_seconds(self) -> float:
        """User plus system CPU time of every worker process so far (Linux ``/proc``)."""
        return sum(process_cpu(proc.pid) for proc in self.procs)

    async def stop(self) -> None:
        """Close every worker's stdin and wait for it to exit."""
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        self.procs.clear()


async def serve_until_stdin_closes(oban: Oban) -> None:
    """Worker side: start ``oban``, print ``ready``, stop it once the parent closes stdin."""
    try:
        await oban.start()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)
    finally:
        await oban.stop()
