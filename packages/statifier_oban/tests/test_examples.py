"""The runnable examples under ``examples/``: each tells its story, checks it, and exits 0.

Each example's ``main(["--database-url", url])`` runs in this process against a fresh
database from the fixtures (the examples install the schema themselves, idempotently), and
the key lines of its story are checked. One run per example goes through a subprocess, as
``uv run python examples/<name>.py`` would; ``overdue_notice``'s lets the example start its
own embedded PostgreSQL server. A broken outcome must make an example exit 1. The first-steps
examples the README and the getting-started page quote (``durable_timer``,
``durable_execution``) print their outcome instead; their output is checked line by line.
"""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from statifier_oban.executions import use

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def example(name: str) -> ModuleType:
    """The example module ``name``, by the name it has when run as a script.

    ``examples`` is on pytest's ``pythonpath`` (a script's own directory comes first on its
    ``sys.path``), so the examples import each other here as they do when run.
    """
    return importlib.import_module(name)


def run_main(name: str, database_url: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``main`` of example ``name`` on ``database_url``; assert exit 0; its output."""
    code = example(name).main(["--database-url", database_url])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "verified: every check held" in out
    assert "FAIL" not in out
    return out


def test_capture_settles_one_card_and_parks_the_revoked_one(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_main("capture", database_url, capsys)
    assert "job 1 TimerWorker send_id=hold queue=timers state=scheduled" in out
    assert "[telemetry] timer.cancelled send_id='hold' count=1" in out
    assert "session card-1 is done in ('settled',)" in out
    assert "capture_id = 'cap_0001'" in out
    assert "InvokeWorker invoke_id=capture queue=invokes state=completed attempt=1/20" in out
    assert "session card-2 is running in ('needs_attention',)" in out
    assert (
        "error.communication.invoke.capture data = {'reason': 'run_failed', 'attempts': 1, "
        "'detail': \"'authorization_revoked'\"}"
    ) in out
    assert "InvokeWorker invoke_id=capture queue=invokes state=discarded attempt=1/1" in out


def test_report_deadline_shows_an_answer_in_time_and_one_too_late(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_main("report_deadline", database_url, capsys)
    in_time, too_slow = out.split("2. report-2026-11")
    assert "[telemetry] invoke.deferred invoke_id='report'" in in_time
    assert "session is done in ('reported',), report = {'report_id': 'rpt-2026-10'}" in in_time
    assert "TimerWorker send_id=report_deadline queue=timers state=cancelled" in in_time
    assert "[telemetry] timer.fired send_id='report_deadline'" in too_slow
    assert "delivery said Delivered()" in too_slow
    assert (
        "session is running in ('report_run', 'needs_attention'), report = None, "
        "answers heard late = 0"
    ) in too_slow
    assert "TimerWorker send_id=report_deadline queue=timers state=completed" in too_slow


def test_overdue_notice_is_attempted_exactly_once(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_main("overdue_notice", database_url, capsys)
    capped, uncapped = out.split("2. for contrast")
    assert "[telemetry] invoke.failed invoke_id='notice' attempts=1 reason='run_failed'" in capped
    assert "'reason': 'run_failed', 'attempts': 1" in capped
    assert "InvokeWorker invoke_id=notice queue=invokes state=discarded attempt=1/1" in capped
    assert "state=retryable attempt=1/20" in uncapped
    assert "[telemetry] invoke.cancelled invoke_id='notice' count=1" in uncapped


def test_fan_out_prices_every_order_once_with_a_worker_killed_mid_way(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Multi-process: the example runs two `statifier-oban worker` processes, SIGKILLs one
    # when a third of the orders are priced, and starts another.
    out = run_main("fan_out", database_url, capsys)
    assert "of 100 orders priced: SIGKILL worker" in out
    assert "batch-1 is completed in ('priced',), 100 totals" in out
    assert "orders priced twice: 0" in out
    assert "ok       with the full list of 100 totals, in the orders' order" in out
    assert "ok       the invocation was answered once" in out


def test_an_example_whose_outcome_does_not_hold_exits_1(
    database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    capture = example("capture")
    harness = example("_harness")

    async def impatient(session: Any, state_id: str, timeout: float = 5.0) -> bool:
        return bool(await harness.wait_for_state(session, state_id, 0.5))

    # The processor turns every capture down, so card-1 never settles.
    monkeypatch.setattr(capture.PAYMENTS, "capture", lambda key, authorization_id: None)
    monkeypatch.setattr(capture, "wait_for_state", impatient)

    code = capture.main(["--database-url", database_url])

    out = capsys.readouterr().out
    assert code == 1, out
    assert "FAIL     card-1 settled (final state, session done)" in out
    assert "FAILED:" in out


# overdue_notice runs as a script below, starting its own server (one run for both).
@pytest.mark.parametrize("name", ["capture", "report_deadline"])
def test_an_example_runs_as_a_script(name: str, database_url: str) -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--database-url", database_url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verified: every check held" in done.stdout
    # The handlers are named on the job rows by an importable path, not __main__.
    assert "__main__" not in done.stdout + done.stderr


def test_an_example_starts_its_own_embedded_server_without_a_database_url() -> None:
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, str(EXAMPLES / "overdue_notice.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on an embedded PostgreSQL" in done.stdout
    assert "verified: every check held" in done.stdout
    # As in the scripts run above: handlers named on job rows by an importable path.
    assert "__main__" not in done.stdout + done.stderr


def test_durable_timer_fires_into_the_resumed_session(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(example("durable_timer").main(database_url))
    assert capsys.readouterr().out.splitlines() == ["{'card_1': 1}", "('expired',)"]


def test_durable_execution_applies_a_request_once_and_fires_the_hold(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        asyncio.run(example("durable_execution").main(database_url))
    finally:
        use(None)  # the example installs its Executions for this process's deliveries
    assert capsys.readouterr().out.splitlines() == [
        "Stepped AlreadyApplied",
        "card_a active",
        "card_b completed",
    ]


def test_child_charts_pay_one_order_and_cancel_the_payment_of_the_other(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        asyncio.run(example("child_charts").main(database_url))
    finally:
        use(None)  # the example installs its Executions for this process's deliveries
    assert capsys.readouterr().out.splitlines() == [
        "order_1 charged 40",
        "payment active",
        "payment cancelled",
    ]


@pytest.mark.parametrize("name", ["durable_timer", "durable_execution"])
def test_a_first_steps_example_runs_as_the_docs_say(name: str) -> None:
    # README and docs/getting-started.md: `uv run python examples/<name>.py`, which starts
    # an embedded PostgreSQL of its own.
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] in ("('expired',)", "card_b completed")


def test_traced_execution_prints_one_trace_from_the_request_to_the_hold(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        asyncio.run(example("traced_execution").main(database_url))
    finally:
        use(None)  # the example installs its Executions for this process's deliveries
    assert capsys.readouterr().out.splitlines() == [
        "POST /cards (CLIENT) [shop]",
        "  Create:card_authorization (CLIENT) [shop] statifier.execution.status=active",
        "    ScheduleTimer:authorization.expired (PRODUCER) [shop]",
        "      FireTimer:authorization.expired (CONSUMER) [shop]",
        "        Fire:card_authorization (CLIENT) [shop] statifier.execution.status=completed",
        "          CancelTimer:hold (INTERNAL) [shop]",
    ]
