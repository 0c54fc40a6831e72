"""The ``statifier`` command line: ``check`` and ``run`` (on a virtual clock)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from statifier.cli import main

REPO = Path(__file__).resolve().parents[3]
CARD = REPO / "examples" / "card_authorization.scxml"
SEVEN_DAYS_MS = 7 * 24 * 3_600_000

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'
VALID = f"""<scxml {NS} initial="a">
  <state id="a">
    <transition event="go" target="b"/>
  </state>
  <final id="b"/>
</scxml>
"""
INVALID = f"""<scxml {NS} initial="a">
  <state id="a">
    <transition event="go" target="nowhere"/>
  </state>
  <state id="b" colour="red"/>
  <state id="c">
    <onentry><send event="tick" delay="soon"/></onentry>
  </state>
</scxml>
"""
DIAGNOSTIC = re.compile(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.+)$")


@pytest.fixture(autouse=True)
def no_real_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI runs on a virtual clock: any real sleep is a bug."""

    def forbidden(seconds: float) -> None:
        raise AssertionError(f"time.sleep({seconds}) called")

    monkeypatch.setattr(time, "sleep", forbidden)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- check ------------------------------------------------------------------------------


def test_check_valid_chart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = write(tmp_path, "valid.scxml", VALID)
    assert main(["check", str(chart)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"{chart}:3:5: info: nothing in the chart raises or sends 'go': it must come from "
        "outside [external-event]",
        f"{chart}: ok (2 states, 2 transitions, 1 note)",
    ]


def test_check_the_example_chart(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(CARD)]) == 0
    assert f"{CARD}: ok" in capsys.readouterr().out


def test_check_invalid_chart_prints_every_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = write(tmp_path, "invalid.scxml", INVALID)
    assert main(["check", str(chart)]) == 1
    out = capsys.readouterr().out
    assert ": ok (" not in out
    lines = out.splitlines()
    matches = [DIAGNOSTIC.match(line) for line in lines]
    assert all(matches), lines
    parsed = sorted((int(m["line"]), m["msg"].rsplit(" [", 1)[1].rstrip("]")) for m in matches if m)
    assert parsed == [(3, "unknown-target"), (5, "unknown-attribute"), (7, "invalid-delay")]
    assert all(m["file"] == str(chart) for m in matches if m)
    assert all(int(m["col"]) >= 1 for m in matches if m)


def test_check_several_charts_fails_if_any_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path, "good.scxml", VALID)
    bad = write(tmp_path, "bad.scxml", INVALID)
    assert main(["check", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{good}: ok" in out
    assert f"{bad}:3:" in out


def test_check_malformed_xml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = write(tmp_path, "broken.scxml", f"<scxml {NS}>\n  <state id='a'>\n</scxml>\n")
    assert main(["check", str(chart)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    match = DIAGNOSTIC.match(line)
    assert match is not None
    assert match["line"] == "3"
    assert line.endswith("[malformed-xml]")


def test_check_unknown_file_fails_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.scxml"
    assert main(["check", str(missing)]) != 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert str(missing) in captured.out + captured.err


# -- run --------------------------------------------------------------------------------


def test_run_capture_settles(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", str(CARD), "--event", "capture.requested", "--event", "capture.succeeded"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    steps = re.split(r"^== ", out, flags=re.MULTILINE)[1:]
    assert [s.splitlines()[0] for s in steps] == [
        "initialize (t=0ms)",
        "event capture.requested (t=0ms)",
        "event capture.succeeded (t=0ms)",
    ]
    assert "status: running; active: authorized" in steps[0]
    assert "status: running; active: capturing" in steps[1]
    assert "cancel send_id hold" in steps[1]
    assert "status: done" in steps[2]
    assert "done (final: settled;" in steps[2]
    assert "'captures': 1" in steps[2]
    assert "expired" not in out.split("== event capture.requested")[1]


def test_run_without_events_expires_in_virtual_time(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    assert main(["run", str(CARD)]) == 0
    assert time.perf_counter() - start < 5.0
    out = capsys.readouterr().out
    assert "schedule 'authorization.expired' in 7d (send_id hold, due at t=7d)" in out
    assert "pending: 'authorization.expired' (send_id hold) due at t=7d (in 7d)" in out
    assert "== timers (t=7d)" in out
    assert "done (final: expired;" in out.split("== timers")[1]
    assert out.rstrip().splitlines()[-1].strip() == "status: done; active: expired"


def test_run_with_short_advance_does_not_expire(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "--advance", "6d"]) == 0
    out = capsys.readouterr().out
    assert "== timers (t=6d)" in out
    last_step = out.split("== timers")[1]
    assert "status: running; active: authorized" in last_step
    assert "done" not in last_step
    assert out.rstrip().splitlines()[-1] == (
        "still pending: 1 timer: 'authorization.expired' (send_id hold) due at t=7d (in 1d)"
    )


def test_run_json_records(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", str(CARD), "--json", "-e", "capture.requested", "-e", "capture.succeeded"]
    assert main(argv) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["record"] for r in records} == {"effect", "step", "end"}
    steps = [r for r in records if r["record"] == "step"]
    assert [r["step"] for r in steps] == [
        "initialize",
        "event capture.requested",
        "event capture.succeeded",
    ]
    assert [r["configuration"] for r in steps[:2]] == [["authorized"], ["capturing"]]
    assert steps[0]["pending_timers"] == [
        {
            "session": "sess_cli",
            "event": "authorization.expired",
            "send_id": "hold",
            "due_ms": SEVEN_DAYS_MS,
        }
    ]
    assert steps[1]["pending_timers"] == []
    assert steps[-1]["status"] == "done"
    (done,) = [r for r in records if r.get("effect") == "Done"]
    assert done["configuration"] == ["settled"]
    assert done["donedata"] == {"captures": 1}
    assert done["counters"][0] == 3
    end = records[-1]
    assert end == {
        "record": "end",
        "t_ms": 0,
        "status": "done",
        "configuration": ["settled"],
        "pending_timers": [],
        "reason": "halted",
    }
    assert "SendDelayed" in [r.get("effect") for r in records[: records.index(steps[0])]]


def test_run_json_timer_expiry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    steps = [r for r in records if r["record"] == "step"]
    assert [r["step"] for r in steps] == ["initialize", "timers"]
    assert steps[-1]["t_ms"] == SEVEN_DAYS_MS
    (done,) = [r for r in records if r.get("effect") == "Done"]
    assert done["configuration"] == ["expired"]
    assert done["t_ms"] == SEVEN_DAYS_MS


def test_run_event_with_json_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = write(
        tmp_path,
        "echo.scxml",
        f"""<scxml {NS} initial="wait">
  <state id="wait">
    <transition event="order" target="done">
      <log label="amount" expr="_event.data['amount']"/>
    </transition>
  </state>
  <final id="done"/>
</scxml>
""",
    )
    assert main(["run", str(chart), "--event", 'order={"amount": 12.5}']) == 0
    assert "log amount: 12.5" in capsys.readouterr().out


def test_run_invalid_chart_prints_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = write(tmp_path, "invalid.scxml", INVALID)
    assert main(["run", str(chart)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert all(DIAGNOSTIC.match(line) for line in lines)


def test_run_unknown_file_fails_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.scxml"
    assert main(["run", str(missing)]) != 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert "missing.scxml" in captured.out + captured.err


def test_run_bad_event_json_names_the_argument(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(CARD), "--event", "capture.requested={not json"]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    first, second = captured.err.splitlines()
    assert first.startswith(
        "statifier run: error: Invalid value for '--event' / '-e': "
        "'capture.requested={not json': the data after '=' is not JSON"
    )
    assert second == "Try 'statifier run --help' for help."


@pytest.mark.parametrize("payload", ["NaN", "[1, Infinity]", '{"a": -Infinity}'])
def test_run_event_data_with_nan_or_infinity_is_not_json(
    payload: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python's JSON reader accepts NaN and Infinity; JSON (and a position) does not."""
    assert main(["run", str(CARD), "--event", f"capture.requested={payload}"]) == 2
    assert "the data after '=' is not JSON" in capsys.readouterr().err
