"""Run IRP cases on the statifier engine (virtual clock) and describe the outcome.

A case passes when every start document, transformed by :func:`tools.w3c.transform.transform`,
compiles and runs to completion with ``"pass"`` in the final configuration.

``statifier`` is imported lazily (inside :func:`run_start`), so this module, and everything
that imports it, loads while the engine is still incomplete.

:func:`run_case_guarded` adds a wall-clock guard so that a hang in the engine cannot hang
the caller: the case runs in a forked child process that is killed on timeout (where
``fork`` is unavailable, in a daemon thread that is abandoned on timeout). With
``warm=True`` that child is forked from a small case server that loaded the engine once
(:mod:`tools.w3c._server`) rather than from the caller.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import multiprocessing
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tools.w3c.corpus import corpus_dir
from tools.w3c.manifest import Case
from tools.w3c.resolver import make_resolver
from tools.w3c.transform import DATAMODEL, transform_file

__all__ = [
    "DEFAULT_TIMEOUT",
    "CaseResult",
    "StartResult",
    "run_case",
    "run_case_guarded",
    "run_start",
]

#: Wall-clock seconds allowed per case by :func:`run_case_guarded`.
DEFAULT_TIMEOUT = 10.0
_LOG_LIMIT = 4000


@dataclass(frozen=True, slots=True)
class StartResult:
    """Outcome of one start document."""

    start: str
    passed: bool
    done: bool | None = None
    configuration: tuple[str, ...] = ()
    error: str | None = None
    traceback: str | None = None
    log: str | None = None

    def reason(self) -> str:
        """One line: why this start failed (or ``"pass"``)."""
        if self.passed:
            return "pass"
        if self.error is not None:
            return self.error
        return f"done={self.done} configuration={list(self.configuration)}"

    def describe(self) -> str:
        """A multi-line description for an assertion message."""
        lines = [f"{self.start}: {'PASS' if self.passed else 'FAIL'}"]
        if self.error is not None:
            lines.append(f"  error: {self.error}")
        if self.traceback:
            lines.append("  " + self.traceback.rstrip().replace("\n", "\n  "))
        if self.done is not None:
            lines.append(f"  done: {self.done}")
            lines.append(f"  configuration: {list(self.configuration)}")
        if self.log:
            lines.append("  log:\n    " + self.log.rstrip().replace("\n", "\n    "))
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """Outcome of one case: all of its start documents."""

    case_id: str
    passed: bool
    starts: tuple[StartResult, ...] = ()
    error: str | None = None

    def reason(self) -> str:
        """One line: why the case failed (first failing start), or ``"pass"``."""
        if self.error is not None:
            return self.error
        for start in self.starts:
            if not start.passed:
                return f"{start.start}: {start.reason()}"
        return "pass"

    def describe(self) -> str:
        """A multi-line description of every start, for an assertion message."""
        lines = [f"W3C test {self.case_id}: {'PASS' if self.passed else 'FAIL'}"]
        if self.error is not None:
            lines.append(self.error)
        lines.extend(start.describe() for start in self.starts)
        return "\n".join(lines)


def _format_log(log: Any) -> str | None:
    if log is None:
        return None
    if isinstance(log, str):
        text = log
    else:
        try:
            text = "\n".join(repr(entry) for entry in log)
        except TypeError:
            text = repr(log)
    if len(text) > _LOG_LIMIT:
        text = text[:_LOG_LIMIT] + f"\n... ({len(text) - _LOG_LIMIT} more characters)"
    return text


def run_start(start: str, directory: Path | None = None, profile: str = DATAMODEL) -> StartResult:
    """Transform for ``profile``, compile and run one start document in this process."""
    base = directory or corpus_dir()
    resolver = make_resolver(base, profile)
    try:
        scxml = transform_file(base / start, profile)
        # Imported here, not at module level: the engine may still be incomplete.
        statifier = importlib.import_module("statifier")
        virtual = importlib.import_module("statifier.virtual")
        machine = statifier.compile(scxml, resolver=resolver)
        run = virtual.run_chart(machine, resolver=resolver)
    except Exception as exc:
        return StartResult(
            start=start,
            passed=False,
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
    done = bool(run.done)
    configuration = tuple(str(state) for state in run.configuration)
    return StartResult(
        start=start,
        passed=done and "pass" in configuration,
        done=done,
        configuration=configuration,
        log=_format_log(getattr(run, "log", None)),
    )


def run_case(case: Case, directory: Path | None = None, profile: str = DATAMODEL) -> CaseResult:
    """Run every start document of ``case``, rendered for ``profile``, in this process."""
    if not case.starts:
        return CaseResult(case.id, passed=False, error="the case has no start document")
    starts = tuple(run_start(start, directory, profile) for start in case.starts)
    return CaseResult(case.id, passed=all(s.passed for s in starts), starts=starts)


def _child(conn: Connection, case: Case, directory: Path | None, profile: str) -> None:
    try:
        result = run_case(case, directory, profile)
    except BaseException as exc:  # report anything, even SystemExit, to the parent
        result = CaseResult(case.id, passed=False, error=f"{type(exc).__name__}: {exc}")
    conn.send(result)
    conn.close()


def _timed_out(case: Case, timeout: float) -> CaseResult:
    return CaseResult(case.id, passed=False, error=f"timed out after {timeout:g} s (wall clock)")


@functools.cache
def _preload_engine() -> None:
    """Import the engine once in this process so that forked children inherit it."""
    with contextlib.suppress(Exception):
        importlib.import_module("statifier.virtual")


def _run_in_process(case: Case, timeout: float, directory: Path | None, profile: str) -> CaseResult:
    _preload_engine()
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, case, directory, profile), daemon=True)
    process.start()
    sender.close()
    try:
        if receiver.poll(timeout):
            try:
                result: CaseResult = receiver.recv()
            except EOFError:
                process.join(1.0)
                result = CaseResult(
                    case.id,
                    passed=False,
                    error=f"the runner process died (exit code {process.exitcode})",
                )
        else:
            result = _timed_out(case, timeout)
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(5.0)
        process.close()
    return result


def _run_in_thread(case: Case, timeout: float, directory: Path | None, profile: str) -> CaseResult:
    box: list[CaseResult] = []
    worker = threading.Thread(
        target=lambda: box.append(run_case(case, directory, profile)),
        name=f"w3c-{case.id}",
        daemon=True,
    )
    worker.start()
    worker.join(timeout)
    return box[0] if box else _timed_out(case, timeout)


def run_case_guarded(
    case: Case,
    timeout: float = DEFAULT_TIMEOUT,
    directory: Path | None = None,
    *,
    isolate: bool | None = None,
    profile: str = DATAMODEL,
    warm: bool = False,
) -> CaseResult:
    """Run ``case``, rendered for ``profile``, with a wall-clock guard of ``timeout`` seconds.

    ``isolate`` (default: whenever the ``fork`` start method exists) runs the case in a
    forked child process, killed on timeout; otherwise a daemon thread is used and simply
    abandoned on timeout. ``warm`` (with ``isolate``) forks that process from the case
    server of :mod:`tools.w3c._server`, started on first use, rather than from this
    process: much cheaper per case when this process is large (a whole test run) or has
    not loaded the datamodels, and the case sees nothing this process changed (a test
    double of the engine, say).
    """
    if isolate is None:
        isolate = "fork" in multiprocessing.get_all_start_methods()
    if warm and isolate:
        from tools.w3c import _server

        return _server.run(case, timeout, directory, profile)
    runner: Callable[[Case, float, Path | None, str], CaseResult]
    runner = _run_in_process if isolate else _run_in_thread
    return runner(case, timeout, directory, profile)
