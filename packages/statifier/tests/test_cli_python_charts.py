"""The command line takes charts written in Python as ``MODULE:NAME``.

``statifier export`` writes one as SCXML; ``check``, ``run`` and ``diagram`` take
``MODULE:NAME`` wherever they take a chart file, import it by the ``--path`` rule, and name
the Python lines that made the elements a diagnostic or an error is about.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest
import statifier
from statifier.cli import main

REPO = Path(__file__).resolve().parents[3]
CARD_SCXML = REPO / "examples" / "card_authorization.scxml"

BROKEN = """\
from statifier import build as sc

CHART = sc.chart(
    sc.state(
        "a",
        sc.transition(event="go", target="nowhere"),
    ),
)
NOT_A_CHART = 42
"""

FAILING = """\
from statifier import build as sc

CHART = sc.chart(
    sc.data("n", expr="0"),
    sc.state(
        "a",
        sc.transition(event="go", target="b"),
        sc.transition(event="go", target="a"),
    ),
    sc.state(
        "b",
        sc.on_entry(sc.assign("n", expr="1 // 0")),
    ),
)
"""


@pytest.fixture
def user_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A folder holding the modules ``broken_<id>`` and ``failing_<id>`` (names no other
    test imports), the working directory, with ``sys.path`` restored after the test."""
    names = {kind: f"{kind}_{uuid.uuid4().hex[:8]}" for kind in ("broken", "failing")}
    (tmp_path / f"{names['broken']}.py").write_text(BROKEN)
    (tmp_path / f"{names['failing']}.py").write_text(FAILING)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path, names


def test_export_writes_the_scxml_of_a_chart_written_in_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "card_authorization:CHART"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<scxml ')
    assert statifier.chart_identity(out) == statifier.chart_identity(CARD_SCXML.read_bytes())
    target = tmp_path / "card.scxml"
    assert main(["export", "card_authorization:CHART", "-o", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert target.read_text(encoding="utf-8") == out


def test_export_of_a_chart_that_does_not_compile_writes_only_its_errors(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, names = user_modules
    module = names["broken"]
    assert main(["export", "--path", ".", f"{module}:CHART"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"{folder / module}.py:6:9: error: transition target 'nowhere' is not a state id "
        "[unknown-target]"
    ]


def test_check_names_the_python_lines(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, names = user_modules
    broken, failing = names["broken"], names["failing"]
    assert main(["check", "--path", ".", f"{broken}:CHART", f"{failing}:CHART"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"{folder / broken}.py:6:9: error: transition target 'nowhere' is not a state id "
        "[unknown-target]"
    )
    [dead] = [line for line in lines if line.endswith("[dead-transition]")]
    assert dead.startswith(f"{folder / failing}.py:8:9: warning: ")
    assert lines[-1] == f"{failing}:CHART: ok (2 states, 3 transitions, 1 warning, 1 note)"


def test_check_json_records_name_the_python_file(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, names = user_modules
    assert main(["check", "--json", "--path", ".", f"{names['broken']}:CHART"]) == 1
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (first["file"], first["line"], first["column"]) == (
        f"{folder / names['broken']}.py",
        6,
        9,
    )


def test_run_of_the_python_chart_prints_what_the_scxml_run_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    events = ["-e", "capture.requested", "-e", "capture.failed", "-e", "capture.succeeded"]
    assert main(["run", str(CARD_SCXML), *events]) == 0
    from_file = capsys.readouterr().out
    assert main(["run", "card_authorization:CHART", *events]) == 0
    assert capsys.readouterr().out == from_file
    assert "done (final: settled;" in from_file


def test_run_names_the_python_line_of_an_error_and_of_a_transition(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, names = user_modules
    module = names["failing"]
    assert main(["run", "--path", ".", "--trace", f"{module}:CHART", "-e", "go"]) == 0
    out = capsys.readouterr().out
    assert f"error.execution at {folder / module}.py:12: " in out
    assert f"trace: take go a -> b ({folder / module}.py:7)" in out


def test_diagram_of_the_python_chart_is_the_diagram_of_the_scxml(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["diagram", str(CARD_SCXML)]) == 0
    from_file = capsys.readouterr().out
    assert main(["diagram", "card_authorization:CHART"]) == 0
    assert capsys.readouterr().out == from_file


def test_a_module_in_the_working_directory_needs_path(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, names = user_modules
    module = names["broken"]
    assert main(["check", f"{module}:CHART"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"statifier check: error: CHART {module}: cannot import {module!r}: {module!r} is in "
        "the working directory, which is not on the import path: add --path . "
        "(or set PYTHONPATH)"
    ]


def test_a_name_that_is_not_a_chart_is_refused(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    _, names = user_modules
    module = names["broken"]
    assert main(["run", "--path", ".", f"{module}:NOT_A_CHART"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"statifier run: error: CHART {module}:NOT_A_CHART: {module}.NOT_A_CHART is of type "
        "int, not a chart written with statifier.build"
    ]
    assert main(["run", "--path", ".", f"{module}:MISSING"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"statifier run: error: CHART {module}:MISSING: module {module!r} has no 'MISSING'"
    ]


def test_export_takes_only_a_chart_written_in_python(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(CARD_SCXML)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"statifier export: error: CHART {CARD_SCXML}: export takes MODULE:NAME, a chart "
        "written in Python (an SCXML file is SCXML already)"
    ]


def test_an_existing_file_wins_over_a_name_of_the_same_spelling(
    user_modules: tuple[Path, dict[str, str]], capsys: pytest.CaptureFixture[str]
) -> None:
    folder, names = user_modules
    spelled = f"{names['broken']}:CHART"
    (folder / spelled).write_bytes(CARD_SCXML.read_bytes())
    assert main(["check", "--path", ".", spelled]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"{spelled}: ok (4 states")
