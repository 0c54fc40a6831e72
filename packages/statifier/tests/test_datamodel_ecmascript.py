"""The ECMAScript datamodel (ADR 10): SCXML B.2 binding rules, refusals, storage rules."""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from statifier.budget import MacrostepLimits
from statifier.core import effects as fx
from statifier.core.position import dumps, loads
from statifier.datamodel import (
    EvaluationError,
    ExpressionSyntaxError,
    datamodel_for,
    stored_variables,
)
from statifier.virtual import VirtualDriver, run_chart

ECMA = datamodel_for("ecmascript")
NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


def never(_state_id: str) -> bool:
    return False


def chart(body: str, *, attrs: str = "") -> statifier.Machine:
    return statifier.compile(f"<scxml {NS}{attrs}>{body}</scxml>")


def outcome(body: str, **kwargs: Any) -> tuple[str, ...]:
    return run_chart(chart(body), **kwargs).configuration


PASS_FAIL = '<final id="pass"/><final id="fail"/>'  # noqa: S105 - two final states


def system(**extra: Any) -> dict[str, Any]:
    location = {"location": "#_scxml_s1"}
    variables: dict[str, Any] = {
        "_sessionid": "s1",
        "_name": "machine",
        "_ioprocessors": {"scxml": location},
        "_event": None,
    }
    variables.update(extra)
    return variables


# -- binding rules (SCXML B.2) -----------------------------------------------------------


def test_event_fields_are_bound_and_blank_ones_undefined() -> None:
    event: dict[str, Any] = {"name": "go", "type": "external", "sendid": None, "origin": None}
    event |= {"origintype": None, "invokeid": None, "data": {"k": [1, None]}}
    variables = system(_event=event)
    fields = ["name", "type", "sendid", "origin", "origintype", "invokeid", "data"]
    present = " && ".join(f"'{f}' in _event" for f in fields)
    assert ECMA.compile_expression(present).evaluate(variables, never) is True
    assert ECMA.compile_expression("typeof _event.sendid").evaluate(variables, never) == (
        "undefined"
    )
    assert ECMA.compile_expression("_event.data.k[1] === null").evaluate(variables, never)
    assert ECMA.compile_expression("typeof _event").evaluate(system(), never) == "undefined"


def test_session_name_and_ioprocessors() -> None:
    variables = system()
    expression = "_sessionid + ':' + _name + ':' + _ioprocessors.scxml.location"
    assert ECMA.compile_expression(expression).evaluate(variables, never) == (
        "s1:machine:#_scxml_s1"
    )


def test_in_answers_literal_and_dynamic_ids() -> None:
    assert ECMA.compile_expression("In('a') && !In('b')").evaluate(system(), lambda s: s == "a")
    with pytest.raises(EvaluationError, match="string literal"):
        ECMA.compile_expression("(function (id) { return In(id) }).call(null, 'a')").evaluate(
            system(), lambda s: s == "a"
        )
    chart_in = chart(
        '<script>function active(id) { return In(id) }</script><state id="a">'
        "<transition cond=\"active('a') &amp;&amp; !active('b')\" target=\"pass\"/>"
        f'<transition target="fail"/></state>{PASS_FAIL}'
    )
    assert run_chart(chart_in).configuration == ("pass",)


def test_in_answers_stay_right_when_calls_and_plain_reads_alternate() -> None:
    machine = chart(
        """
        <datamodel><data id="n" expr="1"/><data id="seen" expr="[]"/></datamodel>
        <script>function active(id) { return In(id) }</script>
        <parallel id="p">
          <state id="r1" initial="a">
            <state id="a"><transition event="flip" target="b"/></state>
            <state id="b"><transition event="flip" target="a"/></state>
          </state>
          <state id="r2">
            <transition event="look" cond="n + 1 === 2">
              <assign location="seen" expr="seen.concat([[active('a'), active('b')]])"/>
              <assign location="seen" expr="seen.concat([[In('a'), n + 1]])"/>
            </transition>
          </state>
        </parallel>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_in")
    for name in ("look", "flip", "look", "flip", "look"):
        state, _ = statifier.handle_event(state, name)
    assert loads(dumps(state), machine).datamodel["seen"] == [
        [True, False],
        [True, 2],
        [False, True],
        [False, 2],
        [True, False],
        [True, 2],
    ]


@pytest.mark.parametrize(
    ("data", "check"),
    [
        ('<data id="v" expr="[1, 2].map(function (x) { return x * 2 })"/>', "v[1] === 4"),
        (
            '<data id="v">{"a": [1, 2, 3]}</data>',
            "v.a instanceof Array &amp;&amp; v.a.length === 3",
        ),
        ('<data id="v">  some\n   text </data>', "v === 'some text'"),
        ('<data id="v"/>', "typeof v === 'undefined'"),
        ('<data id="v" expr="function (x) { return x + 1 }"/>', "v(2) === 3"),
    ],
)
def test_data_from_expr_inline_json_and_text(data: str, check: str) -> None:
    body = (
        f'<datamodel>{data}</datamodel><state id="s">'
        f'<transition cond="{check}" target="pass"/><transition target="fail"/></state>'
        f"{PASS_FAIL}"
    )
    assert outcome(body) == ("pass",)


def test_assign_with_member_access_and_a_script() -> None:
    body = (
        '<datamodel><data id="o" expr="({a: {b: 1}, list: [1, 2]})"/></datamodel>'
        "<script>function Point(x) { this.x = x }</script>"
        '<state id="s"><onentry><assign location="o.a.b" expr="o.a.b + 1"/>'
        '<assign location="o.list[0]" expr="new Point(7)"/>'
        "<script>o.count = o.list.length; o.list.push(3)</script></onentry>"
        '<transition cond="o.a.b === 2 &amp;&amp; o.list[0].x === 7 &amp;&amp; o.count === 2'
        ' &amp;&amp; o.list.length === 3" target="pass"/><transition target="fail"/></state>'
        f"{PASS_FAIL}"
    )
    assert outcome(body) == ("pass",)


def test_foreach_over_an_array_iterates_a_copy() -> None:
    body = (
        '<datamodel><data id="a" expr="[1, 2, 3]"/><data id="sum" expr="0"/></datamodel>'
        '<state id="s"><onentry><foreach array="a" item="x" index="i">'
        '<assign location="sum" expr="sum + x * 10 + i"/>'
        '<assign location="a" expr="a.concat([9])"/></foreach></onentry>'
        '<transition cond="sum === 63 &amp;&amp; a.length === 6" target="pass"/>'
        f'<transition target="fail"/></state>{PASS_FAIL}'
    )
    assert outcome(body) == ("pass",)


def test_script_src_goes_through_the_resolver() -> None:
    sources = {"lib.js": "function twice(x) { return 2 * x }"}
    machine = statifier.compile(
        f'<scxml {NS}><script src="lib.js"/><datamodel><data id="v" expr="0"/></datamodel>'
        '<state id="s"><onentry><assign location="v" expr="twice(21)"/></onentry>'
        f'<transition cond="v === 42" target="pass"/><transition target="fail"/></state>'
        f"{PASS_FAIL}</scxml>",
        resolver=sources.__getitem__,
    )
    assert run_chart(machine).configuration == ("pass",)


def errors_of(body: str) -> list[str]:
    run = run_chart(chart(body))
    return [e.message for e in run.effects if isinstance(e, fx.ErrorRaised)]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('<assign location="_sessionid" expr="1"/>', "read-only system variable"),
        ('<assign location="_event" expr="1"/>', "read-only system variable"),
        ("<script>_name = 'x'</script>", "cannot assign to the system variable _name"),
        ("<script>_ioprocessors = 1</script>", "cannot assign to the system variable"),
        ('<assign location="nope.x" expr="1"/>', "not declared"),
        ('<assign location="v.a.b" expr="1"/>', "TypeError"),
        ('<log expr="undefinedName"/>', "ReferenceError"),
        ('<log expr="return"/>', "SyntaxError"),
        ('<assign location="v" expr="1 +"/>', "cannot assign to 'v': SyntaxError"),
        ('<assign location="v" expr="1"/><assign location="v" expr="1 +"/>', "'v': SyntaxError"),
        ('<assign location="v" expr="1"/><log expr="v +"/>', "'v +': SyntaxError"),
        ('<foreach array="v +" item="x"/>', "'v +': SyntaxError"),
        ('<foreach array="v" item="x"/>', "is not a list"),
        ('<foreach array="[1]" item="\'continue\'"/>', "not a variable name"),
        ('<send event="e" namelist="&quot;foo"/>', "SyntaxError"),
        ("<script>throw new Error('boom')</script>", "boom"),
    ],
)
def test_every_failure_is_error_execution(content: str, reason: str) -> None:
    body = (
        f'<datamodel><data id="v" expr="7"/></datamodel><state id="s"><onentry>{content}'
        '</onentry><transition event="error.execution" target="pass"/>'
        f'<transition event="*" target="fail"/></state>{PASS_FAIL}'
    )
    assert outcome(body) == ("pass",)
    assert any(reason in message for message in errors_of(body)), errors_of(body)


def test_a_failed_script_changes_nothing() -> None:
    variables = system(v=1)
    with pytest.raises(EvaluationError, match="late"):
        ECMA.compile_script("v = 2; w = 3; throw new Error('late')").run(
            variables, never, lambda _n: True
        )
    assert variables == system(v=1)
    assert ECMA.compile_expression("v").evaluate(variables, never) == 1
    with pytest.raises(EvaluationError, match="ReferenceError"):
        ECMA.compile_expression("w").evaluate(variables, never)


def test_condition_side_effects_are_kept() -> None:
    body = (
        '<datamodel><data id="n" expr="1"/></datamodel><state id="s">'
        '<transition cond="++n == 2" target="t"/></state><state id="t">'
        f'<transition cond="n === 2" target="pass"/><transition target="fail"/></state>'
        f"{PASS_FAIL}"
    )
    assert outcome(body) == ("pass",)


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("while (true) {}", "interrupted"),
        ("var a = []; while (true) { a.push('x'.repeat(1000) + a.length) }", "out of memory"),
        ("var s = 'x'; while (true) { s = s + s }", "string too long|out of memory"),
        ("function f() { return f() } f()", "stack"),
        ("Math.random()", "Math.random is not available"),
        ("Date.now()", "Date is not defined"),
        ("new Date()", "Date is not defined"),
        ("performance.now()", "performance is not defined"),
        ("require('fs')", "require is not defined"),
        ("globalThis.process.exit()", "TypeError"),
        ("std.loadFile('/etc/passwd')", "std is not defined"),
        ("os.exec(['ls'])", "os is not defined"),
        ("console.log(1)", "console is not defined"),
    ],
)
def test_refusals(source: str, reason: str) -> None:
    variables = system(v=1)
    with pytest.raises(EvaluationError, match=reason):
        ECMA.compile_script(source).run(variables, never, lambda _n: True)
    assert variables == system(v=1)
    # The engine is usable afterwards and still holds the stored values.
    assert ECMA.compile_expression("v + 1").evaluate(variables, never) == 2


def test_builtins_are_frozen_for_every_chart() -> None:
    variables = system()
    ECMA.compile_script(
        "Array.prototype.evil = 1; Object.prototype.polluted = 2; JSON.parse = null; Math.PI = 3"
    ).run(variables, never, lambda _n: True)
    check = "[typeof [].evil, typeof ({}).polluted, typeof JSON.parse, Math.PI > 3.14]"
    assert ECMA.compile_expression(check).evaluate(variables, never) == [
        "undefined",
        "undefined",
        "function",
        True,
    ]


def test_globals_of_one_session_do_not_leak_into_another() -> None:
    first = system(a=1)
    ECMA.compile_script("var secret = 42").run(first, never, lambda _n: True)
    second = system(b=1)
    assert ECMA.compile_expression("typeof secret").evaluate(second, never) == "undefined"
    assert ECMA.compile_expression("secret").evaluate(first, never) == 42


def test_syntax_errors_are_compile_warnings_and_runtime_errors() -> None:
    with pytest.raises(ExpressionSyntaxError):
        ECMA.compile_expression("1 +")
    with pytest.raises(ExpressionSyntaxError):
        ECMA.compile_expression("1); x = 1; (1")
    machine = chart(f'<state id="s"><transition cond="1 +" target="fail"/></state>{PASS_FAIL}')
    assert [w.code for w in machine.warnings] == ["invalid-expression"]


def test_a_missing_extra_is_a_typed_chart_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    real = importlib.import_module

    def without_quickjs(name: str, package: str | None = None) -> Any:
        if name == "_quickjs":
            raise ImportError("no quickjs")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without_quickjs)
    with pytest.raises(statifier.ChartError) as info:
        chart('<state id="s"/>')
    assert info.value.diagnostics[0].code == "datamodel-unavailable"
    assert "statifier[ecmascript]" in info.value.diagnostics[0].message


# -- storage: positions stay JSON ------------------------------------------------------


STORED = (
    '<datamodel><data id="n" expr="null"/><data id="o" expr="({a: [1, null], b: undefined})"/>'
    '<data id="f" expr="function (x) { return x * 3 }"/><data id="nan" expr="NaN"/>'
    '<data id="u"/></datamodel>'
)


def test_position_round_trip_and_continue_elsewhere() -> None:
    machine = chart(
        f'{STORED}<state id="s"><transition event="go" cond="f(2) === 6 &amp;&amp;'
        " o.a[1] === null &amp;&amp; 'b' in o &amp;&amp; o.b === undefined"
        " &amp;&amp; n === null &amp;&amp; isNaN(nan) &amp;&amp; typeof u === 'undefined'\""
        ' target="pass"/>'
        f'<transition event="go" target="fail"/></state>{PASS_FAIL}'
    )
    state, _ = statifier.initialize(machine, session_id="sess_js")
    stored = stored_variables(state.datamodel)
    assert stored["f"] == {"$function": "function (x) { return x * 3 }"}
    assert stored["o"] == {"a": [1, None], "b": {"$undefined": True}}
    assert stored["n"] == {"$null": True}
    assert stored["nan"] == {"$number": "NaN"}
    assert stored["u"] is None
    # What users read is plain data, as JSON.stringify writes it.
    assert {name: state.datamodel[name] for name in ("f", "o", "n", "nan", "u")} == {
        "f": None,
        "o": {"a": [1, None]},
        "n": None,
        "nan": None,
        "u": None,
    }
    restored = loads(dumps(state), machine)
    assert restored == state
    _, effects = statifier.handle_event(restored, "go")
    assert [e.configuration for e in effects if isinstance(e, fx.Done)] == [("pass",)]


def test_replay_gives_the_same_effects() -> None:
    machine = chart(
        '<datamodel><data id="log" expr="[]"/></datamodel><state id="s">'
        '<transition event="e" target="s"><script>log.push(_event.data.k * 2)</script>'
        f'<log expr="JSON.stringify(log)"/></transition></state>{PASS_FAIL}'
    )
    runs = []
    for _ in range(2):
        state, effects = statifier.initialize(machine, session_id="sess_replay")
        for k in range(3):
            state, more = statifier.handle_event(state, statifier.Event(name="e", data={"k": k}))
            effects += more
        runs.append(effects)
    assert runs[0] == runs[1]
    logs = [e.value for e in runs[0] if isinstance(e, fx.Log)]
    assert logs == ["[0]", "[0,2]", "[0,2,4]"]


def test_delayed_send_on_the_virtual_driver() -> None:
    machine = chart(
        '<datamodel><data id="ticks" expr="0"/><data id="sid"/></datamodel><state id="s"><onentry>'
        '<send event="tick" delayexpr="\'2s\'" idlocation="sid"/></onentry>'
        '<transition event="tick" cond="sid.indexOf(\'send_\') === 0" target="t">'
        '<assign location="ticks" expr="ticks + 1"/></transition></state>'
        '<state id="t"><transition cond="ticks === 1" target="pass"/></state>'
        '<final id="pass"/>',
        attrs="",
    )
    driver = VirtualDriver(machine, session_id="sess_timer")
    driver.start()
    driver.run_until_idle()
    assert [t.effect.delay_ms for t in driver.pending_timers()] == [2000]
    blob = dumps(driver.state)
    driver.advance(1999)
    assert driver.state.configuration_ids() == ("s",)
    driver.advance(1)
    assert [e.configuration for e in driver.effects if isinstance(e, fx.Done)] == [("pass",)]
    assert loads(blob, machine).datamodel["sid"] == "send_1"


# -- the macrostep's datamodel cap holds for side effects too (ADR 11) -----------------------


@pytest.mark.parametrize(
    "element",
    [
        "<log expr=\"(big = 'x'.repeat(5000)).length\"/>",  # an expression's side effect
        "<script>big = 'x'.repeat(5000);</script>",  # a script
        '<assign location="other[(big = \'x\'.repeat(5000)).length % 1]" expr="1"/>',
    ],
    ids=["expression", "script", "location"],
)
def test_a_side_effect_write_past_the_datamodel_cap_is_refused(element: str) -> None:
    machine = chart(
        '<datamodel><data id="big" expr="0"/><data id="other" expr="[0]"/></datamodel>'
        f'<state id="s"><onentry>{element}</onentry></state>'
    )
    limits = MacrostepLimits(datamodel_bytes=2_000)
    state, effects = statifier.initialize(machine, session_id="s1", limits=limits)
    raised = [e for e in effects if isinstance(e, fx.ErrorRaised)]
    assert [e.name for e in raised] == ["error.execution"]
    assert "big" in raised[0].message
    assert state.datamodel["big"] == 0  # nothing of the refused call was applied
    assert state.datamodel["other"] == [0]


def test_long_strings_built_by_concatenation_cross_into_python() -> None:
    """QuickJS keeps a long concatenation as a rope, which its Python binding cannot
    convert: every string the sandbox hands out is made flat first."""
    machine = chart(
        """<datamodel><data id="s" expr="'a'.repeat(600) + 'b'.repeat(600)"/></datamodel>
        <state id="x"><onentry>
          <log label="twice" expr="s + s"/>
          <assign location="s" expr="s + 'c'.repeat(900)"/>
          <script>var t = s + '!';</script>
        </onentry></state>"""
    )
    state, effects = statifier.initialize(machine, session_id="s1")
    assert [e for e in effects if isinstance(e, fx.ErrorRaised)] == []
    assert [len(e.value) for e in effects if isinstance(e, fx.Log)] == [2400]
    assert len(state.datamodel["s"]) == 2100
    assert state.datamodel["t"] == state.datamodel["s"] + "!"


def test_strings_with_nul_or_lone_surrogates_cross_into_python_whole() -> None:
    """The binding converts a string through a C string and UTF-8: a NUL would cut it short
    and a lone surrogate (half of an emoji, as ``slice`` leaves it) would fail to convert.
    Such strings cross as JSON instead, the way they do inside arrays and objects."""
    machine = chart(
        """<datamodel><data id="nul" expr="null"/><data id="half" expr="null"/></datamodel>
        <state id="x">
          <transition event="e">
            <assign location="nul" expr="_event.data.text"/>
            <assign location="half" expr="_event.data.emoji.slice(0, 1)"/>
            <log label="both" expr="nul + half"/>
          </transition>
        </state>"""
    )
    state, _ = statifier.initialize(machine, session_id="s1")
    event = statifier.Event(name="e", data={"text": "a\x00b", "emoji": "\U0001f600!"})
    state, effects = statifier.handle_event(state, event)
    assert [e for e in effects if isinstance(e, fx.ErrorRaised)] == []
    assert state.datamodel["nul"] == "a\x00b"
    assert state.datamodel["half"] == "\ud83d"
    assert [e.value for e in effects if isinstance(e, fx.Log)] == ["a\x00b\ud83d"]
    restored = loads(dumps(state), machine)
    assert restored.datamodel["nul"] == "a\x00b"
    assert restored.datamodel["half"] == "\ud83d"


def test_slow_calls_spend_the_macrostep_budget_by_their_time() -> None:
    """Each call is bounded by its CPU limit, and a cheap call costs a fixed ``CALL_COST``
    (deterministic); a call that runs longer than that is charged for its time, so an
    eventless loop whose condition spins ends after a bounded time, not after 10,000 rounds
    of a full second each."""
    machine = chart(
        """<datamodel><data id="n" expr="0"/></datamodel>
        <state id="a">
          <transition target="b"
              cond="(function () { var i = 0; while (i &lt; 1e6) i++; return true; })()">
            <assign location="n" expr="n + 1"/>
          </transition>
        </state>
        <state id="b"><transition target="a"/></state>"""
    )
    limits = MacrostepLimits(steps=400_000)
    state, effects = statifier.initialize(machine, session_id="s1", limits=limits)
    (exhausted,) = [e for e in effects if isinstance(e, fx.BudgetExhausted)]
    assert exhausted.reason == "steps"
    assert state.datamodel["n"] < 40  # 190 rounds when every call cost the same
