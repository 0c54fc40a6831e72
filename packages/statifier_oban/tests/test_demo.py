"""``statifier-oban demo`` end to end (its two phase processes included), and its checks.

The end-to-end runs use a fresh database of the test server (``--database-url``) and a
1 s hold; each takes a few seconds, most of it starting the two phase interpreters.
"""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import statifier
from statifier.core import effects as fx
from statifier_oban import cli, demo
from statifier_oban._names import TIMER_WORKER
from statifier_oban.demo_chart import default_chart_path, load_machine, scalable_source, seed
from statifier_oban.demo_store import StoredPosition, TimerRow
from statifier_oban.demo_timeline import Entry

HOLD = "1s"


def rows(url: str, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
    """Every row of ``query`` on ``url``."""
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def card_ids(out: str) -> tuple[str, str]:
    """The two session ids the demo announced (they carry a run id with --database-url)."""
    found = re.findall(r"card [AB] \((sess_card_[ab]_[0-9a-f]{8})\)", out)
    assert len(found) >= 2, out
    return found[0], found[1]


def test_the_demo_runs_end_to_end(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["demo", "--database-url", database_url, "--hold", HOLD])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    card_a, card_b = card_ids(out)
    # The timeline tells the story: armed, cancelled, deploy, resumed, fired.
    assert re.search(rf"p1:\d+\s+armed\s+{card_a}  <send id=\"hold\"> -> job \d+", out), out
    assert re.search(rf"p1:\d+\s+armed\s+{card_b}  <send id=\"hold\"> -> job \d+", out), out
    assert re.search(rf"p1:\d+\s+cancelled\s+{card_a}  .*: 1 pending job\(s\) cancelled", out)
    assert re.search(rf"p1:\d+\s+row\s+{card_a}  job \d+ is cancelled", out), out
    assert re.search(r"p1:\d+\s+deploy\s+deploy: oban stopped", out), out
    assert re.search(rf"p2:\d+\s+resumed\s+{card_b}  resumed from the stored position", out)
    assert re.search(rf"p2:\d+\s+fired\s+{card_b}  job \d+ \(attempt 1\) fired", out), out
    assert re.search(rf"p2:\d+\s+halted\s+{card_b}  session halted: done in expired", out)
    assert not re.search(r"\s+discarded\s+sess_", out), out
    assert "FAIL" not in out and "demo passed: all 10 checks hold" in out
    assert err == ""

    # Three processes: this one and two phase processes, one after the other.
    pids = [int(p) for p in re.findall(r"process \d started \(pid (\d+)\)", out)]
    assert len(set(pids)) == 2 and os.getpid() not in pids
    assert re.search(rf"p1:{pids[0]}\s", out) and re.search(rf"p2:{pids[1]}\s", out)

    # The database agrees, read independently of the demo's own checks.
    jobs = rows(
        database_url,
        "SELECT args->>'scope', state::text, attempt, attempted_by[1] FROM oban_jobs "
        "WHERE worker = %s ORDER BY id",
        [TIMER_WORKER],
    )
    assert jobs == [
        (card_a, "cancelled", 0, None),
        (card_b, "completed", 1, f"demo-phase2.{pids[1]}"),
    ]
    stored = dict(
        rows(
            database_url,
            "SELECT session_id, status || ':' || array_to_string(configuration, ',') "
            "FROM demo_positions",
        )
    )
    assert stored == {card_a: "done:settled", card_b: "done:expired"}


def test_the_checks_fail_when_phase_2_has_no_position_to_resume(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["demo", "--database-url", database_url, "--hold", HOLD, "--fault", "unknown-session"]
    code = cli.main(args)

    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert re.search(r"p2:\d+\s+error\s+sess_card_b_\w+_unknown has no stored position", out)
    assert re.search(r"FAIL\s+process 2 resumed card B under the same session id", out), out
    assert re.search(r"FAIL\s+card B \(sess_card_b_\w+\) ended expired", out), out
    assert re.search(r"FAIL\s+process 2 \(pid \d+\) exited with status 0\s+\(found: status 1", out)
    assert re.search(r"ok\s+card A \(sess_card_a_\w+\) ended settled", out), out
    assert "demo FAILED: 5 of 10 checks failed" in out
    assert err.startswith("statifier-oban demo: error: ") and err.count("\n") == 1


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
    assert argv[1:3] == ["-m", "statifier_oban.demo"]


def test_a_missing_chart_is_one_line_and_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo", "--chart", str(tmp_path / "missing.scxml")]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("statifier-oban demo: error: ") and err.count("\n") == 1


def test_a_bad_hold_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["demo", "--hold", "soon"])
    assert exit_.value.code == 2
    assert "invalid duration" in capsys.readouterr().err
