"""``statifier check --explore N``: the exploration of ``statifier.testing.explore``, printed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from statifier.cli import main

REPO = Path(__file__).resolve().parents[3]
CAPTURE = REPO / "examples" / "capture.scxml"

NEVER = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"
    initial="counting">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="counting">
    <transition event="inc" cond="n &lt; 3"><assign location="n" expr="n + 1"/></transition>
    <transition event="inc" cond="n &gt; 5" target="overflow"/>
    <transition event="stop" target="done"/>
  </state>
  <final id="overflow"/>
  <final id="done"/>
</scxml>
"""
"""``overflow`` is a target, so no lint finds it unreachable; its guard never holds."""


def lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().out.splitlines() if ": info: " not in line]


def test_check_explores_and_reports_what_it_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "never.scxml"
    chart.write_text(NEVER)
    assert main(["check", "--explore", "100", str(chart)]) == 0
    assert lines(capsys) == [
        f"{chart}: explored 8 positions (all reachable ones); events sent: inc, stop",
        "  never reached: overflow",
        "  final states never reached: overflow",
        "  no action raised an error",
        f"{chart}: ok (3 states, 4 transitions, 2 notes, 1 exploration finding)",
    ]


def test_findings_fail_a_strict_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--explore", "100", "--strict", str(CAPTURE)]) == 1
    out = lines(capsys)
    assert out[-3:] == [
        "  error.execution at line 32: answer capture in (capturing): "
        "\"_event.data['capture_id']\": 'NoneType' object is not subscriptable",
        "    path: send capture.requested -> answer capture",
        f"{CAPTURE}: failed (5 states, 5 transitions, 1 note, 1 exploration finding; --strict)",
    ]
    assert main(["check", "--strict", str(CAPTURE)]) == 0  # without --explore: no findings


def test_the_bound_says_when_the_search_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--explore", "1", str(CAPTURE)]) == 0
    assert lines(capsys)[0] == (
        f"{CAPTURE}: explored 1 position (stopped at the bound: more positions are "
        "reachable); events sent: authorization.expired, capture.requested"
    )


def test_the_json_record_of_an_exploration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--explore", "100", "--json", str(CAPTURE)]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (exploration,) = [r for r in records if r["record"] == "exploration"]
    assert exploration == {
        "record": "exploration",
        "file": str(CAPTURE),
        "positions": 4,
        "complete": True,
        "events": ["authorization.expired", "capture.requested"],
        "unreached": [],
        "finals_unreached": [],
        "errors": [
            {
                "states": ["capturing"],
                "action": "answer capture",
                "error": "error.execution",
                "line": 32,
                "message": "\"_event.data['capture_id']\": 'NoneType' object is not subscriptable",
                "path": ["send capture.requested", "answer capture"],
            }
        ],
    }
    assert records[-1]["findings"] == 1


@pytest.mark.parametrize("bound", ["0", "1000001", "many"])
def test_the_bound_is_a_number_in_range(bound: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--explore", bound, str(CAPTURE)]) == 2
    assert "--explore" in capsys.readouterr().err
