"""The case server behind ``run_case_guarded(..., warm=True)`` (:mod:`tools.w3c.harness`).

A process of its own (this interpreter running ``python -m tools.w3c._server``), started
on first use and kept while its user runs: it loads the engine and runs a chart in each
datamodel once, then runs every case it is sent as ``run_case_guarded`` does (in a process
forked from itself, killed on timeout) and sends the result back. Forking this small,
warm process costs a few milliseconds; forking a whole test run's process costs tens, and
a process that never ran a datamodel loads it again in every case's child (from source,
where bytecode is not written).

It stops when the pipe it reads requests from is closed (its user called :func:`stop`
or exited). Its user waits a case's timeout plus :data:`MARGIN_S` for the answer; a server
that does not answer in time, or dies, is stopped (its process group killed, the case's
process with it), the case fails saying so, and the next case starts a new server.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.w3c.harness import CaseResult
    from tools.w3c.manifest import Case

__all__ = ["MARGIN_S", "run", "stop"]

ROOT = Path(__file__).resolve().parents[2]
"""The folder holding ``tools``: put on the server's import path."""

MARGIN_S = 10.0
"""How much longer than a case's own timeout its user waits for the server's answer."""

CHART = (
    '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="{datamodel}" '
    'initial="a"><datamodel><data id="x" expr="1"/></datamodel><state id="a">'
    '<transition cond="x == 1" target="pass"/></state><final id="pass"/></scxml>'
)
"""A chart the server runs in each datamodel before any case, to load what they load."""


@dataclass
class _Server:
    process: subprocess.Popen[bytes]
    requests: Connection
    replies: Connection


_server: _Server | None = None
_lock = threading.Lock()


def run(case: Case, timeout: float, directory: Path | None, profile: str) -> CaseResult:
    """Run ``case`` in the server (started if need be); its result."""
    from tools.w3c.harness import CaseResult

    with _lock:
        server = _server or _start()
        try:
            server.requests.send((case, timeout, directory, profile))
            if server.replies.poll(timeout + MARGIN_S):
                result: CaseResult = server.replies.recv()
                return result
            error = f"the case server did not answer within {timeout + MARGIN_S:g} s"
        except (EOFError, OSError) as exc:
            error = f"the case server stopped ({type(exc).__name__}: {exc})"
        _stop()
        return CaseResult(case.id, passed=False, error=error)


def stop() -> None:
    """Stop the server, if one runs (a new one starts on the next :func:`run`)."""
    with _lock:
        _stop()


def _start() -> _Server:
    global _server
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    try:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, this module, two fds
            [sys.executable, "-m", "tools.w3c._server", str(requests_read), str(replies_write)],
            pass_fds=(requests_read, replies_write),
            env={**os.environ, "PYTHONPATH": path},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # its process group: the case's process goes with it
        )
    finally:
        os.close(requests_read)
        os.close(replies_write)
    _server = _Server(
        process,
        Connection(requests_write, readable=False),
        Connection(replies_read, writable=False),
    )
    return _server


def _stop() -> None:
    global _server
    server, _server = _server, None
    if server is None:
        return
    server.requests.close()  # the server reads the end of its requests and exits
    server.replies.close()
    try:
        server.process.wait(timeout=2)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()


atexit.register(stop)


def _warm() -> None:
    """Compile and run :data:`CHART` in each datamodel (what fails here, a case reports)."""
    with contextlib.suppress(Exception):
        statifier = importlib.import_module("statifier")
        virtual = importlib.import_module("statifier.virtual")
        for datamodel in ("python", "ecmascript"):
            with contextlib.suppress(Exception):
                virtual.run_chart(statifier.compile(CHART.format(datamodel=datamodel)))


def main(argv: list[str]) -> None:
    """Serve the requests read from fd ``argv[0]``, answering on fd ``argv[1]``."""
    from tools.w3c.harness import run_case_guarded

    requests = Connection(int(argv[0]), writable=False)
    replies = Connection(int(argv[1]), readable=False)
    _warm()
    while True:
        try:
            case, timeout, directory, profile = requests.recv()
        except EOFError:
            return
        result = run_case_guarded(case, timeout, directory, isolate=True, profile=profile)
        try:
            replies.send(result)
        except OSError:  # its user stopped waiting (and closed the pipe): nothing to say
            return


if __name__ == "__main__":
    main(sys.argv[1:])
