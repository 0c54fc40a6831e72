"""``statifier diagram``: golden Mermaid and DOT for every example chart, highlighting, SVG.

Regenerate the golden files after an intended change with
``STATIFIER_UPDATE_GOLDEN=1 uv run pytest packages/statifier/tests/test_diagram.py``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pydot
import pytest
import statifier
from statifier.chart.diagram import (
    ACTIVE_FILL,
    MAX_LABEL,
    GraphvizMissing,
    to_dot,
    to_mermaid,
    to_svg,
    transition_label,
)
from statifier.cli import main
from statifier.core.position import dumps
from statifier.virtual import VirtualDriver

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.scxml"))
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("STATIFIER_UPDATE_GOLDEN") == "1"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.is_file(), f"missing golden file {path}; run with STATIFIER_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} differs from its golden file"


@pytest.mark.parametrize("chart", EXAMPLES, ids=lambda p: p.stem)
def test_mermaid_golden(chart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", str(chart)]) == 0
    _golden(f"{chart.stem}.mmd", capsys.readouterr().out)


@pytest.mark.parametrize("chart", EXAMPLES, ids=lambda p: p.stem)
def test_dot_golden(chart: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", "--format", "dot", str(chart)]) == 0
    _golden(f"{chart.stem}.dot", capsys.readouterr().out)


def test_every_kind_of_state_is_drawn_as_such() -> None:
    machine = statifier.compile((REPO / "examples" / "subscription.scxml").read_bytes())
    mermaid = to_mermaid(machine)
    assert "state s4 {" in mermaid
    assert "\n            --\n" in mermaid
    assert 'state "H*" as s3' in mermaid
    assert "class s3 history" in mermaid
    assert "s12 --> [*]" in mermaid
    assert "class s12,s13 final" in mermaid
    assert "s7 --> s6 : charge.failed [failed_charges #lt; 2] /" in mermaid
    dot = to_dot(machine)
    assert 'subgraph cluster_s4 {\n      label="running";\n      style="dashed";' in dot
    assert 's3 [label="H*", shape=circle];' in dot
    assert 's13 [label="lapsed", shape=doublecircle];' in dot
    assert 's7 -> s6 [label="charge.failed [failed_charges < 2] /"];' in dot


def test_event_highlights_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    chart = str(REPO / "examples" / "subscription.scxml")
    assert main(["diagram", chart, "-e", "trial.ended", "-e", "renewal.due"]) == 0
    mermaid = capsys.readouterr().out
    assert mermaid.rstrip().splitlines()[-1] == "    class s2,s4,s5,s7,s8,s9 active"
    assert main(["diagram", "--format", "dot", chart, "-e", "trial.ended"]) == 0
    dot = capsys.readouterr().out
    assert 's6 [label="billing_idle", shape=box, style="rounded,filled", fillcolor="#fde68a"' in dot
    assert 's7 [label="charging", shape=box, style="rounded"];' in dot


def test_position_highlights_its_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    card = REPO / "examples" / "card_authorization.scxml"
    driver = VirtualDriver(statifier.compile(card.read_bytes()))
    driver.start()
    driver.send("capture.requested")
    driver.run_until_idle()
    blob = tmp_path / "position.bin"
    blob.write_bytes(dumps(driver.state))
    assert main(["diagram", str(card), "--position", str(blob)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("class s2 active")
    blob.write_bytes(b"not a position")
    assert main(["diagram", str(card), "--position", str(blob)]) == 1
    assert "--position" in capsys.readouterr().err


@pytest.mark.parametrize("chart", EXAMPLES, ids=lambda p: p.stem)
def test_dot_golden_is_valid_dot(chart: Path) -> None:
    """Every golden DOT file parses as one graph (pydot's DOT grammar, no Graphviz needed)."""
    graphs = pydot.graph_from_dot_data((GOLDEN / f"{chart.stem}.dot").read_text())
    assert graphs is not None
    assert len(graphs) == 1
    assert graphs[0].get_nodes() or graphs[0].get_subgraphs()


def test_edges_between_a_compound_state_and_its_descendants_are_not_clipped() -> None:
    """Graphviz can clip an edge to a cluster's border only when the other end lies outside
    the cluster (it warns "head is inside tail cluster" otherwise)."""
    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="outer">'
        '<state id="outer" initial="inner"><transition event="reset" target="inner"/>'
        '<state id="inner"><transition event="up" target="outer"/></state></state>'
        '<state id="next"><transition event="back" target="outer"/></state></scxml>'
    )
    dot = to_dot(machine)
    assert 's1 -> s2 [label="reset"];' in dot  # outer -> inner: no ltail
    assert 's2 -> s1 [label="up"];' in dot  # inner -> outer: no lhead
    assert 's3 -> s1 [lhead=cluster_s1, label="back"];' in dot


def _wide_transition(size: int) -> statifier.Machine:
    """One transition on ``size`` events to the ``size`` regions of a parallel."""
    events = " ".join(f"event{i}" for i in range(size))
    regions = "".join(f'<state id="r{i}"/>' for i in range(size))
    targets = " ".join(f"r{i}" for i in range(size))
    return statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">'
        f'<state id="a"><transition event="{events}" target="{targets}"/></state>'
        f'<parallel id="p">{regions}</parallel></scxml>'
    )


def test_a_label_is_cut_like_a_condition_and_diagrams_grow_with_the_chart() -> None:
    # Every event was written into the label, and the label onto each target's edge:
    # a chart of 39 KB drew 189 MB.
    machine = _wide_transition(3)
    assert "s1 --> s3 : event0 event1 event2" in to_mermaid(machine)
    wide = _wide_transition(100)
    label = transition_label(wide.transitions[0])
    assert len(label) == MAX_LABEL
    assert label == " ".join(f"event{i}" for i in range(100))[: MAX_LABEL - 1] + "\u2026"
    assert f's1 -> s4 [label="{label}"];' in to_dot(wide)
    for draw in (to_mermaid, to_dot):
        small, large = len(draw(_wide_transition(100))), len(draw(_wide_transition(400)))
        assert large <= 4.5 * small, (draw, small, large)


def test_each_target_of_a_transition_is_drawn_once() -> None:
    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="a">'
        '<state id="a"><transition event="go" target="b"/></state><state id="b"/></scxml>'
    )
    # The compiler drops a repeated target already; a machine made otherwise may keep it.
    transitions = tuple(
        dataclasses.replace(t, targets=t.targets * 3) if t.events else t
        for t in machine.transitions
    )
    repeated = dataclasses.replace(machine, transitions=transitions)
    assert to_mermaid(repeated).count("s1 --> s2 : go") == 1
    assert to_dot(repeated).count('s1 -> s2 [label="go"];') == 1


STUB_DOT = """#!{python}
import pathlib, sys
assert sys.argv[1:] == ["-Tsvg"], sys.argv
pathlib.Path({record!r}).write_bytes(sys.stdin.buffer.read())
sys.stdout.write("<?xml version='1.0'?><svg>stub</svg>")
"""


def test_svg_pipes_the_dot_source_through_graphviz(tmp_path: Path) -> None:
    """The SVG path hands exactly the DOT source to ``dot -Tsvg`` and writes what it prints.

    A recording stand-in for Graphviz's ``dot`` sits first on the PATH, so the contract is
    checked whether or not Graphviz is installed; the goldens above check the DOT itself.
    """
    record = tmp_path / "stdin.dot"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "dot"
    stub.write_text(STUB_DOT.format(python=sys.executable, record=str(record)))
    stub.chmod(0o755)
    chart = REPO / "examples" / "card_authorization.scxml"
    out = tmp_path / "card.svg"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [sys.executable, "-m", "statifier", "diagram", "--format", "svg"]
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [*command, str(chart), "-o", str(out)], env=env, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert out.read_text() == "<?xml version='1.0'?><svg>stub</svg>"
    assert record.read_text() == to_dot(statifier.compile(chart.read_bytes()))


def test_svg_without_graphviz_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    chart = str(REPO / "examples" / "card_authorization.scxml")
    assert main(["diagram", "--format", "svg", chart]) == 1
    err = capsys.readouterr().err
    assert "SVG needs Graphviz's 'dot' on the PATH" in err
    assert "apt-get install graphviz" in err


def test_svg_labels_are_text_never_markup() -> None:
    """A condition holding markup reaches the SVG escaped: the drawing cannot inject it."""
    if shutil.which("dot") is None:
        if os.environ.get("CI"):
            pytest.fail("Graphviz's dot is missing in CI: .ci/run installs graphviz")
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz; CI has it)")
    machine = statifier.compile(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" initial="a">'
        '<state id="a"><transition event="go" cond="\'&lt;script&gt;x&lt;/script&gt;\' != \'\'"'
        ' target="b"/></state><final id="b"/></scxml>'
    )
    svg = to_svg(machine, (*machine.states[1].ancestors, 1)).decode()
    assert "<script" not in svg
    assert "&lt;script&gt;" in svg
    assert ACTIVE_FILL in svg


def test_svg_without_graphviz_raises_with_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    machine = statifier.compile((REPO / "examples" / "card_authorization.scxml").read_bytes())
    with pytest.raises(GraphvizMissing, match="apt-get install graphviz"):
        to_svg(machine)
