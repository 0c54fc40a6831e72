"""``bench/executions.py``'s options: counts of at least 1, and the loop its workers run on."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType

import pytest
import uvloop


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/executions.py``, imported as its command imports it: its siblings on the path."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    return importlib.import_module("bench.executions")


@pytest.mark.parametrize("text", ["0", "-3", "two", "1.5"])
def test_a_count_below_one_or_not_whole_is_refused(bench: ModuleType, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        bench.positive(text)


def test_one_is_the_least_count(bench: ModuleType) -> None:
    assert bench.positive("1") == 1


@pytest.mark.parametrize("option", ["--steps", "--jobs", "--repeats", "--limit", "--slice"])
def test_the_options_refuse_a_zero_count(
    bench: ModuleType, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args([option, "0"])
    assert "0 is less than 1" in capsys.readouterr().err


def test_the_workers_run_on_the_loop_the_worker_command_would_choose(bench: ModuleType) -> None:
    assert bench.worker_loop() is uvloop.new_event_loop
