"""Charts written in Python (``statifier.build``) are the charts their SCXML says.

Every builder makes the element its SCXML counterpart is: a chart built with every element
and attribute has the identity of the same chart written by hand, and compiles to a
machine that runs as that chart's does.
"""

from __future__ import annotations

import importlib
from datetime import timedelta
from pathlib import Path

import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import build as sc
from statifier.chart.durations import MAX_DELAY_MS, parse_duration
from statifier.chart.identity import canonical_text
from statifier.chart.model import SendNode
from statifier.chart.xmltree import parse
from statifier.core import effects as fx
from statifier.errors import ChartError
from statifier.virtual import run_chart

ROOT = Path(__file__).resolve().parents[3]
NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

EVERYTHING = f"""<scxml {NS} version="1.0" name="everything" initial="main"
       datamodel="python" binding="early">
  <datamodel>
    <data id="n" expr="0"/>
    <data id="items">[1, 2, 3]</data>
    <data id="limits" src="limits.json"/>
    <data id="tree"><books xmlns=""><book title="t"/></books></data>
    <data id="unbound"/>
    <data id="sid"/><data id="iid"/><data id="total" expr="0"/>
  </datamodel>
  <script>total = 1</script>
  <state id="main" initial="work">
    <datamodel><data id="local" expr="'x'"/></datamodel>
    <onentry>
      <raise event="begun"/>
      <log label="n" expr="n"/>
      <assign location="n" expr="n + 1"/>
      <assign location="items">[4, 5]</assign>
      <assign location="tree"><cd xmlns=""/></assign>
      <if cond="n &gt; 1"><raise event="big"/><elseif cond="n == 1"/><raise event="one"/>
        <log expr="n"/><else/><raise event="small"/></if>
      <foreach array="items" item="item" index="i">
        <assign location="total" expr="total + item"/>
      </foreach>
      <foreach array="items" item="item"><log expr="item"/></foreach>
      <script>
        total = total * 2
      </script>
      <send id="hold" event="expired" delay="7d"/>
      <send idlocation="sid" eventexpr="'e' + str(n)" targetexpr="'#_internal'"
            typeexpr="'http://www.w3.org/TR/scxml/#SCXMLEventProcessor'" delayexpr="'1s'"
            namelist="n items"/>
      <send event="report" target="#_parent"
            type="http://www.w3.org/TR/scxml/#SCXMLEventProcessor">
        <param name="count" expr="n"/><param name="where" location="local"/>
      </send>
      <send event="payload"><content expr="{{'n': n}}"/></send>
      <send event="inline"><content>{{"fixed": true, "none": null}}</content></send>
      <cancel sendid="hold"/>
      <cancel sendidexpr="sid"/>
    </onentry>
    <onexit><log expr="'bye'"/></onexit>
    <onexit><log expr="'twice'"/></onexit>
    <invoke id="child" type="scxml" autoforward="true">
      <param name="seed" expr="n"/>
      <content><scxml version="1.0" initial="c"><final id="c"/></scxml></content>
      <finalize><assign location="n" expr="_event.data"/></finalize>
    </invoke>
    <invoke idlocation="iid" typeexpr="'scxml'" srcexpr="'file:child.scxml'" namelist="n"/>
    <invoke src="file:child.scxml" type="scxml" autoforward="false"/>
    <transition event="go.* stop" cond="is_ready(n, at=1)" target="other" type="internal">
      <log expr="'leaving'"/>
    </transition>
    <transition event="*" type="external"/>
    <transition cond="n &lt; 0" target="left right"/>
    <history id="h" type="deep">
      <transition target="work"><log expr="'default'"/></transition>
    </history>
    <history id="h2"><transition target="work"/></history>
    <state id="work"/>
    <parallel id="both">
      <onentry><log expr="'both'"/></onentry>
      <state id="left"/><state id="right"/><history id="ph" type="shallow"/>
    </parallel>
  </state>
  <state id="other">
    <initial><transition target="inner"><log expr="'first'"/></transition></initial>
    <state id="inner"/>
    <final id="finished"/>
  </state>
  <state/>
  <parallel/>
  <final id="done">
    <onentry><log expr="'done'"/></onentry><onexit/><donedata><content expr="n"/></donedata>
  </final>
  <final id="done2"><donedata><param name="n" expr="n"/></donedata></final>
  <final><donedata><content>"text"</content></donedata></final>
</scxml>
"""


def is_ready(n: int, at: int = 0) -> bool:
    return n >= at


EVERYTHING_BUILT = sc.chart(
    sc.data("n", expr="0"),
    sc.data("items", value=[1, 2, 3]),
    sc.data("limits", src="limits.json"),
    sc.data("tree", markup=sc.xml('<books xmlns=""><book title="t"/></books>')),
    sc.data("unbound"),
    sc.data("sid"),
    sc.data("iid"),
    sc.data("total", expr="0"),
    sc.script("total = 1"),
    sc.state(
        "main",
        sc.data("local", expr="'x'"),
        sc.on_entry(
            sc.raise_("begun"),
            sc.log(label="n", expr="n"),
            sc.assign("n", expr="n + 1"),
            sc.assign("items", value=[4, 5]),
            sc.assign("tree", markup=sc.xml('<cd xmlns=""/>')),
            sc.if_("n > 1", sc.raise_("big"))
            .elseif("n == 1", sc.raise_("one"), sc.log(expr="n"))
            .else_(sc.raise_("small")),
            sc.foreach(
                sc.assign("total", expr="total + item"), array="items", item="item", index="i"
            ),
            sc.foreach(sc.log(expr="item"), array="items", item="item"),
            sc.script(
                """
                total = total * 2
                """
            ),
            sc.send(id="hold", event="expired", delay=timedelta(days=7)),
            sc.send(
                idlocation="sid",
                eventexpr="'e' + str(n)",
                targetexpr="'#_internal'",
                typeexpr="'http://www.w3.org/TR/scxml/#SCXMLEventProcessor'",
                delayexpr="'1s'",
                namelist=["n", "items"],
            ),
            sc.send(
                sc.param("count", expr="n"),
                sc.param("where", location="local"),
                event="report",
                target="#_parent",
                type="http://www.w3.org/TR/scxml/#SCXMLEventProcessor",
            ),
            sc.send(sc.content(expr="{'n': n}"), event="payload"),
            sc.send(sc.content(value={"fixed": True, "none": None}), event="inline"),
            sc.cancel("hold"),
            sc.cancel(sendidexpr="sid"),
        ),
        sc.on_exit(sc.log(expr="'bye'")),
        sc.on_exit(sc.log(expr="'twice'")),
        sc.invoke(
            sc.param("seed", expr="n"),
            sc.content(chart=sc.chart(sc.final("c"), initial="c")),
            sc.finalize(sc.assign("n", expr="_event.data")),
            id="child",
            type="scxml",
            autoforward=True,
        ),
        sc.invoke(idlocation="iid", typeexpr="'scxml'", srcexpr="'file:child.scxml'", namelist="n"),
        sc.invoke(src="file:child.scxml", type="scxml", autoforward=False),
        sc.transition(
            sc.log(expr="'leaving'"),
            event=["go.*", "stop"],
            cond=sc.call(is_ready, "n", at="1"),
            target="other",
            type="internal",
        ),
        sc.transition(event="*", type="external"),
        sc.transition(cond="n < 0", target=("left", "right")),
        sc.history("h", sc.transition(sc.log(expr="'default'"), target="work"), type="deep"),
        sc.history("h2", sc.transition(target="work")),
        sc.state("work"),
        sc.parallel(
            "both",
            sc.on_entry(sc.log(expr="'both'")),
            sc.state("left"),
            sc.state("right"),
            sc.history("ph", type="shallow"),
        ),
        initial="work",
    ),
    sc.state(
        "other",
        sc.initial(sc.transition(sc.log(expr="'first'"), target="inner")),
        sc.state("inner"),
        sc.final("finished"),
    ),
    sc.state(),
    sc.parallel(),
    sc.final(
        "done",
        sc.on_entry(sc.log(expr="'done'")),
        sc.on_exit(),
        sc.done_data(sc.content(expr="n")),
    ),
    sc.final("done2", sc.done_data(sc.param("n", expr="n"))),
    sc.final(None, sc.done_data(sc.content(value="text"))),
    name="everything",
    initial="main",
    datamodel="python",
    binding="early",
)

DOCUMENTS = {"limits.json": '{"n": 3}'}


def test_a_chart_with_every_element_is_the_chart_its_scxml_says() -> None:
    parsed = statifier.compile(
        EVERYTHING, resolver=DOCUMENTS.__getitem__, functions={"is_ready": is_ready}
    )
    built = EVERYTHING_BUILT.compile(
        resolver=DOCUMENTS.__getitem__, functions={"is_ready": is_ready}
    )
    assert canonical_text(statifier.export(EVERYTHING_BUILT)) == canonical_text(EVERYTHING)
    assert built.identity == parsed.identity
    assert built.source == statifier.export(EVERYTHING_BUILT).encode()
    assert (len(built.states), len(built.transitions), len(built.content), len(built.data)) == (
        len(parsed.states),
        len(parsed.transitions),
        len(parsed.content),
        len(parsed.data),
    )
    assert built.resolved_sources == parsed.resolved_sources == DOCUMENTS


def test_a_changed_attribute_changes_the_identity() -> None:
    # The comparison above can fail: one attribute apart is another chart.
    other = sc.chart(*EVERYTHING_BUILT.children[:-1], name="everything", initial="main")
    assert statifier.chart_identity(statifier.export(other)) != statifier.chart_identity(EVERYTHING)


@pytest.mark.parametrize("name", ["card_authorization", "order_batch", "price_order"])
def test_the_examples_written_in_python_are_their_scxml_charts(name: str) -> None:
    module = importlib.import_module(name)
    parsed = statifier.compile((ROOT / "examples" / f"{name}.scxml").read_bytes())
    built = module.CHART.compile()
    assert built.identity == parsed.identity
    assert built.name == parsed.name == name


def test_a_built_chart_runs_as_its_scxml_does() -> None:
    built = importlib.import_module("card_authorization").CHART.compile()
    parsed = statifier.compile((ROOT / "examples" / "card_authorization.scxml").read_bytes())
    runs = []
    for machine in (built, parsed):
        state, effects = statifier.initialize(machine, session_id="sess_same")
        steps = [effects]
        for name in ("capture.requested", "capture.failed", "capture.succeeded"):
            state, effects = statifier.handle_event(state, statifier.Event(name=name))
            steps.append(effects)
        runs.append(steps)
    assert runs[0] == runs[1]
    assert [e.donedata for e in runs[0][-1] if isinstance(e, fx.Done)] == [{"captures": 2}]


def test_a_timedelta_delay_is_the_same_number_of_milliseconds() -> None:
    for delay, millis in (
        (timedelta(0), 0),
        (timedelta(milliseconds=1), 1),
        (timedelta(milliseconds=1500), 1500),
        (timedelta(days=1, hours=6), 108_000_000),
        (timedelta(days=7), 604_800_000),
    ):
        chart = sc.chart(sc.state("s", sc.on_entry(sc.send(event="e", delay=delay))))
        [send] = chart.compile().content
        assert isinstance(send, SendNode)
        assert send.delay_ms == millis, delay


@settings(max_examples=300, deadline=None)
@given(millis=st.integers(min_value=0, max_value=MAX_DELAY_MS))
def test_any_delay_of_whole_milliseconds_is_written_as_a_duration_of_the_same(millis: int) -> None:
    send = sc.send(event="e", delay=timedelta(milliseconds=millis))
    assert parse_duration(dict(send.attrs)["delay"] or "") == millis


def test_a_host_call_is_a_call_by_name_checked_when_compiled() -> None:
    call = sc.call(is_ready, "_event.data['n']", at="2")
    assert str(call) == "is_ready(_event.data['n'], at=2)"
    assert str(sc.call("f")) == "f()"
    assert str(sc.call("f", sc.call("g", "x"))) == "f(g(x))"
    chart = sc.chart(
        sc.state(
            "waiting",
            sc.transition(event="go", cond=call, target="ready"),
            sc.transition(event="go", target="not_ready"),
        ),
        sc.final("ready"),
        sc.final("not_ready"),
    )
    machine = chart.compile(functions={"is_ready": is_ready})
    for n, leaf in ((2, "ready"), (1, "not_ready")):
        state, _ = statifier.initialize(machine, session_id="sess_call")
        _, effects = statifier.handle_event(state, statifier.Event(name="go", data={"n": n}))
        assert [e.configuration for e in effects if isinstance(e, fx.Done)] == [(leaf,)]
    with pytest.raises(ChartError) as info:
        chart.compile()  # no functions: the name is not registered
    assert info.value.diagnostics[0].code == "invalid-expression"


def test_an_ecmascript_chart_is_built_the_same_way() -> None:
    source = f"""<scxml {NS} version="1.0" datamodel="ecmascript">
      <datamodel><data id="seen" expr="[]"/><data id="config">{{"limit": 2}}</data></datamodel>
      <script>var count = 0;</script>
      <state id="counting">
        <transition event="tick" cond="count &lt; config.limit">
          <script>count += 1; seen.push(_event.name);</script>
        </transition>
        <transition event="tick" target="full"/>
      </state>
      <final id="full"/>
    </scxml>"""
    built = sc.chart(
        sc.data("seen", expr="[]"),
        sc.data("config", value={"limit": 2}),
        sc.script("var count = 0;"),
        sc.state(
            "counting",
            sc.transition(
                sc.script("count += 1; seen.push(_event.name);"),
                event="tick",
                cond="count < config.limit",
            ),
            sc.transition(event="tick", target="full"),
        ),
        sc.final("full"),
        datamodel="ecmascript",
    )
    assert built.compile().identity == statifier.compile(source).identity
    result = run_chart(built.compile(), events=["tick", "tick", "tick"])
    assert result.configuration == ("full",)


def test_inline_markup_keeps_its_namespaces_and_text() -> None:
    markup = sc.xml(' <a xmlns="" xmlns:x="urn:x" x:k="v">one <b/> two</a> <c/>')
    chart = sc.chart(sc.data("doc", markup=markup), sc.state("s"))
    text = statifier.export(chart)
    assert (
        '<data id="doc"> <a xmlns="" xmlns:ns0="urn:x" ns0:k="v">one <b/> two</a> <c/></data>'
        in text
    )
    written = f"""<scxml {NS} version="1.0"><datamodel><data id="doc"> <a xmlns=""
        xmlns:x="urn:x" x:k="v">one <b/> two</a> <c/></data></datamodel><state id="s"/></scxml>"""
    assert chart.compile().identity == statifier.compile(written).identity
    assert chart.compile().data[0].value == statifier.compile(written).data[0].value


def test_text_that_xml_would_change_is_written_so_that_it_reads_back_the_same() -> None:
    body = "a = 'x\\ty'\r\nb = 1 < 2 and 3 > 2 & True"
    chart = sc.chart(
        sc.state(
            "s",
            sc.on_entry(sc.script(body), sc.log(label="quote \" and ' and\nnewline\tand\rcr")),
        )
    )
    root = parse(statifier.export(chart).encode())
    onentry = root.children[0].children[0]
    assert onentry.children[0].text == body
    assert onentry.children[1].attr("label") == "quote \" and ' and\nnewline\tand\rcr"


def test_consecutive_data_share_one_datamodel_and_others_split_them() -> None:
    chart = sc.chart(sc.data("a"), sc.data("b"), sc.state("s"), sc.data("c"))
    root = parse(statifier.export(chart).encode())
    assert [(c.tag, [d.attr("id") for d in c.children]) for c in root.children] == [
        ("datamodel", ["a", "b"]),
        ("state", []),
        ("datamodel", ["c"]),
    ]


def test_a_value_is_written_as_json_and_read_back_as_that_value() -> None:
    values: list[sc.JSONValue] = [
        None,
        True,
        0,
        -1.5,
        "",
        "  spaced  ",
        "7",
        [1, [2]],
        {"k": {"n": None}},
    ]
    chart = sc.chart(*(sc.data(f"v{i}", value=v) for i, v in enumerate(values)), sc.state("s"))
    machine = chart.compile()
    assert [d.value for d in machine.data] == values
    assert all(d.has_value for d in machine.data)
    assert not sc.chart(sc.data("unset"), sc.state("s")).compile().data[0].has_value


def test_elements_are_values_whatever_line_made_them() -> None:
    first = sc.state("s", sc.transition(event="go", target="t"))
    second = sc.state("s", sc.transition(event="go", target="t"))
    assert first == second
    assert first.origin.line + 1 == second.origin.line
    assert first != sc.state("s", sc.transition(event="go", target="u"))
