"""Mistakes in a chart written in Python are reported at the Python line that made them.

The compiler checks the exported SCXML; each diagnostic is mapped back to the builder call
that made its element (file, line and column of the call), so a mistake never points at a
line of generated XML. What the builder cannot even write raises ``BuildError`` at once.

The mistakes are also type errors: each ``# type: ignore[code]`` below is one that
``mypy --strict`` reports (CI runs it with ``warn_unused_ignores``, so a builder whose
types stopped catching the mistake fails there).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import statifier
from statifier import build as sc
from statifier.chart.lint import lint
from statifier.chart.xmltree import MAX_DEPTH, XNode, parse
from statifier.errors import ChartError, Diagnostic

HERE = Path(__file__)
SOURCE = HERE.read_text(encoding="utf-8").splitlines()


def marked(marker: str, call: str) -> tuple[str, int, int]:
    """(file, line, column) of ``call`` on the line of this file that ends with ``# marker``."""
    [number] = [i for i, line in enumerate(SOURCE, 1) if line.endswith(f"# {marker}")]
    return str(HERE), number, SOURCE[number - 1].index(call) + 1


def where(diagnostic: Diagnostic) -> tuple[str | None, int, int]:
    return diagnostic.file, diagnostic.line, diagnostic.column


def errors_of(chart: sc.Chart) -> dict[str, Diagnostic]:
    with pytest.raises(ChartError) as info:
        chart.compile()
    return {d.code: d for d in info.value.diagnostics}


def test_each_mistake_names_the_python_line_that_made_it() -> None:
    chart = sc.chart(
        sc.state(
            "authorized",
            sc.on_entry(
                sc.send(event="authorization.expired", delay="soon"),  # bad delay
            ),
            sc.transition(event="capture.requested", target="capturng"),  # unknown target
        ),
        sc.state("authorized"),  # duplicate id
        sc.transition(event="stray", target="authorized"),  # type: ignore[arg-type]  # outside a state
        sc.final("settled"),
    )
    found = errors_of(chart)
    assert sorted(found) == ["duplicate-id", "invalid-child", "invalid-delay", "unknown-target"]
    assert where(found["invalid-delay"]) == marked("bad delay", "sc.send")
    assert where(found["unknown-target"]) == marked("unknown target", "sc.transition")
    assert "did you mean 'capturing'" not in found["unknown-target"].message
    assert where(found["duplicate-id"]) == marked("duplicate id", "sc.state")
    assert where(found["invalid-child"]) == marked("outside a state", "sc.transition")
    assert found["invalid-child"].message == "<transition> is not allowed inside <scxml>"
    assert all(d.severity == "error" for d in found.values())


def test_the_error_message_and_format_name_the_python_file() -> None:
    chart = sc.chart(sc.state("s", sc.transition(target="nowhere")))  # one error
    with pytest.raises(ChartError) as info:
        chart.compile()
    file, line, column = marked("one error", "sc.transition")
    assert str(info.value) == (
        f"1 error(s) in chart; first at {file}:{line}:{column}: "
        "transition target 'nowhere' is not a state id"
    )
    [diagnostic] = info.value.diagnostics
    assert diagnostic.format("ignored.scxml") == (
        f"{file}:{line}:{column}: error: transition target 'nowhere' is not a state id "
        "[unknown-target]"
    )


def test_a_branch_of_an_if_names_its_own_line() -> None:
    chart = sc.chart(
        sc.state(
            "s",
            sc.on_entry(
                sc.if_("x > 1", sc.raise_("big"))
                .elseif("x >", sc.raise_("one"))  # broken elseif
                .else_(sc.raise_("small")),
            ),
        ),
    )
    found = errors_of(chart)
    assert where(found["invalid-expression"]) == marked("broken elseif", "elseif(")


def test_warnings_of_the_machine_name_python_lines() -> None:
    machine = sc.chart(
        sc.state(
            "s",
            sc.on_entry(sc.send(event="later", target="#_internal", delay="1s")),  # a warning
        ),
    ).compile()
    [warning] = machine.warnings
    assert warning.code == "delayed-internal"
    assert where(warning) == marked("a warning", "sc.send")


def test_lint_findings_are_located_through_the_export() -> None:
    chart = sc.chart(
        sc.state(
            "s",
            sc.transition(event="go", target="t"),
            sc.transition(event="go", target="s"),  # dead
        ),
        sc.state("t"),
    )
    located = [chart.export().locate(d) for d in lint(chart.compile())]
    [dead] = [d for d in located if d.code == "dead-transition"]
    assert where(dead) == marked("dead", "sc.transition")


def test_every_element_of_the_export_is_at_a_recorded_position() -> None:
    chart = sc.chart(
        sc.data("a", markup=sc.xml("<x><y/></x>text<z/>")),
        sc.data("b"),
        sc.state(
            "s",
            sc.on_entry(sc.log(expr="'é' * 2"), sc.script("a = 1\nb = 2\n")),
            sc.invoke(sc.content(chart=sc.chart(sc.final("c")))),
            sc.transition(sc.if_("a").else_(sc.raise_("e")), event="go"),
        ),
    )
    exported = chart.export()
    elements: list[XNode] = []

    def walk(node: XNode) -> None:
        elements.append(node)
        for child in node.children:
            walk(child)

    walk(parse(exported.text.encode()))
    assert list(exported.positions) == [(n.line, n.column) for n in elements]
    assert len(exported.origins) == len(elements)


def test_a_diagnostic_between_elements_belongs_to_the_one_before() -> None:
    chart = sc.chart(sc.state("a"), sc.state("b"))
    exported = chart.export()
    (line_a, column_a), (line_b, column_b) = exported.positions[1:]
    state_a, state_b = exported.origins[1:]
    assert exported.origin_at(line_a, column_a) == state_a
    assert exported.origin_at(line_b, column_b - 1) == state_a
    assert exported.origin_at(line_b, column_b) == state_b
    assert exported.origin_at(0) == exported.origins[0] == chart.origin


def test_a_diagnostic_that_names_its_file_already_is_left_as_it_is() -> None:
    diagnostic = Diagnostic("x", "y", 3, 4, "error", "other.py")
    assert sc.chart(sc.state("s")).export().locate(diagnostic) is diagnostic


def test_what_the_builder_cannot_write_raises_at_the_calling_line() -> None:
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: sc.data("d", value={1: "int key"}), "not JSON-like"),  # type: ignore[dict-item]
        (lambda: sc.data("d", value=(1, 2)), "not JSON-like"),  # type: ignore[call-overload]
        (lambda: sc.data("d", value=1, markup=sc.xml("<a/>")), "at most one"),  # type: ignore[call-overload]
        (lambda: sc.content(markup=sc.xml("<a/>"), chart=sc.chart()), "at most one"),  # type: ignore[call-overload]
        (lambda: sc.xml("<a>"), "not well-formed"),
        (lambda: sc.xml("<!DOCTYPE a><a/>"), "not well-formed"),
        (lambda: sc.state(sc.final("f")), "id is a string"),  # type: ignore[arg-type]
        (lambda: sc.send(event="e", delay=timedelta(seconds=-1)), "negative"),
        (lambda: sc.send(event="e", delay=timedelta(microseconds=1500)), "whole number"),
    ]
    for make, text in cases:
        with pytest.raises(sc.BuildError) as info:
            make()
        assert text in str(info.value)
        assert info.value.origin.file == str(HERE)


def test_a_child_that_is_not_an_element_is_refused_when_exported() -> None:
    chart = sc.chart(sc.state("s", "stray text"))  # type: ignore[arg-type]  # not an element
    with pytest.raises(sc.BuildError) as info:
        chart.export()
    assert "'stray text' is not an element of a chart" in str(info.value)
    assert info.value.origin.line == marked("not an element", "sc.state")[1]


def test_text_xml_cannot_hold_is_refused_naming_its_element() -> None:
    chart = sc.chart(sc.state("s", sc.on_entry(sc.log(label="bell \x07"))))  # control char
    with pytest.raises(sc.BuildError) as info:
        chart.export()
    assert "'\\x07'" in str(info.value)
    assert info.value.origin.line == marked("control char", "sc.log")[1]


def test_a_delay_of_whole_milliseconds_is_accepted_at_the_boundary() -> None:
    assert sc.send(event="e", delay=timedelta(microseconds=1000)).attrs[8] == ("delay", "1ms")
    assert sc.send(event="e", delay=timedelta(0)).attrs[8] == ("delay", "0ms")
    for bad in (timedelta(microseconds=999), timedelta(microseconds=1001)):
        with pytest.raises(sc.BuildError):
            sc.send(event="e", delay=bad)


def nested(depth: int) -> sc.Chart:
    """A chart whose deepest element is at ``depth`` (the ``<scxml>`` root is depth 1)."""
    inner = sc.state("s0")
    for level in range(1, depth - 1):
        inner = sc.state(f"s{level}", inner)
    return sc.chart(inner)


def test_nesting_is_bounded_where_the_parser_bounds_it() -> None:
    deepest = nested(MAX_DEPTH)
    parse(deepest.export().text.encode())  # the parser takes it, and so does the builder
    with pytest.raises(sc.BuildError) as info:
        nested(MAX_DEPTH + 1).export()
    assert f"nested more than {MAX_DEPTH} levels" in str(info.value)
    with pytest.raises(ChartError):
        parse(
            statifier.export(deepest)
            .replace('<state id="s0"/>', "<state><state/></state>")
            .encode()
        )
