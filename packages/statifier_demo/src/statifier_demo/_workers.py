"""The demo's worker processes: plain ``statifier-oban worker`` commands.

Each runs ``python -m statifier_oban.cli worker`` with its own node name, a 2 s rescue
bound and ``--module statifier_demo._delivery`` (job rows name ``DemoDelivery``, and a
worker resolves only what the modules it is given define: ADR 13), and gets the
database conninfo through ``$DATABASE_URL`` (never on the command
line, where ``ps`` would show a password). A reader thread shows the lines of its log
that tell the story on the timeline: when its queues run, each delivery into an
execution (``statifier_demo.delivery``), when it stops; anything logged at WARNING or
above is shown as it is.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from ._timeline import Timeline

RESCUE_AFTER_S = 2
"""The rescue bound of the workers: a job a dead worker left ``executing`` runs again once
that worker's heartbeat has been silent this many seconds (the default is 10)."""

DELIVERY_MODULE = "statifier_demo._delivery"
"""The module defining ``DemoDelivery``, given to every worker with ``--module``."""

STOP_TIMEOUT_S = 30.0
"""How long a worker may take to stop gracefully before it is killed."""

_DELIVERY = re.compile(r"\] statifier_demo\.delivery: (.*)$")
_LOUD = re.compile(r"\[(WARNING|ERROR|CRITICAL)\]")
_APPLIED = re.compile(r"job (\d+) \(attempt (\d+)\) into (\S+): (.*)$")


@dataclass
class Worker:
    """One worker process."""

    label: str
    node: str
    queues: tuple[str, ...]
    process: subprocess.Popen[str]
    up: threading.Event = field(default_factory=threading.Event)
    code: int | None = None
    killed: bool = False

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid


class Workers:
    """Starts, stops and kills the demo's workers; every one still running is killed at
    :meth:`close`."""

    def __init__(self, url: str, timeline: Timeline, run_id: str) -> None:
        self._url = url
        self._timeline = timeline
        self._run_id = run_id
        self.all: dict[str, Worker] = {}

    def start(self, label: str, *queues: str) -> Worker:
        """Start worker ``label`` running ``queues`` (``NAME=LIMIT``)."""
        node = f"demo-{label}{self._run_id}"
        argv = [sys.executable, "-m", "statifier_oban.cli", "worker", "--node", node]
        for queue in queues:
            argv += ["--queue", queue]
        argv += ["--module", DELIVERY_MODULE, "--rescue-after", str(RESCUE_AFTER_S)]
        argv += ["--log-level", "INFO"]
        env = {**os.environ, "DATABASE_URL": self._url, "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(  # noqa: S603 - this interpreter, our CLI, fixed options
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        worker = Worker(label, node, queues, process)
        self.all[label] = worker
        shown = " ".join(f"--queue {queue}" for queue in queues)
        self._timeline.note(
            "start", f"statifier-oban worker {shown} (pid {process.pid})", label, pid=process.pid
        )
        threading.Thread(target=self._read, args=(worker,), daemon=True).start()
        return worker

    def _read(self, worker: Worker) -> None:
        assert worker.process.stdout is not None  # noqa: S101 - started with stdout=PIPE
        for raw in worker.process.stdout:
            line = raw.rstrip("\n")
            if "running queues" in line:
                self._timeline.note("up", "its queues run", worker.label)
                worker.up.set()
            elif (found := _DELIVERY.search(line)) is not None:
                self._delivery(worker, found.group(1))
            elif "received, stopping" in line:
                self._timeline.note(
                    "stopping", "signal received, stopping gracefully", worker.label
                )
            elif _LOUD.search(line) or "error" in line.lower():
                self._timeline.note("log", line, worker.label)

    def _delivery(self, worker: Worker, message: str) -> None:
        found = _APPLIED.search(message)
        if found is None:
            self._timeline.note("log", message, worker.label)
            return
        job, attempt, execution, what = found.groups()
        kind = "stalls" if what.startswith("committed") else "delivered"
        self._timeline.note(
            kind,
            f"{execution}: job {job} (attempt {attempt}) {what}",
            worker.label,
            job=int(job),
            execution=execution,
        )

    def wait_up(self, *workers: Worker, timeout: float = 60.0) -> None:
        """Wait until each worker runs its queues; ``RuntimeError`` if one does not."""
        deadline = time.monotonic() + timeout
        for worker in workers:
            while not worker.up.wait(0.1):
                if worker.process.poll() is not None:
                    raise RuntimeError(f"worker {worker.label} exited before its queues ran")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"worker {worker.label} did not start in {timeout:.0f} s")

    def kill(self, worker: Worker) -> None:
        """SIGKILL: no graceful anything, as a lost machine or an OOM kill."""
        worker.killed = True
        os.kill(worker.pid, signal.SIGKILL)
        worker.code = worker.process.wait(timeout=STOP_TIMEOUT_S)
        self._timeline.note("killed", f"SIGKILL (pid {worker.pid})", worker.label)

    def stop(self, *workers: Worker) -> None:
        """SIGTERM every worker, then wait for each to exit (a graceful stop)."""
        for worker in workers:
            worker.process.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.code = worker.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.code = worker.process.wait(timeout=STOP_TIMEOUT_S)
            self._timeline.note("exited", f"exited with status {worker.code}", worker.label)

    def close(self) -> None:
        """Kill whatever still runs (an interrupted or failed demo)."""
        for worker in self.all.values():
            if worker.process.poll() is None:
                worker.process.kill()
                worker.code = worker.process.wait(timeout=STOP_TIMEOUT_S)
