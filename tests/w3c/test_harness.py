"""Tests of the conformance runner against a fake engine (the real one may be incomplete)."""

from __future__ import annotations

import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools.w3c import _server
from tools.w3c.corpus import require_corpus
from tools.w3c.harness import run_case, run_case_guarded
from tools.w3c.manifest import cases_by_id

require_corpus()

#: Set to let a "hanging" fake run finish (so no stray thread outlives its test).
RELEASE = threading.Event()


TASKS = Path("/proc/self/task")
"""The process's threads as the kernel counts them (Linux), which is what fork checks."""


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    """Join the threads a test started (a case run with ``isolate=False`` is one; a hung
    one ends once ``RELEASE`` is set): a test that forks next must find this process
    single-threaded, or fork warns that the child may deadlock. A joined thread may still
    be leaving the kernel's count for a moment, so that count is awaited too."""
    before = set(threading.enumerate())
    counted = len(list(TASKS.iterdir())) if TASKS.is_dir() else 0
    yield
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=10)
        assert not thread.is_alive(), f"{thread.name} outlived its test"
    deadline = time.monotonic() + 10
    while counted and len(list(TASKS.iterdir())) > counted:
        assert time.monotonic() < deadline, "a thread outlived its test in the kernel's count"
        time.sleep(0.001)


@dataclass
class FakeRun:
    """What ``run_chart`` returns."""

    done: bool
    configuration: tuple[str, ...]
    log: list[tuple[str, str]] = field(default_factory=list)


def install_fake_engine(monkeypatch: pytest.MonkeyPatch, behaviour: str) -> list[str]:
    """Install fake ``statifier`` / ``statifier.virtual`` modules; return the compiled texts."""
    compiled: list[str] = []

    class ChartError(Exception):
        pass

    def compile_chart(text: str, *, resolver: object) -> str:
        compiled.append(text)
        if behaviour == "invalid":
            raise ChartError("bad chart")
        assert callable(resolver)
        return text

    def run_chart(machine: str, *, resolver: object) -> FakeRun:
        if behaviour == "hang":
            RELEASE.wait(60)
        if behaviour == "fail":
            return FakeRun(True, ("fail",), [("Outcome", "fail")])
        return FakeRun(True, ("pass",), [("Outcome", "pass")])

    engine = types.ModuleType("statifier")
    engine.compile = compile_chart  # type: ignore[attr-defined]
    engine.ChartError = ChartError  # type: ignore[attr-defined]
    virtual = types.ModuleType("statifier.virtual")
    virtual.run_chart = run_chart  # type: ignore[attr-defined]
    engine.virtual = virtual  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "statifier", engine)
    monkeypatch.setitem(sys.modules, "statifier.virtual", virtual)
    return compiled


def test_every_start_is_run(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = install_fake_engine(monkeypatch, "pass")
    result = run_case(cases_by_id()["403"])
    assert result.passed
    assert [s.start for s in result.starts] == ["test403a.txml", "test403b.txml", "test403c.txml"]
    assert len(compiled) == 3
    assert all('datamodel="python"' in text and "conf:" not in text for text in compiled)


def test_failure_reports_configuration_and_log(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_engine(monkeypatch, "fail")
    result = run_case(cases_by_id()["144"])
    assert not result.passed
    assert "configuration=['fail']" in result.reason()
    assert "('Outcome', 'fail')" in result.describe()


def test_chart_error_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_engine(monkeypatch, "invalid")
    result = run_case(cases_by_id()["144"])
    assert not result.passed
    assert result.reason() == "test144.txml: ChartError: bad chart"


@pytest.mark.parametrize("isolate", [True, False])
def test_guard_passes_results_through(monkeypatch: pytest.MonkeyPatch, isolate: bool) -> None:
    install_fake_engine(monkeypatch, "fail")
    result = run_case_guarded(cases_by_id()["144"], timeout=10, isolate=isolate)
    assert not result.passed
    assert result.starts[0].configuration == ("fail",)


@pytest.mark.parametrize("isolate", [True, False])
def test_guard_times_out(monkeypatch: pytest.MonkeyPatch, isolate: bool) -> None:
    install_fake_engine(monkeypatch, "hang")
    RELEASE.clear()
    started = time.monotonic()
    try:
        result = run_case_guarded(cases_by_id()["144"], timeout=0.5, isolate=isolate)
    finally:
        RELEASE.set()
    assert time.monotonic() - started < 5
    assert not result.passed
    assert "timed out" in result.reason()


def test_a_warm_guard_runs_the_case_in_the_case_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # The case server forked the case's process, not this one: the fake engine installed
    # here (every case fails) is not the one that ran it.
    install_fake_engine(monkeypatch, "fail")
    result = run_case_guarded(cases_by_id()["144"], timeout=10, warm=True)
    assert result.passed, result.describe()
    assert result.starts[0].configuration == ("pass",)


def test_a_case_server_that_does_not_answer_is_stopped_and_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = cases_by_id()["144"]
    assert run_case_guarded(case, timeout=10, warm=True).passed
    first = _server._server
    assert first is not None
    monkeypatch.setattr(_server, "MARGIN_S", 0.0)
    result = run_case_guarded(case, timeout=0.0, warm=True)  # no server answers in 0 s
    assert not result.passed
    assert "the case server did not answer within 0 s" in result.reason()
    assert _server._server is None
    assert first.process.poll() is not None  # stopped, its process group with it
    monkeypatch.undo()
    assert run_case_guarded(case, timeout=10, warm=True).passed  # a new server
    assert _server._server is not None
    assert _server._server is not first


def test_report_updates_the_ratchet(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.w3c import report

    install_fake_engine(monkeypatch, "pass")
    passing = tmp_path / "passing.txt"
    passing.write_text("# header\n403\n")
    assert report.main(["144", "403", "--update", "--passing", str(passing)]) == 0
    assert passing.read_text() == "# header\n144\n403\n"
    out = capsys.readouterr().out
    assert " 144 mandatory PASS" in out
    assert "mandatory: 2/2 passed" in out


def test_report_flags_regressions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.w3c import report

    install_fake_engine(monkeypatch, "fail")
    passing = tmp_path / "passing.txt"
    passing.write_text("144\n")
    assert report.main(["144", "147", "--update", "--passing", str(passing)]) == 1
    assert passing.read_text() == "144\n"
    out = capsys.readouterr().out
    assert "REGRESSIONS" in out
    assert "144 mandatory FAIL [in passing.txt]" in out
