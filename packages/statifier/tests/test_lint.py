"""``statifier.chart.lint`` and ``statifier check``: one test per kind of warning."""

from __future__ import annotations

from pathlib import Path

import pytest
import statifier
from statifier.chart.lint import lint
from statifier.cli import main
from statifier.errors import ChartError, Diagnostic

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def chart(body: str, *, initial: str = "a", datamodel: str = "") -> str:
    return f'<scxml {NS} initial="{initial}">\n{datamodel}{body}</scxml>\n'


def codes(source: str) -> list[tuple[str, int]]:
    return [(d.code, d.line) for d in lint(statifier.compile(source))]


def only(source: str, code: str) -> Diagnostic:
    (found,) = [d for d in lint(statifier.compile(source)) if d.code == code]
    return found


def test_typo_in_a_condition_is_an_undefined_name_with_a_suggestion() -> None:
    source = chart(
        """  <state id="a">
    <transition event="go" cond="capturez &lt; 3" target="b"/>
  </state>
  <final id="b"/>
""",
        datamodel='  <datamodel><data id="captures" expr="0"/></datamodel>\n',
    )
    found = only(source, "undefined-name")
    assert found.severity == "warning"
    assert (found.line, found.column) == (4, 5)
    assert "condition 'capturez < 3' reads 'capturez'" in found.message
    assert found.message.endswith("did you mean 'captures'?")


def test_names_defined_by_data_system_variables_foreach_and_scripts_are_fine() -> None:
    source = chart(
        """  <script>total = 0</script>
  <state id="a">
    <onentry>
      <foreach array="items" item="item" index="i">
        <assign location="total" expr="total + item + i"/>
      </foreach>
      <log expr="[x for x in items if x] + [_sessionid, _name, _event, _ioprocessors]"/>
    </onentry>
  </state>
""",
        datamodel='  <datamodel><data id="items" expr="[1, 2]"/></datamodel>\n',
    )
    assert [c for c in codes(source) if c[0] == "undefined-name"] == []


def test_assigning_to_an_undeclared_location_is_reported() -> None:
    source = chart(
        """  <state id="a">
    <onentry><assign location="totl" expr="1"/></onentry>
  </state>
""",
        datamodel='  <datamodel><data id="total" expr="0"/></datamodel>\n',
    )
    found = only(source, "undefined-name")
    assert "assigns to 'totl', which nothing declares" in found.message
    assert "did you mean 'total'?" in found.message


def test_ecmascript_script_variables_may_be_assigned_and_typos_are_still_reported() -> None:
    """``var``, function declarations and plain assignments in an ECMAScript ``<script>``
    make chart variables (editors' charts declare their variables this way); a name
    that only appears in a string, a comment or after a dot does not."""
    source = chart(
        """  <script>
    var counter = 0, order = {phase: 'new'};
    function bump(by) { return counter + by; }
    total = 0; seen += 1;
    // var commented = 1;
    String("var quoted = 1"); config.nested = 2;
  </script>
  <state id="a">
    <onentry>
      <assign location="counter" expr="bump(1)"/>
      <assign location="order.phase" expr="'paid'"/>
      <assign location="total" expr="5"/>
      <assign location="seen" expr="1"/>
      <assign location="bump" expr="null"/>
      <assign location="countr" expr="1"/>
      <assign location="commented" expr="1"/>
      <assign location="quoted" expr="1"/>
      <assign location="nested" expr="1"/>
    </onentry>
  </state>
""",
        datamodel='  <datamodel><data id="config" expr="({})"/></datamodel>\n',
    ).replace("<scxml ", '<scxml datamodel="ecmascript" ')
    found = [d.message for d in lint(statifier.compile(source)) if d.code == "undefined-name"]
    assert [m.split("'")[1] for m in found] == ["countr", "commented", "quoted", "nested"]
    assert "did you mean 'counter'?" in found[0]


def test_ecmascript_expressions_report_undefined_names_with_a_suggestion() -> None:
    """Names are read from the syntax tree: built-in globals, host functions, a function's
    own parameters and locals, property names and strings are not variables."""
    source = chart(
        """  <script>function within(a, b) { var lo = Math.min(a, b); return lo &lt; limit }
  </script>
  <state id="a">
    <transition event="go" cond="within(captures, 3) &amp;&amp; score(captures) &gt; 1
        &amp;&amp; JSON.stringify({capturez: 'capturez'}).length &gt; 0
        &amp;&amp; [1].every(function (x) { return x &gt; 0 }) &amp;&amp; capturez" target="b"/>
  </state>
  <final id="b"/>
""",
        datamodel='  <datamodel><data id="captures" expr="0"/><data id="limit"/></datamodel>\n',
    ).replace("<scxml ", '<scxml datamodel="ecmascript" ')
    machine = statifier.compile(source, functions={"score": len})
    found = [d for d in lint(machine) if d.code == "undefined-name"]
    assert [d.message.split("reads ")[1].split(",")[0] for d in found] == ["'capturez'"]
    assert "did you mean 'captures'?" in found[0].message
    assert found[0].line == 6


def test_a_const_at_the_top_of_an_ecmascript_script_read_elsewhere_is_reported() -> None:
    """A script runs as eval code: its top-level ``let``, ``const`` and ``class`` stay local
    to it, so a condition that reads one fails at run time with a ReferenceError."""
    source = chart(
        """  <script>
    const LIMIT = 5;
    let scratch = 0; scratch += 1;
    var shared = 1;
    function f() { const inner = 2; return inner; }
  </script>
  <state id="a">
    <transition event="go" cond="shared &lt; LIMIT" target="b"/>
  </state>
  <final id="b"/>
"""
    ).replace("<scxml ", '<scxml datamodel="ecmascript" ')
    (found,) = [d for d in lint(statifier.compile(source)) if d.code == "script-local"]
    assert found.severity == "warning"
    assert "'LIMIT'" in found.message
    assert "use var" in found.message


def test_unreachable_state_is_reported_once_for_the_outermost() -> None:
    source = chart(
        """  <state id="a"><transition event="go" target="b"/></state>
  <final id="b"/>
  <state id="island">
    <state id="inner"/>
  </state>
"""
    )
    found = only(source, "unreachable-state")
    assert found.line == 4
    assert "'island' can never be entered" in found.message


def test_states_entered_by_initial_parallel_and_history_are_reachable() -> None:
    source = chart(
        """  <state id="a" initial="a2">
    <history id="h"><transition target="a1"/></history>
    <state id="a1"><transition event="x" target="p"/></state>
    <state id="a2"><transition event="y" target="h"/></state>
  </state>
  <parallel id="p">
    <state id="r1"/>
    <state id="r2"/>
  </parallel>
"""
    )
    assert [c for c in codes(source) if c[0] == "unreachable-state"] == []


def test_transition_shadowed_by_an_earlier_unconditional_one_is_dead() -> None:
    source = chart(
        """  <state id="a">
    <transition event="capture" target="b"/>
    <transition event="capture.requested" target="c"/>
    <transition event="capture.requested" cond="True" target="c"/>
  </state>
  <final id="b"/>
  <final id="c"/>
"""
    )
    dead = [d for d in lint(statifier.compile(source)) if d.code == "dead-transition"]
    assert [d.line for d in dead] == [4, 5]
    assert "the unconditional transition on line 3 ('capture') comes first" in dead[0].message


def test_event_transitions_of_a_state_that_always_leaves_are_dead() -> None:
    source = chart(
        """  <state id="a">
    <transition event="go" target="b"/>
    <transition target="b"/>
  </state>
  <final id="b"/>
"""
    )
    found = only(source, "dead-transition")
    assert found.line == 3
    assert "always leaves at once" in found.message


def test_events_nothing_raises_are_informational() -> None:
    source = chart(
        """  <state id="a">
    <onentry><raise event="inside"/><send event="later" delay="1s"/></onentry>
    <transition event="inside" target="b"/>
  </state>
  <state id="b">
    <transition event="later" target="c"/>
    <transition event="error.execution" target="c"/>
  </state>
  <state id="c" initial="c1">
    <state id="c1"><transition event="outside" target="c2"/></state>
    <final id="c2"/>
    <transition event="done.state.c" target="d"/>
  </state>
  <final id="d"/>
"""
    )
    found = only(source, "external-event")
    assert found.severity == "info"
    assert "'outside': it must come from outside" in found.message


def test_an_unparsable_expr_is_one_diagnostic() -> None:
    source = chart(
        """  <state id="a">
    <onentry>
      <assign location="x" expr="1 +"/>
      <send event="e"><param name="p" expr="(("/></send>
    </onentry>
  </state>
""",
        datamodel='  <datamodel><data id="x" expr="0"/></datamodel>\n',
    )
    with pytest.raises(ChartError) as failure:
        statifier.compile(source)
    assert [d.code for d in failure.value.diagnostics] == [
        "invalid-expression",
        "invalid-expression",
    ]


def test_did_you_mean_for_targets_elements_and_attributes() -> None:
    source = chart(
        """  <state id="authorized">
    <transiton event="a" target="b"/>
    <transition event="go" target="autorized" evnt="x"/>
  </state>
""",
        initial="authorized",
    )
    with pytest.raises(ChartError) as failure:
        statifier.compile(source)
    messages = sorted(d.message for d in failure.value.diagnostics)
    assert messages == [
        "<transition> has no attribute 'evnt'; did you mean 'event'?",
        "transition target 'autorized' is not a state id; did you mean 'authorized'?",
        "unknown SCXML element <transiton>; did you mean 'transition'?",
    ]


def test_check_prints_warnings_and_exits_0_unless_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "typo.scxml"
    path.write_text(
        chart(
            """  <state id="a"><transition event="go" cond="capturez" target="b"/></state>
  <final id="b"/>
  <state id="island"/>
""",
            datamodel='  <datamodel><data id="captures" expr="0"/></datamodel>\n',
        )
    )
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{path}:3:17: info: nothing in the chart raises or sends 'go'")
    assert out[1].startswith(f"{path}:3:17: warning: condition 'capturez' reads 'capturez'")
    assert out[2].startswith(f"{path}:5:3: warning: state 'island' can never be entered")
    assert out[3] == f"{path}: ok (3 states, 2 transitions, 2 warnings, 1 note)"
    assert main(["check", "--strict", str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"{path}: failed (3 states, 2 transitions, 2 warnings, 1 note; --strict)"
    )


def test_the_example_charts_have_no_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    examples = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.scxml"))
    assert examples
    assert main(["check", "--strict", *map(str, examples)]) == 0
    assert ": warning:" not in capsys.readouterr().out


PAYMENT = """  <state id="a">
    <onentry><send event="payment.timeout" delay="15min"/></onentry>
    <transition event="payment.timout" target="b"/>
    <transition event="paid" target="b"/>
  </state>
  <final id="b"/>
"""


def test_a_misspelled_transition_event_and_the_event_it_drops_are_both_warnings() -> None:
    found = {d.code: d for d in lint(statifier.compile(chart(PAYMENT)))}
    unhandled, misspelled = found["unhandled-event"], found["misspelled-event"]
    assert (unhandled.severity, unhandled.line) == ("warning", 3)
    assert unhandled.message == (
        "the chart sends itself 'payment.timeout' but no transition handles it: the event "
        "is dropped; did you mean 'payment.timout'?"
    )
    assert (misspelled.severity, misspelled.line) == ("warning", 4)
    assert "'payment.timout', but it sends 'payment.timeout', one edit away" in (misspelled.message)
    # One diagnostic per problem: the misspelled event is not also an external one (the
    # only external-event note left is 'paid').
    externals = [d for d in lint(statifier.compile(chart(PAYMENT))) if d.code == "external-event"]
    assert [d.line for d in externals] == [5]


def test_a_handled_self_send_or_raise_is_no_warning() -> None:
    source = chart(
        """  <state id="a">
    <onentry>
      <send event="tick" delay="1s"/>
      <send event="later" target="#_internal"/>
      <raise event="step.done"/>
    </onentry>
    <transition event="tick" target="a"/>
    <transition event="later" target="a"/>
    <transition event="step.*" target="b"/>
  </state>
  <final id="b"/>
"""
    )
    assert [c for c, _ in codes(source) if c in ("unhandled-event", "misspelled-event")] == []


def test_a_raise_nothing_handles_is_a_warning_but_a_send_elsewhere_is_not() -> None:
    source = chart(
        """  <state id="a">
    <onentry>
      <raise event="orphan"/>
      <send event="to.parent" target="#_parent"/>
      <send event="to.other" targetexpr="'#_internal'"/>
    </onentry>
  </state>
"""
    )
    unhandled = [d for d in lint(statifier.compile(source)) if d.code == "unhandled-event"]
    assert [(d.line, d.message) for d in unhandled] == [
        (4, "the chart raises 'orphan' but no transition handles it: the event is dropped")
    ]


@pytest.mark.parametrize(
    ("waited", "warned"),
    [
        ("payment.timeot", True),  # one replaced
        ("payment.timeoutt", True),  # one inserted
        ("payment.tiemout", True),  # two neighbours swapped
        ("payment.tmout", False),  # two edits away: only a did-you-mean note
        ("payment.*", False),  # a wildcard is not a typo
    ],
)
def test_misspelled_means_exactly_one_edit_away(waited: str, warned: bool) -> None:
    source = chart(
        f"""  <state id="a">
    <onentry><raise event="payment.timeout"/></onentry>
    <transition event="{waited}" target="b"/>
    <transition event="payment.timeout" target="b"/>
  </state>
  <final id="b"/>
"""
    )
    assert ("misspelled-event" in {c for c, _ in codes(source)}) is warned


def test_check_strict_fails_on_an_unhandled_self_sent_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "payment.scxml"
    path.write_text(chart(PAYMENT))
    assert main(["check", str(path)]) == 0
    assert main(["check", "--strict", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:3:14: warning: the chart sends itself 'payment.timeout'" in out
    assert "[unhandled-event]" in out
    assert "[misspelled-event]" in out
