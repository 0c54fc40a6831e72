"""Compile-time validation: every diagnostic class, with its code and source line."""

from __future__ import annotations

import textwrap

import pytest
import statifier
from statifier import ChartError, Diagnostic
from statifier.chart.model import ForeachNode, IfNode

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def chart(body: str, attrs: str = "") -> str:
    """A chart whose ``<scxml>`` is on line 1 and whose body starts on line 2."""
    return f"<scxml {NS}{attrs}>\n" + textwrap.dedent(body).strip("\n") + "\n</scxml>\n"


def line_of(source: str, marker: str, occurrence: int = 1) -> int:
    """1-based line of the ``occurrence``-th line of ``source`` containing ``marker``."""
    seen = 0
    for number, text in enumerate(source.splitlines(), start=1):
        if marker in text:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{marker!r} not in source")


def errors_of(source: str | bytes, **kwargs: object) -> tuple[Diagnostic, ...]:
    with pytest.raises(ChartError) as info:
        statifier.compile(source, **kwargs)  # type: ignore[arg-type]
    diagnostics = info.value.diagnostics
    assert diagnostics, "ChartError must carry at least one diagnostic"
    assert all(d.severity == "error" for d in diagnostics)
    return diagnostics


def assert_reports(source: str, code: str, marker: str, occurrence: int = 1) -> Diagnostic:
    """Compiling fails with a ``code`` diagnostic on the line of ``marker``."""
    diagnostics = errors_of(source)
    line = line_of(source, marker, occurrence)
    matching = [d for d in diagnostics if d.code == code and d.line == line]
    assert matching, f"expected {code} at line {line}, got {diagnostics}"
    return matching[0]


# -- document-level problems ----------------------------------------------------------


def test_malformed_xml_reports_line_of_the_mismatch() -> None:
    source = chart(
        """
        <state id="a">
          <onentry>
        </state>
        """
    )
    (diagnostic,) = errors_of(source)
    assert diagnostic.code == "malformed-xml"
    assert diagnostic.line == line_of(source, "</state>")


def test_root_that_is_not_scxml() -> None:
    source = f'<?xml version="1.0"?>\n<statechart {NS}>\n  <state id="a"/>\n</statechart>\n'
    (diagnostic,) = errors_of(source)
    assert diagnostic.code == "not-scxml"
    assert diagnostic.line == 2


def test_scxml_root_in_the_wrong_namespace_is_not_scxml() -> None:
    source = '<scxml xmlns="urn:not-scxml">\n  <state id="a"/>\n</scxml>\n'
    (diagnostic,) = errors_of(source)
    assert diagnostic.code == "not-scxml"
    assert diagnostic.line == 1


@pytest.mark.parametrize(
    "body",
    [
        """
        <state id="a">
          <bogus/>
        </state>
        """,
        """
        <state id="a">
          <onentry>
            <bogus/>
          </onentry>
        </state>
        """,
    ],
    ids=["in-state", "in-onentry"],
)
def test_unknown_element(body: str) -> None:
    source = chart(body)
    diagnostic = assert_reports(source, "unknown-element", "<bogus")
    assert "bogus" in diagnostic.message


def test_unknown_attribute() -> None:
    source = chart(
        """
        <state id="a">
          <transition event="go" target="a" colour="red"/>
        </state>
        """
    )
    diagnostic = assert_reports(source, "unknown-attribute", "colour=")
    assert "colour" in diagnostic.message


def test_foreign_namespace_attributes_and_elements_are_allowed() -> None:
    source = chart(
        """
        <state id="a" x:colour="red">
          <x:layout width="10"/>
        </state>
        """,
        attrs=' xmlns:x="urn:example:editor"',
    )
    machine = statifier.compile(source)
    assert machine.state("a").kind == "state"


def test_duplicate_state_id_reports_the_second_declaration() -> None:
    source = chart(
        """
        <state id="a"/>
        <state id="b">
          <state id="a"/>
        </state>
        """
    )
    diagnostic = assert_reports(source, "duplicate-id", 'id="a"', occurrence=2)
    assert "'a'" in diagnostic.message


def test_duplicate_data_id() -> None:
    source = chart(
        """
        <datamodel>
          <data id="x" expr="1"/>
        </datamodel>
        <state id="a">
          <datamodel>
            <data id="x" expr="2"/>
          </datamodel>
        </state>
        """
    )
    assert_reports(source, "duplicate-id", 'data id="x"', occurrence=2)


def test_missing_data_id() -> None:
    source = chart(
        """
        <datamodel>
          <data expr="1"/>
        </datamodel>
        <state id="a"/>
        """
    )
    assert_reports(source, "missing-attribute", "<data ")


def test_transition_to_unknown_target() -> None:
    source = chart(
        """
        <state id="a">
          <transition event="go" target="a nowhere"/>
        </state>
        """
    )
    diagnostic = assert_reports(source, "unknown-target", "nowhere")
    assert "nowhere" in diagnostic.message


# -- initial states -------------------------------------------------------------------


def test_initial_attribute_naming_a_non_descendant() -> None:
    source = chart(
        """
        <state id="a" initial="b">
          <state id="a1"/>
        </state>
        <state id="b"/>
        """
    )
    assert_reports(source, "invalid-initial", 'initial="b"')


def test_initial_element_targeting_a_non_descendant() -> None:
    source = chart(
        """
        <state id="a">
          <initial>
            <transition target="b"/>
          </initial>
          <state id="a1"/>
        </state>
        <state id="b"/>
        """
    )
    assert_reports(source, "invalid-initial", 'target="b"')


def test_initial_on_an_atomic_state() -> None:
    source = chart(
        """
        <state id="a"/>
        <state id="leaf" initial="a"/>
        """
    )
    assert_reports(source, "invalid-initial", 'id="leaf"')


def test_initial_attribute_and_initial_element_together() -> None:
    source = chart(
        """
        <state id="a" initial="a1">
          <initial>
            <transition target="a1"/>
          </initial>
          <state id="a1"/>
        </state>
        """
    )
    assert_reports(source, "invalid-initial", 'id="a"')


@pytest.mark.parametrize(
    ("body", "marker"),
    [
        (
            '<state id="a"><transition event="x" target="b c"/></state><state id="b"/>'
            '<state id="c"/>',
            'target="b c"',
        ),
        ('<state id="a" initial="a1 a2"><state id="a1"/><state id="a2"/></state>', 'id="a"'),
        (
            '<state id="a"><initial><transition target="a1 b2"/></initial>'
            '<state id="a1"/><state id="b"><state id="b2"/></state></state>',
            'target="a1 b2"',
        ),
    ],
)
def test_targets_that_cannot_be_active_together_are_refused(body: str, marker: str) -> None:
    """Two targets under one compound state (not in different regions of a parallel) would
    make a configuration no position can hold (SCXML 3.11): the document is refused."""
    found = assert_reports(chart(body), "invalid-target", marker)
    assert "cannot be active together" in found.message


def test_targets_in_regions_of_a_parallel_or_nested_are_fine() -> None:
    source = chart(
        """
        <state id="a"><transition event="x" target="r1b r2b"/>
                      <transition event="y" target="p r1b"/></state>
        <parallel id="p">
          <state id="r1"><state id="r1a"/><state id="r1b"/></state>
          <state id="r2"><state id="r2a"/><state id="r2b"/></state>
        </parallel>
        """
    )
    statifier.compile(source)


# -- history ----------------------------------------------------------------------------


def test_history_default_target_outside_its_parent() -> None:
    source = chart(
        """
        <state id="a">
          <history id="h">
            <transition target="z"/>
          </history>
          <state id="a1"/>
        </state>
        <state id="z"/>
        """
    )
    assert_reports(source, "history-misuse", 'target="z"')


def test_history_under_the_root() -> None:
    source = chart(
        """
        <state id="a"/>
        <history id="h"/>
        """
    )
    assert_reports(source, "history-misuse", "<history")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('<parallel id="p" initial="q"><state id="q"/></parallel>', "invalid-initial"),
        ('<state id="a"/><final id="f" initial="a"/>', "invalid-initial"),
        (
            '<state id="a"/><final id="f"><transition event="e" target="a"/></final>',
            "invalid-child",
        ),
        ('<state id="a"/><history id="h"/>', "history-misuse"),
        ('<state id="a"/><final id="f"><history id="h"/></final>', "history-misuse"),
    ],
)
def test_one_diagnostic_per_misplaced_initial_transition_or_history(body: str, code: str) -> None:
    """The dedicated check says what is wrong; the generic schema check stays quiet."""
    assert [d.code for d in errors_of(chart(body))] == [code]


# -- mutually exclusive attributes and children -----------------------------------------


@pytest.mark.parametrize(
    ("element", "first", "second"),
    [
        ('<send event="e" eventexpr="\'e\'"/>', "event", "eventexpr"),
        ('<send event="e" delay="1s" delayexpr="\'1s\'"/>', "delay", "delayexpr"),
        (
            '<send event="e" target="#_internal" targetexpr="\'#_internal\'"/>',
            "target",
            "targetexpr",
        ),
        ('<send event="e" id="s1" idlocation="sid"/>', "id", "idlocation"),
        ('<cancel sendid="s1" sendidexpr="\'s1\'"/>', "sendid", "sendidexpr"),
        ('<send event="e"><param name="p" expr="1" location="sid"/></send>', "expr", "location"),
    ],
    ids=[
        "send-event",
        "send-delay",
        "send-target",
        "send-id",
        "cancel-sendid",
        "param-expr-location",
    ],
)
def test_mutually_exclusive_attributes_in_executable_content(
    element: str, first: str, second: str
) -> None:
    source = chart(
        f"""
        <datamodel>
          <data id="sid"/>
        </datamodel>
        <state id="a">
          <onentry>
            {element}
          </onentry>
        </state>
        """
    )
    diagnostic = assert_reports(source, "exclusive-attributes", element)
    assert repr(first) in diagnostic.message
    assert repr(second) in diagnostic.message


def test_data_with_src_and_expr_is_exclusive() -> None:
    source = chart(
        """
        <datamodel>
          <data id="x" src="file.json" expr="1"/>
        </datamodel>
        <state id="a"/>
        """
    )
    diagnostic = assert_reports(source, "exclusive-attributes", 'src="file.json"')
    assert "'src'" in diagnostic.message


def test_send_with_content_and_namelist() -> None:
    source = chart(
        """
        <datamodel>
          <data id="x" expr="1"/>
        </datamodel>
        <state id="a">
          <onentry>
            <send event="e" namelist="x">
              <content>payload</content>
            </send>
          </onentry>
        </state>
        """
    )
    assert_reports(source, "exclusive-children", 'namelist="x"')


# -- values ---------------------------------------------------------------------------


@pytest.mark.parametrize("delay", ["soon", "5", "-1s", "1 fortnight"])
def test_invalid_delay(delay: str) -> None:
    source = chart(
        f"""
        <state id="a">
          <onentry>
            <send event="e" delay="{delay}"/>
          </onentry>
        </state>
        """
    )
    diagnostic = assert_reports(source, "invalid-delay", "<send")
    assert repr(delay) in diagnostic.message


def test_unparsable_cond() -> None:
    source = chart(
        """
        <state id="a">
          <transition event="go" cond="1 +" target="a"/>
        </state>
        """
    )
    assert_reports(source, "invalid-expression", 'cond="1 +"')


def test_unparsable_expr() -> None:
    source = chart(
        """
        <datamodel>
          <data id="x" expr="[1, 2"/>
        </datamodel>
        <state id="a"/>
        """
    )
    assert_reports(source, "invalid-expression", 'expr="[1, 2"')


def test_unparsable_location() -> None:
    source = chart(
        """
        <datamodel>
          <data id="x" expr="1"/>
        </datamodel>
        <state id="a">
          <onentry>
            <assign location="x + 1" expr="2"/>
          </onentry>
        </state>
        """
    )
    assert_reports(source, "invalid-location", 'location="x + 1"')


def test_unsupported_datamodel() -> None:
    source = chart('<state id="a"/>', attrs=' datamodel="xpath"')
    diagnostic = assert_reports(source, "unsupported-datamodel", "<scxml")
    assert "xpath" in diagnostic.message
    assert "ecmascript" in diagnostic.message


def test_bad_binding() -> None:
    source = chart('<state id="a"/>', attrs=' binding="lazy"')
    diagnostic = assert_reports(source, "invalid-attribute", "<scxml")
    assert "binding" in diagnostic.message


def test_valid_bindings_compile() -> None:
    early = statifier.compile(chart('<state id="a"/>', attrs=' binding="early"'))
    late = statifier.compile(chart('<state id="a"/>', attrs=' binding="late"'))
    assert early.late_binding is False
    assert late.late_binding is True


def test_finalize_containing_send() -> None:
    source = chart(
        """
        <state id="a">
          <invoke type="scxml" src="child.scxml">
            <finalize>
              <log expr="1"/>
              <send event="e"/>
            </finalize>
          </invoke>
        </state>
        """
    )
    diagnostics = errors_of(source)
    assert [(d.code, d.line) for d in diagnostics] == [
        ("invalid-child", line_of(source, "<send")),
    ]


def test_raise_without_event() -> None:
    source = chart(
        """
        <state id="a">
          <onentry>
            <raise/>
          </onentry>
        </state>
        """
    )
    assert_reports(source, "missing-attribute", "<raise")


# -- script src ---------------------------------------------------------------------------

SCRIPT_SRC = chart(
    """
    <script src="lib/helpers.py"/>
    <state id="a"/>
    """
)


def test_script_src_without_resolver_is_an_error() -> None:
    diagnostic = assert_reports(SCRIPT_SRC, "unresolved-src", "<script")
    assert "lib/helpers.py" in diagnostic.message


def test_script_src_whose_resolver_fails_is_an_error() -> None:
    def resolver(uri: str) -> str:
        raise FileNotFoundError(uri)

    with pytest.raises(ChartError) as info:
        statifier.compile(SCRIPT_SRC, resolver=resolver)
    assert [d.code for d in info.value.diagnostics] == ["unresolved-src"]


def test_script_src_with_resolver_compiles() -> None:
    asked: list[str] = []

    def resolver(uri: str) -> str:
        asked.append(uri)
        return "answer = 42\n"

    machine = statifier.compile(SCRIPT_SRC, resolver=resolver)
    assert asked == ["lib/helpers.py"]
    assert len(machine.scripts) == 1
    assert machine.resolved_sources == {"lib/helpers.py": "answer = 42\n"}


# -- several errors -----------------------------------------------------------------------


def test_every_error_is_reported_each_with_its_own_line() -> None:
    source = chart(
        """
        <state id="a">
          <transition event="go" target="nowhere"/>
        </state>
        <state id="b" shape="round"/>
        <state id="c">
          <onentry>
            <send event="tick" delay="soon"/>
          </onentry>
        </state>
        """
    )
    diagnostics = errors_of(source)
    found = {(d.code, d.line) for d in diagnostics}
    assert found == {
        ("unknown-target", line_of(source, "nowhere")),
        ("unknown-attribute", line_of(source, "shape=")),
        ("invalid-delay", line_of(source, 'delay="soon"')),
    }
    assert len(diagnostics) == 3
    assert len({d.line for d in diagnostics}) == 3


def test_chart_error_message_summarises_the_count_and_first_error() -> None:
    source = chart(
        """
        <state id="a">
          <transition event="go" target="nowhere"/>
          <transition event="go" target="elsewhere"/>
        </state>
        """
    )
    with pytest.raises(ChartError) as info:
        statifier.compile(source)
    assert str(info.value).startswith("2 error(s) in chart; first at 3:")


# -- valid charts -----------------------------------------------------------------------

REPRESENTATIVE = chart(
    """
    <datamodel>
      <data id="items" expr="[1, 2, 3]"/>
      <data id="total" expr="0"/>
    </datamodel>
    <state id="work" initial="busy">
      <history id="work_hist" type="deep">
        <transition target="step2"/>
      </history>
      <state id="busy">
        <history id="busy_hist">
          <transition target="step1"/>
        </history>
        <state id="step1">
          <onentry>
            <foreach array="items" item="item" index="i">
              <assign location="total" expr="total + item"/>
            </foreach>
            <if cond="total &gt; 5">
              <log label="big" expr="total"/>
            <elseif cond="total &gt; 2"/>
              <raise event="medium"/>
            <else/>
              <send event="small" delay="250ms"/>
            </if>
          </onentry>
          <transition event="next" target="step2"/>
        </state>
        <state id="step2">
          <transition event="pause" target="paused"/>
        </state>
      </state>
      <transition event="finish" target="both"/>
    </state>
    <state id="paused">
      <transition event="resume" target="work_hist"/>
      <transition event="resume.shallow" target="busy_hist"/>
    </state>
    <parallel id="both">
      <state id="left">
        <invoke id="child" type="scxml" src="child.scxml">
          <param name="n" expr="total"/>
          <finalize>
            <assign location="total" expr="_event.data"/>
          </finalize>
        </invoke>
        <state id="left1"/>
      </state>
      <state id="right">
        <state id="right1">
          <transition event="done.invoke.child" target="end"/>
        </state>
      </state>
    </parallel>
    <final id="end">
      <donedata>
        <param name="total" expr="total"/>
      </donedata>
    </final>
    """,
    attrs=' name="representative" initial="work"',
)


def test_representative_valid_chart_compiles() -> None:
    machine = statifier.compile(REPRESENTATIVE)
    assert machine.warnings == ()
    assert machine.name == "representative"
    assert machine.state("both").kind == "parallel"
    assert machine.state("work_hist").kind == "history"
    assert machine.state("work_hist").history_deep is True
    assert machine.state("busy_hist").history_deep is False
    (invoke,) = machine.state("left").invokes
    assert invoke.id == "child"
    assert len(invoke.finalize) == 1
    done = machine.state("end").donedata
    assert done is not None
    assert [p.name for p in done.params] == ["total"]
    assert any(isinstance(node, ForeachNode) for node in machine.content)
    (if_node,) = [n for n in machine.content if isinstance(n, IfNode)]
    assert [cond is None for cond, _ in if_node.branches] == [False, False, True]


def test_minimal_chart_compiles() -> None:
    machine = statifier.compile(chart('<final id="done"/>'))
    assert [s.id for s in machine.states[1:]] == ["done"]
    assert machine.datamodel == "python"


def test_null_datamodel_compiles() -> None:
    machine = statifier.compile(chart('<state id="a"/>', attrs=' datamodel="null"'))
    assert machine.datamodel == "null"


def test_bytes_and_str_sources_compile_to_the_same_chart() -> None:
    source = chart('<state id="a"><transition event="e" target="a"/></state>')
    assert statifier.compile(source).identity == statifier.compile(source.encode()).identity
