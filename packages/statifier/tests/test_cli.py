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
    assert out.strip() == f"{chart}: ok (2 states, 2 transitions)"


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
        "initialize (t=0 ms)",
        "event capture.requested (t=0 ms)",
        "event capture.succeeded (t=0 ms)",
    ]
    assert "status: running; active: authorized" in steps[0]
    assert "status: running; active: capturing" in steps[1]
    assert "cancel send_id hold" in steps[1]
    assert "status: done" in steps[2]
    assert out.rstrip().splitlines()[-1].strip().startswith("done (final: settled;")
    assert "'captures': 1" in steps[2]
    assert "expired" not in out.split("== event capture.requested")[1]


def test_run_without_events_expires_in_virtual_time(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    assert main(["run", str(CARD)]) == 0
    assert time.perf_counter() - start < 5.0
    out = capsys.readouterr().out
    assert f"schedule 'authorization.expired' in {SEVEN_DAYS_MS} ms" in out
    assert f"== timers (t={SEVEN_DAYS_MS} ms)" in out
    assert out.rstrip().splitlines()[-1].strip().startswith("done (final: expired;")


def test_run_with_short_advance_does_not_expire(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "--advance", "6d"]) == 0
    out = capsys.readouterr().out
    assert f"== timers (t={6 * 24 * 3_600_000} ms)" in out
    last_step = out.split("== timers")[1]
    assert "status: running; active: authorized" in last_step
    assert "expired" not in last_step


def test_run_json_prints_one_object_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", str(CARD), "--json", "-e", "capture.requested", "-e", "capture.succeeded"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 3
    assert all(isinstance(r, dict) for r in records)
    assert all({"configuration", "effects"} <= r.keys() for r in records)
    assert [r["configuration"] for r in records[:2]] == [["authorized"], ["capturing"]]
    assert records[-1]["status"] == "done"
    (done,) = [e for e in records[-1]["effects"] if e["effect"] == "Done"]
    assert done["configuration"] == ["settled"]
    assert done["donedata"] == {"captures": 1}
    effects = [e["effect"] for e in records[0]["effects"]]
    assert "SendDelayed" in effects


def test_run_json_timer_expiry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["step"] for r in records] == ["initialize", "timers"]
    assert records[-1]["virtual_ms"] == SEVEN_DAYS_MS
    (done,) = [e for e in records[-1]["effects"] if e["effect"] == "Done"]
    assert done["configuration"] == ["expired"]


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


def test_run_bad_event_json_fails_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(CARD), "--event", "capture.requested={not json"]) != 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
