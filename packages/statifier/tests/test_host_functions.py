"""Host functions: pure Python functions a host lets chart expressions call.

The first test is in the shape of a W3C IRP test (a ``pass``/``fail`` final, a timeout, a
catch-all) and runs through the virtual driver, as the conformance ratchet does.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest
import statifier
from statifier.datamodel import HostFunctionError, HostFunctions, compile_expression
from statifier.errors import ChartError
from statifier.virtual import run_chart

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

# Test: a guard calls a host function with datamodel values and _event data; the first
# transition whose guard holds wins, so only a host answering correctly reaches pass.
W3C_STYLE = f"""<scxml {NS} initial="s0" version="1.0" datamodel="python">
  <datamodel>
    <data id="Var1" expr="120"/>
  </datamodel>
  <state id="s0">
    <onentry>
      <send event="timeout" delay="1s"/>
      <raise event="charge"/>
    </onentry>
    <transition event="charge" cond="is_fraud(Var1, limit=100) and not is_fraud(5)" target="s1"/>
    <transition event="*" target="fail"/>
  </state>
  <state id="s1">
    <onentry>
      <send event="review"><content expr="{{'amount': Var1, 'tags': ['card']}}"/></send>
    </onentry>
    <transition event="review"
                cond="risk(_event.data) == {{'score': 120, 'tags': ['card', 'seen']}}"
                target="pass"/>
    <transition event="*" target="fail"/>
  </state>
  <final id="pass"><onentry><log label="Outcome" expr="'pass'"/></onentry></final>
  <final id="fail"><onentry><log label="Outcome" expr="'fail'"/></onentry></final>
</scxml>
"""


def is_fraud(amount: int, limit: int = 50) -> bool:
    return amount > limit


def risk(data: dict[str, Any]) -> dict[str, Any]:
    data["tags"].append("seen")  # mutates its own copy only
    return {"score": data["amount"], "tags": data["tags"]}


FUNCTIONS: dict[str, Callable[..., Any]] = {"is_fraud": is_fraud, "risk": risk}


def test_w3c_style_host_function_in_a_guard_passes() -> None:
    machine = statifier.compile(W3C_STYLE, functions=FUNCTIONS)
    run = run_chart(machine)
    assert run.done
    assert run.configuration == ("pass",)
    assert ("Outcome", "pass") in run.log


def test_a_chart_calling_an_unregistered_function_fails_with_one_diagnostic() -> None:
    with pytest.raises(ChartError) as failure:
        statifier.compile(W3C_STYLE, functions={"is_fraud": is_fraud})
    (diagnostic,) = failure.value.diagnostics
    assert diagnostic.code == "invalid-expression"
    assert "function 'risk' is not allowed" in diagnostic.message


def test_only_registered_functions_are_callable() -> None:
    source = W3C_STYLE.replace("is_fraud(5)", "is_fraud(5) or print('x')")
    with pytest.raises(ChartError) as failure:
        statifier.compile(source, functions=FUNCTIONS)
    (diagnostic,) = failure.value.diagnostics
    assert "function 'print' is not allowed" in diagnostic.message


def _guarded(cond: str) -> str:
    return f"""<scxml {NS} initial="a">
  <state id="a">
    <transition cond="{cond}" target="yes"/>
    <transition event="error.execution" target="error"/>
  </state>
  <final id="yes"/>
  <final id="error"><onentry><log label="why" expr="_event.data['message']"/></onentry></final>
</scxml>
"""


def _why(cond: str, functions: dict[str, Any]) -> str:
    run = run_chart(statifier.compile(_guarded(cond), functions=functions))
    assert run.configuration == ("error",), run.configuration
    return str(dict(run.log)["why"])


def test_an_exception_becomes_error_execution() -> None:
    def broken() -> bool:
        raise LookupError("no such card")

    assert "broken() raised LookupError: no such card" in _why("broken()", {"broken": broken})


def test_a_result_that_is_not_json_like_becomes_error_execution() -> None:
    why = _why("odd()", {"odd": lambda: {1, 2}})
    assert "odd() returned a set, not a JSON-like value" in why


def test_arguments_are_checked_on_the_way_in() -> None:
    registry = HostFunctions.of({"f": lambda x: x})
    with pytest.raises(HostFunctionError, match="arguments must be JSON-like values"):
        registry.call("f", [object()], {})
    assert registry.call("f", [[1, {"a": None}]], {}) == [1, {"a": None}]


def test_registration_is_checked() -> None:
    with pytest.raises(HostFunctionError, match="must be an identifier"):
        HostFunctions.of({"_private": is_fraud})
    with pytest.raises(HostFunctionError, match="not callable"):
        HostFunctions.of({"value": 3})  # type: ignore[dict-item]
    with pytest.raises(HostFunctionError, match="cannot shadow built-in functions: \\['len'\\]"):
        statifier.compile(_guarded("len([])"), functions={"len": len})


def test_compiled_expressions_keep_their_functions_through_pickle() -> None:
    registry = HostFunctions.of(FUNCTIONS)
    expression = compile_expression("is_fraud(x)", registry)
    assert expression.names_read == frozenset({"x"})
    copy = pickle.loads(pickle.dumps(expression))  # noqa: S301 - pickled right here
    assert copy.evaluate({"x": 500}, lambda _: False) is True


# -- the ECMAScript datamodel: the same functions, copy-in/copy-out and errors (ADR 22) --

ECMA = f'{NS} version="1.0" datamodel="ecmascript"'

ECMA_W3C_STYLE = f"""<scxml {ECMA} initial="s0">
  <datamodel>
    <data id="Var1" expr="120"/>
  </datamodel>
  <state id="s0">
    <onentry>
      <send event="timeout" delay="1s"/>
      <raise event="charge"/>
    </onentry>
    <transition event="charge" cond="is_fraud(Var1, 100) &amp;&amp; !is_fraud(5)" target="s1"/>
    <transition event="*" target="fail"/>
  </state>
  <state id="s1">
    <onentry>
      <send event="review"><content expr="({{amount: Var1, tags: ['card']}})"/></send>
    </onentry>
    <transition event="review"
        cond="JSON.stringify(risk(_event.data)) ===
              JSON.stringify({{score: 120, tags: ['card', 'seen']}})"
        target="pass"/>
    <transition event="*" target="fail"/>
  </state>
  <final id="pass"><onentry><log label="Outcome" expr="'pass'"/></onentry></final>
  <final id="fail"><onentry><log label="Outcome" expr="'fail'"/></onentry></final>
</scxml>
"""


def test_an_ecmascript_guard_calls_host_functions() -> None:
    run = run_chart(statifier.compile(ECMA_W3C_STYLE, functions=FUNCTIONS))
    assert run.configuration == ("pass",)
    assert ("Outcome", "pass") in run.log


def test_ecmascript_host_functions_get_copies_and_give_copies() -> None:
    seen: list[Any] = []

    def keep(value: Any) -> Any:
        seen.append(value)
        value["touched"] = True  # the function's own copy
        return {"back": [1, 2]}

    machine = statifier.compile(
        f"""<scxml {ECMA}>
          <datamodel>
            <data id="order" expr="({{id: 'o1'}})"/><data id="answer"/><data id="n" expr="0"/>
          </datamodel>
          <state id="s"><onentry>
            <script>n = n + 1; answer = keep(order); answer.back.push(3); n = n + 10</script>
            <log label="order" expr="JSON.stringify(order)"/>
            <log label="answer" expr="JSON.stringify(answer)"/>
            <log label="again" expr="JSON.stringify(keep(order))"/>
            <log label="n" expr="n"/>
          </onentry></state>
        </scxml>""",
        functions={"keep": keep},
    )
    run = run_chart(machine)
    logged = dict(run.log)
    assert logged["order"] == '{"id":"o1"}'
    assert logged["answer"] == '{"back":[1,2,3]}'
    assert logged["again"] == '{"back":[1,2]}'
    assert logged["n"] == 11  # the script's writes happen once, whatever it asked the host
    assert seen == [{"id": "o1", "touched": True}, {"id": "o1", "touched": True}]


def test_ecmascript_host_function_failures_are_error_execution() -> None:
    def broken() -> bool:
        raise LookupError("no such card")

    def chart(cond: str) -> str:
        return f"""<scxml {ECMA} initial="a">
          <script>function indirect() {{ return broken() }}</script>
          <state id="a">
            <transition cond="{cond}" target="yes"/>
            <transition event="error.execution" target="error"/>
          </state>
          <final id="yes"/>
          <final id="error"><onentry><log label="why" expr="_event.data.message"/></onentry></final>
        </scxml>"""

    functions = {"broken": broken, "odd": lambda: {1, 2}}
    for cond, reason in (
        ("broken()", "broken() raised LookupError: no such card"),
        ("indirect()", "broken() raised LookupError: no such card"),
        ("odd()", "odd() returned a set, not a JSON-like value"),
    ):
        run = run_chart(statifier.compile(chart(cond), functions=functions))
        assert run.configuration == ("error",), cond
        assert reason in str(dict(run.log)["why"]), cond


def test_ecmascript_host_functions_may_not_shadow_built_in_globals() -> None:
    source = f'<scxml {ECMA}><state id="a"/></scxml>'
    with pytest.raises(HostFunctionError, match="cannot shadow built-in functions: \\['JSON'\\]"):
        statifier.compile(source, functions={"JSON": lambda: 1})


# Test: a child chart an <invoke type="scxml"> starts (inline, and by src through the
# resolver) calls the host's function; only a child compiled with the parent's functions
# answers the right donedata, and a child without them would not compile at all.
INVOKING = f"""<scxml {NS} initial="s0" version="1.0" datamodel="python">
  <state id="s0">
    <onentry><send event="timeout" delay="1s"/></onentry>
    <invoke id="inline" type="scxml">
      <content>
        <scxml {NS} initial="k" version="1.0" datamodel="python">
          <state id="k"><transition cond="is_fraud(120)" target="kdone"/></state>
          <final id="kdone"><donedata>
            <param name="score" expr="risk({{'amount': 7, 'tags': []}})['score']"/>
          </donedata></final>
        </scxml>
      </content>
    </invoke>
    <transition event="done.invoke.inline" cond="_event.data == {{'score': 7}}" target="s1"/>
    <transition event="*" target="fail"/>
  </state>
  <state id="s1">
    <invoke id="by_src" type="scxml" src="child"/>
    <transition event="done.invoke.by_src" cond="_event.data == {{'fraud': True}}" target="pass"/>
    <transition event="*" target="fail"/>
  </state>
  <final id="pass"/>
  <final id="fail"/>
</scxml>
"""

CHILD_BY_SRC = f"""<scxml {NS} initial="k" version="1.0" datamodel="python">
  <final id="k"><donedata><param name="fraud" expr="is_fraud(500)"/></donedata></final>
</scxml>"""


def _child_source(src: str) -> str:
    assert src == "child"
    return CHILD_BY_SRC


def test_child_charts_get_the_host_functions_of_their_parent_in_virtual_runs() -> None:
    machine = statifier.compile(INVOKING, functions=FUNCTIONS)
    assert machine.functions == HostFunctions.of(FUNCTIONS)
    result = run_chart(machine, resolver=_child_source)
    assert result.configuration == ("pass",)


async def test_child_charts_get_the_host_functions_of_their_parent_in_live_sessions() -> None:
    import asyncio

    from statifier.runtime.session import Session

    machine = statifier.compile(INVOKING, functions=FUNCTIONS)
    session = await Session.start(machine, resolver=_child_source)
    try:
        await asyncio.wait_for(session.wait_halted(), 5)
        assert session.status().configuration == ("pass",)
    finally:
        await session.stop()


def test_a_chart_compiled_without_functions_gives_its_children_none() -> None:
    machine = statifier.compile(INVOKING.replace("is_fraud(120)", "True"))
    assert machine.functions is None
    result = run_chart(machine, resolver=_child_source)
    assert result.configuration == ("fail",)  # the child's donedata cannot call risk()
