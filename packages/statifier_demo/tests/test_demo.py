"""The demo's checks on made-up outcomes, its chart variant and its phase command lines.

Runs without a database. The end-to-end runs through ``statifier-oban demo`` are the
``statifier_oban`` CLI's tests (``test_cli_demo.py`` there), beside the database fixture.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier_demo import _run as demo
from statifier_demo._chart import default_chart_path, load_machine, scalable_source, seed
from statifier_demo._store import StoredPosition, TimerRow
from statifier_demo._timeline import Entry

HOLD = "1s"


# -- the checks alone, on a made-up outcome --------------------------------------------------


def _entry(proc: str, kind: str, **data: Any) -> Entry:
    return Entry(t=0.0, proc=proc, pid=1, kind=kind, text=kind, data=data)


def _job(job_id: int, scope: str, state: str, attempt: int, node: str | None) -> TimerRow:
    now = datetime(2026, 1, 1)
    return TimerRow(
        id=job_id,
        scope=scope,
        send_id="hold",
        state=state,
        attempt=attempt,
        max_attempts=20,
        attempted_by=(node, "uuid") if node else (),
        inserted_at=now,
        scheduled_at=now,
        attempted_at=None,
        completed_at=None,
        cancelled_at=None,
        discarded_at=None,
        now=now,
        errors=(),
    )


def _position(machine: statifier.Machine, session_id: str, final: str) -> StoredPosition:
    state, _ = statifier.initialize(machine, session_id=session_id, datamodel=seed(HOLD))
    return StoredPosition(
        session_id=session_id,
        chart_identity=machine.identity,
        position=statifier.core.position.dumps(state),
        status="done",
        configuration=(final,),
        macrostep=2,
        updated_at=datetime(2026, 1, 1),
    )


def _verify(jobs_b: list[TimerRow], fired: list[Entry], elapsed: float = 5.0) -> list[demo.Check]:
    machine = load_machine()
    first = demo.Child(
        "p1", 10, code=0, entries=[_entry("p1", "deploy", state="scheduled", due_in=0.8)]
    )
    second = demo.Child(
        "p2",
        11,
        code=0,
        entries=[
            _entry("p2", "resumed", session_id="b"),
            _entry("p2", "oban", node="n2"),
            *fired,
        ],
    )
    outcome = demo.Outcome(
        positions={
            "a": _position(machine, "a", "settled"),
            "b": _position(machine, "b", "expired"),
        },
        jobs=[_job(1, "a", "cancelled", 0, None), *jobs_b],
    )
    return demo.verify([first, second], outcome, machine, "a", "b", HOLD, elapsed)


def _failed(checks: list[demo.Check]) -> list[str]:
    return [check.claim for check in checks if not check.ok]


def test_the_checks_pass_on_the_expected_outcome() -> None:
    fired = [_entry("p2", "fired", scope="b")]
    assert _failed(_verify([_job(2, "b", "completed", 1, "n2")], fired)) == []


@pytest.mark.parametrize(
    ("jobs_b", "fired", "elapsed", "claim"),
    [
        # B's timer fired in process 1 (the deploy came too late): wrong node.
        ([_job(2, "b", "completed", 1, "n1")], [_entry("p2", "fired", scope="b")], 5.0, "hold job"),
        # Fired on a retry: attempt 2.
        ([_job(2, "b", "completed", 2, "n2")], [_entry("p2", "fired", scope="b")], 5.0, "hold job"),
        # Two jobs for B: the dedup guard failed.
        (
            [_job(2, "b", "completed", 1, "n2"), _job(3, "b", "completed", 1, "n2")],
            [_entry("p2", "fired", scope="b")],
            5.0,
            "hold job",
        ),
        # Fired twice.
        (
            [_job(2, "b", "completed", 1, "n2")],
            [_entry("p2", "fired", scope="b"), _entry("p2", "fired", scope="b")],
            5.0,
            "one timer fired",
        ),
        # Too slow.
        ([_job(2, "b", "completed", 1, "n2")], [_entry("p2", "fired", scope="b")], 31.0, "took"),
    ],
)
def test_the_checks_catch_what_went_otherwise(
    jobs_b: list[TimerRow], fired: list[Entry], elapsed: float, claim: str
) -> None:
    failed = _failed(_verify(jobs_b, fired, elapsed))
    assert len(failed) == 1 and claim in failed[0], failed


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


def test_the_database_url_reaches_phase_processes_through_the_environment() -> None:
    options = demo.PhaseOptions(
        url="postgresql://demo:secret@db/x",
        t0=1.0,
        hold=HOLD,
        card_a="a",
        card_b="b",
        chart=Path("chart.scxml"),
    )
    argv = demo._phase_argv("first", options)
    assert not any("secret" in part for part in argv)
    assert argv[1:3] == ["-m", "statifier_demo"]
