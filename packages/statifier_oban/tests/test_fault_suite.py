"""The fault suite (``bench/faults.py``) runs, quickly, against the test server.

A smoke run of two of its scenarios (``sigterm``: real worker processes; ``pool``: live
sessions through an exhausted store pool) with ``--quick``, reading its ``--json`` output:
every goal it checks must be met. The full suite, with ``sigkill`` and a PostgreSQL
restart, is ``uv run python bench/faults.py`` (bench/README.md); the crash and stop
behaviours it measures have tests of their own (``test_worker_operations.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]


def test_the_quick_fault_suite_meets_its_goals(pg_server: Any, tmp_path: Path) -> None:
    out = tmp_path / "faults.json"
    script = str(ROOT / "bench" / "faults.py")
    options = ["--quick", "--only", "sigterm,pool", "--database-url", pg_server.url]
    result = subprocess.run(  # noqa: S603 - our interpreter and bench script, fixed arguments
        [sys.executable, script, *options, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = json.loads(out.read_text())
    outcomes = {o["scenario"]: o for o in figures["outcomes"]}
    assert set(outcomes) == {"sigterm", "pool"}
    for outcome in outcomes.values():
        assert outcome["error"] is None, outcome
        assert outcome["scheduled"] > 0
        assert outcome["row_lost"] == outcome["chart_lost"] == 0, outcome
        assert outcome["chart_duplicated"] == 0, outcome
        assert outcome["recovery_s"] is not None, outcome
        assert outcome["recovery_s"] < 30, outcome
    goals = dict(figures["verdicts"])
    assert set(goals.values()) == {"MET"}, goals
    assert "MET" in result.stdout
    assert "MISSED" not in result.stdout
