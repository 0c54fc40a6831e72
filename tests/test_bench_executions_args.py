"""``bench/executions.py``'s options: counts of at least 1 (``bench/run_options.py``), and
the event loop its workers run on."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
import uvloop

from bench.run_options import positive, worker_loop

BENCH = Path(__file__).resolve().parents[1] / "bench"

COUNTS = ("--jobs", "--repeats", "--limit", "--today-limit", "--steps", "--slice")
"""The options of ``bench/executions.py`` that take a count."""

PARSE_EACH = """
import contextlib, io, sys
import executions
for option in sys.argv[1:]:
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.suppress(SystemExit):
        executions.parse_args([option, "0"])
    print(option, "|", err.getvalue().strip().splitlines()[-1:])
"""
"""Parses each option given with a count of 0 and prints its last line of error. Run in
``bench/``, as the command runs, where its siblings import by their own names."""


@pytest.mark.parametrize("text", ["0", "-3", "two", "1.5"])
def test_a_count_below_one_or_not_whole_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        positive(text)


def test_one_is_the_least_count() -> None:
    assert positive("1") == 1


def test_every_count_option_refuses_zero() -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed program, fixed options
        [sys.executable, "-c", PARSE_EACH, *COUNTS],
        cwd=BENCH,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    printed = done.stdout.splitlines()
    assert len(printed) == len(COUNTS), done.stdout + done.stderr
    for option, line in zip(COUNTS, printed, strict=True):
        assert line.startswith(f"{option} |"), line
        assert line.endswith("0 is less than 1']"), line


def test_the_workers_run_on_the_loop_the_worker_command_would_choose() -> None:
    assert worker_loop() is uvloop.new_event_loop
