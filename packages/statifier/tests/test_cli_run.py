"""``statifier run``: trace, unmatched events, --strict, live waits, --version, --functions."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import statifier
from statifier.cli import main

REPO = Path(__file__).resolve().parents[3]
CARD = REPO / "examples" / "card_authorization.scxml"
NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def test_trace_shows_every_microstep(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "--trace", "-e", "capture.requested"]) == 0
    step = capsys.readouterr().out.split("== event capture.requested")[1]
    lines = [line.strip() for line in step.splitlines()]
    assert lines[1:7] == [
        "trace: external event 'capture.requested'",
        "trace: take capture.requested authorized -> capturing (line 17)",
        "cancel send_id hold",
        "trace: exit authorized",
        "set captures = 1",
        "trace: enter capturing",
    ]


def test_without_trace_no_trace_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "-e", "capture.requested"]) == 0
    out = capsys.readouterr().out
    assert "trace:" not in out
    writes = [line.strip() for line in out.splitlines() if "set " in line]
    assert writes == ["set captures = 0", "set captures = 1"]


def test_an_exhausted_budget_names_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "loop.scxml"
    chart.write_text(
        f'<scxml {NS} version="1.0" initial="a">'
        '<state id="a"><transition target="b"/></state>'
        '<state id="b"><transition target="a"/></state></scxml>'
    )
    assert main(["run", str(chart)]) == 0
    assert "rounds budget of 10000 exhausted" in capsys.readouterr().out


def test_control_characters_a_chart_holds_print_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # XML admits the C1 controls (CSI, U+009B, starts a terminal sequence as ESC [ does)
    # in names and labels, and an error message quotes what failed.
    chart = tmp_path / "c1.scxml"
    chart.write_text(
        f'<scxml {NS} version="1.0" initial="a"><state id="a"><onentry>'
        '<log label="x&#x9b;2J" expr="1"/><send event="y&#x9b;2J" target="#_nowhere&#x9b;"/>'
        "</onentry></state></scxml>",
        encoding="utf-8",
    )
    assert main(["run", str(chart)]) == 0
    out = capsys.readouterr().out
    assert "log x\\x9b2J: 1" in out
    assert "#_nowhere\\x9b" in out
    assert not any(0x7F <= ord(c) <= 0x9F or (ord(c) < 0x20 and c != "\n") for c in out)


def test_unmatched_event_is_a_notice_with_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(CARD), "-e", "capture.requestd", "-e", "capture.requested"]) == 0
    out = capsys.readouterr().out
    assert (
        "notice: no transition matched external event 'capture.requestd'; "
        "did you mean 'capture.requested'?"
    ) in out
    assert "status: running; active: capturing" in out


def test_an_event_the_chart_handles_elsewhere_is_not_misspelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``capture.succeeded`` has a transition, only not in the active state: the notice says
    so instead of suggesting the very name the user typed."""
    assert main(["run", str(CARD), "-e", "capture.succeeded"]) == 0
    out = capsys.readouterr().out
    assert "did you mean" not in out
    assert (
        "notice: no transition matched external event 'capture.succeeded': "
        "no transition for it is enabled in the active states"
    ) in out


def test_unmatched_event_under_strict_is_an_error_exit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", str(CARD), "--strict", "-e", "capture.requestd", "-e", "capture.requested"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == (
        "error: no transition matched 'capture.requestd' (--strict)"
    )
    assert "== event capture.requested" not in out


def test_unmatched_event_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "--json", "--strict", "-e", "nope"]) == 1
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (notice,) = [r for r in records if r["record"] == "notice"]
    assert notice["kind"] == "unmatched-event"
    assert notice["event"] == "nope"
    assert records[-1]["record"] == "end"
    assert records[-1]["reason"] == "strict"


def test_version_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--version"], ["check", "--version"], ["run", "--version"]):
        assert main(argv) == 0
    outputs = capsys.readouterr().out.splitlines()
    assert outputs == [
        f"statifier {statifier.__version__}",
        f"statifier check {statifier.__version__}",
        f"statifier run {statifier.__version__}",
    ]


def test_event_without_a_name_names_the_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(CARD), "-e", "=1"]) == 2
    assert "'--event' / '-e': '=1': expected NAME or NAME=JSON" in capsys.readouterr().err


def test_wait_default_is_shown_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "after the last event (default: 1m)" in help_text


def test_live_run_says_what_is_still_pending_when_the_wait_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", str(CARD), "--live", "--wait", "50ms"]) == 0
    out = capsys.readouterr().out.rstrip().splitlines()
    assert out[-1].startswith(
        "stopped after waiting 50ms (--wait); still pending: 1 timer: "
        "'authorization.expired' (send_id hold) due at t=7d"
    )
    assert "== waiting up to 50ms for timers" in "\n".join(out)


def test_live_and_virtual_runs_print_the_same_json_shape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", str(CARD), "--json", "-e", "capture.requested", "-e", "capture.succeeded"]
    assert main(argv) == 0
    virtual = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main([*argv, "--live", "--wait", "2s"]) == 0
    live = [json.loads(line) for line in capsys.readouterr().out.splitlines()]

    def shape(records: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return [(r["record"], r.get("effect"), r.get("step"), tuple(sorted(r))) for r in records]

    assert shape(live) == shape(virtual)
    assert live[-1]["configuration"] == virtual[-1]["configuration"] == ["settled"]


def test_live_timer_fires_within_the_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "short.scxml"
    chart.write_text(
        f"""<scxml {NS} initial="a">
  <state id="a">
    <onentry><send event="tick" delay="100ms"/></onentry>
    <transition event="tick" target="b"/>
  </state>
  <final id="b"/>
</scxml>
"""
    )
    assert main(["run", str(chart), "--live", "--wait", "5s"]) == 0
    out = capsys.readouterr().out
    assert "done (final: b;" in out
    assert "still pending" not in out


def test_functions_option_loads_host_functions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "hostrules.py").write_text(
        "def is_fraud(amount):\n    return amount > 100\n\nFUNCTIONS = {'is_fraud': is_fraud}\n"
    )
    chart = tmp_path / "fraud.scxml"
    chart.write_text(
        f"""<scxml {NS} initial="a">
  <state id="a">
    <transition event="charge" cond="is_fraud(_event.data)" target="blocked"/>
    <transition event="charge" target="ok"/>
  </state>
  <final id="blocked"/>
  <final id="ok"/>
</scxml>
"""
    )
    monkeypatch.chdir(tmp_path)
    # ``--path .`` puts the working directory on ``sys.path``; a copy, restored after the
    # test, keeps that change here.
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["check", str(chart)]) == 1
    assert "function 'is_fraud' is not allowed" in capsys.readouterr().out
    # The one rule: user code comes from the import path and --path, and the error says so.
    assert main(["check", "--functions", "hostrules:FUNCTIONS", str(chart)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "statifier check: error: --functions hostrules:FUNCTIONS: cannot import 'hostrules': "
        "'hostrules' is in the working directory, which is not on the import path: "
        "add --path . (or set PYTHONPATH)"
    ]
    assert main(["check", "--path", ".", "--functions", "hostrules:FUNCTIONS", str(chart)]) == 0
    capsys.readouterr()
    argv = [
        "run",
        "--functions",
        "hostrules:FUNCTIONS",
        "--path",
        ".",
        str(chart),
        "-e",
        "charge=500",
    ]
    assert main(argv) == 0
    assert "done (final: blocked;" in capsys.readouterr().out
    assert main(["check", "--functions", "nosuchmodule:X", str(chart)]) == 1
    assert "cannot import 'nosuchmodule'" in capsys.readouterr().err


def test_virtual_and_live_runs_report_an_exhausted_budget_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "loop.scxml"
    chart.write_text(
        f'<scxml {NS} version="1.0" initial="a">'
        '<state id="a"><onentry><raise event="e"/></onentry><transition event="e" target="a"/>'
        '<transition event="x" target="b"/></state><final id="b"/></scxml>'
    )
    ends = []
    for mode in ([], ["--live"]):
        assert main(["run", str(chart), "--json", "-e", "x", *mode]) == 0
        records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert not [r for r in records if r["record"] == "step" and r["step"] == "event x"]
        end = records[-1]
        ends.append((end["status"], end["reason"], end["configuration"]))
    assert ends == [("budget_exhausted", "halted", ["a"])] * 2


def test_src_files_beside_the_chart_are_read_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``<script src>``, ``<data src>`` and ``<invoke src>`` name files next to the chart;
    a path leaving the chart's directory is refused."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "double.js").write_text("function double(x) { return 2 * x; }")
    (tmp_path / "config.json").write_text('{"start": 21}')
    (tmp_path / "child.scxml").write_text(
        f'<scxml {NS} version="1.0" datamodel="ecmascript"><final id="f">'
        '<donedata><param name="v" expr="2"/></donedata></final></scxml>'
    )
    (tmp_path / "secret.txt").write_text("secret")
    charts = tmp_path / "charts"
    charts.mkdir()
    chart = tmp_path / "parent.scxml"
    chart.write_text(
        f'<scxml {NS} version="1.0" datamodel="ecmascript" initial="p">'
        '<datamodel><data id="config" src="config.json"/></datamodel>'
        '<script src="file:lib/double.js"/>'
        '<state id="p"><invoke id="kid" src="child.scxml"/>'
        '<transition event="done.invoke.kid" target="end">'
        '<log label="got" expr="double(config.start) + _event.data.v"/></transition></state>'
        '<final id="end"/></scxml>'
    )
    for mode in ([], ["--live"]):
        assert main(["run", str(chart), *mode]) == 0
        out = capsys.readouterr().out
        assert "log got: 44" in out
        assert "status: done; active: end" in out
    escaping = charts / "escaping.scxml"
    escaping.write_text(
        f'<scxml {NS} version="1.0" datamodel="ecmascript">'
        '<script src="../secret.txt"/><state id="s"/></scxml>'
    )
    assert main(["check", str(escaping)]) == 1
    assert "'../secret.txt' is outside the chart's directory" in capsys.readouterr().out


def test_live_run_waits_for_the_invoked_children(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The timer that finishes the run belongs to a child session: the live run waits for
    it as the virtual run does."""
    chart = tmp_path / "parent.scxml"
    chart.write_text(
        f'<scxml {NS} version="1.0" initial="p"><state id="p"><invoke id="k"><content>'
        f'<scxml {NS} version="1.0" initial="c"><state id="c">'
        '<onentry><send event="fin" delay="50ms"/></onentry>'
        '<transition event="fin" target="cf"/></state><final id="cf"/></scxml>'
        '</content></invoke><transition event="done.invoke.k" target="end"/></state>'
        '<final id="end"/></scxml>'
    )
    ends = []
    for mode in ([], ["--live", "--wait", "5s"]):
        assert main(["run", str(chart), "--json", *mode]) == 0
        end = json.loads(capsys.readouterr().out.splitlines()[-1])
        ends.append((end["status"], end["reason"], end["configuration"]))
    assert ends == [("done", "halted", ["end"])] * 2
