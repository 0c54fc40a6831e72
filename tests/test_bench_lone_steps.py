"""``bench/lone_steps.py``: the report of the lone steps' A/B (medians per side, ours/today
of each figure)."""

from __future__ import annotations

import pytest

from bench.lone_steps import LoneRound, report


def test_the_report_prints_each_sides_medians_and_ours_over_today(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = {
        "ours": [LoneRound(1000, 800, 300), LoneRound(1200, 900, 500), LoneRound(9000, 1, 1)],
        "today": [LoneRound(2000, 1000, 600), LoneRound(1800, 1000, 400), LoneRound(2200, 2, 2)],
    }
    report(found, 500)
    lines = capsys.readouterr().out.splitlines()
    assert "3. lone steps: ours against today (500 steps a round, 3 rounds each)" in lines
    assert lines[-3].split() == ["ours", "1200", "800", "300"]
    assert lines[-2].split() == ["today", "2000", "1000", "400"]
    assert lines[-1] == (
        "  ours/today: wall 0.600, CPU 0.800, PostgreSQL 0.750 (below 1: ours cheaper)"
    )


def test_a_figure_today_measured_as_zero_has_no_ratio(capsys: pytest.CaptureFixture[str]) -> None:
    found = {"ours": [LoneRound(1000, 800, 0)], "today": [LoneRound(2000, 1000, 0)]}
    report(found, 1)
    assert capsys.readouterr().out.splitlines()[-1] == (
        "  ours/today: wall 0.500, CPU 0.800, PostgreSQL n/a (below 1: ours cheaper)"
    )
