"""The demo's checks on made-up outcomes, its chart variant and how it starts workers.

Runs without a database. The end-to-end runs through ``statifier-oban demo`` are the
``statifier_oban`` CLI's tests (``test_cli_demo.py`` there), beside the database fixture.
"""

from __future__ import annotations

import io
import subprocess
import time
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
import statifier
from statifier.core import effects as fx
from statifier_demo import _run as demo
from statifier_demo import _workers
from statifier_demo._chart import default_chart_path, load_machine, scalable_source, seed
from statifier_demo._store import Delivery, Stored, TimerRow
from statifier_demo._timeline import Timeline
from statifier_persistence import Execution

HOLD = "3s"
T = datetime(2026, 1, 1, 12, 0, 0)
CARDS = demo.Cards("a", "b", "c", "d")
PIDS = {1: "w1", 2: "w2", 3: "w3", 4: "w4", 5: "w5"}


class FakeWorker:
    """What ``verify`` reads of a worker: its exit code."""

    def __init__(self, code: int) -> None:
        self.code = code


def _job(job_id: int, scope: str, state: str, due: float, rescued: int = 0) -> TimerRow:
    return TimerRow(
        id=job_id,
        scope=scope,
        queue="timers",
        state=state,
        attempt=1 + rescued,
        rescued=rescued,
        attempted_by=(),
        scheduled_at=T + timedelta(seconds=due),
        completed_at=None,
        cancelled_at=None,
    )


def _delivery(job_id: int, scope: str, outcome: str, pid: int) -> Delivery:
    return Delivery(job_id, scope, outcome, pid, T)


def _execution(scope: str, final: str, steps: int) -> Execution:
    return Execution(
        id=scope,
        chart_identity="sha256:x",
        chart_name="card_authorization",
        chart_version=None,
        status="completed",
        metadata={},
        parent=None,
        failure=None,
        outcome={"configuration": [final], "donedata": None},
        step_count=steps,
        created_at=T.replace(tzinfo=UTC),
        updated_at=T.replace(tzinfo=UTC),
    )


def _outcome(**changes: Any) -> demo.Outcome:
    """The expected outcome, with ``changes`` (``jobs``, ``deliveries``, ``keys``...)."""
    stored = Stored(
        jobs=changes.get(
            "jobs",
            (
                _job(1, "a", "cancelled", 3),
                _job(2, "d", "completed", 1, rescued=1),
                _job(3, "b", "completed", 8),
                _job(4, "c", "completed", 11),
            ),
        ),
        deliveries=changes.get(
            "deliveries",
            (
                _delivery(2, "d", "applied", 2),
                _delivery(2, "d", "already applied", 3),
                _delivery(3, "b", "applied", 4),
                _delivery(4, "c", "applied", 5),
            ),
        ),
        keys=changes.get("keys", (("d", "job:2"), ("b", "job:3"), ("c", "job:4"))),
    )
    executions = {
        "a": _execution("a", "settled", 3),
        "b": _execution("b", "expired", 2),
        "c": _execution("c", "expired", 2),
        "d": _execution("d", "expired", 2),
        **changes.get("executions", {}),
    }
    workers = {"w1": 0, "w2": -9, "w3": 0, "w4": 0, "w5": 0, **changes.get("exits", {})}
    return demo.Outcome(
        stored=stored,
        executions=executions,
        workers={label: FakeWorker(code) for label, code in workers.items()},  # type: ignore[misc]
        deploy_stopped=T + timedelta(seconds=6),
        deploy_up=T + timedelta(seconds=changes.get("up", 9)),
        pids=PIDS,
    )


def _failed(outcome: demo.Outcome | None, elapsed: float = 20.0) -> list[str]:
    return [c.claim for c in demo.verify(outcome, CARDS, HOLD, elapsed) if not c.ok]


def test_the_checks_pass_on_the_expected_outcome() -> None:
    assert _failed(_outcome()) == []


@pytest.mark.parametrize(
    ("changes", "claims"),
    [
        # D's second delivery applied the step again: twice applied, two keys.
        (
            {
                "deliveries": (
                    _delivery(2, "d", "applied", 2),
                    _delivery(2, "d", "applied", 3),
                    _delivery(3, "b", "applied", 4),
                    _delivery(4, "c", "applied", 5),
                ),
                "keys": (("d", "job:2"), ("d", "job:2b"), ("b", "job:3"), ("c", "job:4")),
            },
            ["card D's hold job", "three holds applied"],
        ),
        # Nobody killed w2 mid-flight: D was delivered once.
        (
            {
                "deliveries": (
                    _delivery(2, "d", "applied", 2),
                    _delivery(3, "b", "applied", 4),
                    _delivery(4, "c", "applied", 5),
                ),
                "exits": {"w2": 0},
            },
            ["card D's hold job", "w2 was killed"],
        ),
        # B's hold fired before the deploy, on an old worker.
        (
            {
                "jobs": (
                    _job(1, "a", "cancelled", 3),
                    _job(2, "d", "completed", 1, rescued=1),
                    _job(3, "b", "completed", 5),
                    _job(4, "c", "completed", 11),
                ),
                "deliveries": (
                    _delivery(2, "d", "applied", 2),
                    _delivery(2, "d", "already applied", 3),
                    _delivery(3, "b", "applied", 1),
                    _delivery(4, "c", "applied", 5),
                ),
            },
            ["card B's hold survived", "card B's hold fell due"],
        ),
        # A was never captured: it expired.
        (
            {
                "jobs": (
                    _job(1, "a", "completed", 3),
                    _job(2, "d", "completed", 1, rescued=1),
                    _job(3, "b", "completed", 8),
                    _job(4, "c", "completed", 11),
                ),
                "executions": {"a": _execution("a", "expired", 2)},
            },
            ["card A (a) ended settled", "card A's hold job"],
        ),
    ],
)
def test_the_checks_catch_what_went_otherwise(changes: dict[str, Any], claims: list[str]) -> None:
    failed = _failed(_outcome(**changes))
    assert len(failed) == len(claims), failed
    for claim, found in zip(claims, failed, strict=True):
        assert claim in found


def test_a_slow_or_unfinished_run_fails() -> None:
    assert _failed(_outcome(), elapsed=200.0) == ["the whole run took 200.0 s (under 75 s)"]
    assert _failed(None) == ["the story ran to its end"]


# -- the chart variant -----------------------------------------------------------------------


def test_the_scalable_chart_still_holds_seven_days_by_default() -> None:
    machine = load_machine()
    _, effects = statifier.initialize(machine, session_id="s")
    sends = [e for e in effects if isinstance(e, fx.SendDelayed)]
    assert [(s.send_id, s.delay_ms) for s in sends] == [("hold", 7 * 86_400_000)]

    _, effects = statifier.initialize(machine, session_id="s", datamodel=seed("250ms"))
    sends = [e for e in effects if isinstance(e, fx.SendDelayed)]
    assert [(s.send_id, s.delay_ms) for s in sends] == [("hold", 250)]


def test_the_chart_rewrite_refuses_a_chart_it_does_not_recognise() -> None:
    source = default_chart_path().read_text(encoding="utf-8")
    twice = source.replace("</datamodel>", "</datamodel>\n<datamodel></datamodel>")
    with pytest.raises(ValueError, match="one <datamodel>"):
        scalable_source(twice)
    with pytest.raises(ValueError, match='one <send id="hold">'):
        scalable_source(source.replace('id="hold"', 'id="other"'))


# -- the workers -----------------------------------------------------------------------------


class RecordingPopen:
    """Stands in for ``subprocess.Popen``: records the call, prints one log line."""

    calls: ClassVar[list[tuple[list[str], dict[str, str]]]] = []

    def __init__(self, argv: list[str], *, env: dict[str, str], **_: Any) -> None:
        RecordingPopen.calls.append((argv, env))
        self.pid = 4242
        self.stdout = io.StringIO(
            "statifier-oban worker: running queues timers=5 on host=x, schema 'public'\n"
            "2026-01-01 [INFO] statifier_demo.delivery: job 7 (attempt 2) into card_d: "
            "already applied, nothing driven\n"
        )

    def poll(self) -> int | None:
        return 0


def test_workers_are_plain_cli_workers_given_the_database_through_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(subprocess, "Popen", RecordingPopen)  # what _workers calls
    timeline = Timeline(0.0, io.StringIO())
    workers = _workers.Workers("postgresql://demo:secret@db/x", timeline, "_run1")
    worker = workers.start("w2", "timers=5", "midflight=1")
    workers.wait_up(worker, timeout=5)
    argv, env = RecordingPopen.calls[-1]
    assert argv[1:5] == ["-m", "statifier_oban.cli", "worker", "--node"]
    assert "--queue" in argv
    assert "midflight=1" in argv
    assert "--rescue-after" in argv
    assert not any("secret" in part for part in argv)
    assert env["DATABASE_URL"] == "postgresql://demo:secret@db/x"
    deadline = time.monotonic() + 5
    while not timeline.of("delivered", "w2") and time.monotonic() < deadline:
        time.sleep(0.01)  # the reader thread shows the second line after the first
    delivered = timeline.of("delivered", "w2")
    assert [(e.data["job"], e.data["execution"]) for e in delivered] == [(7, "card_d")]
