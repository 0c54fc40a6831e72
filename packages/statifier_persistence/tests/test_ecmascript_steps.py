"""Durable executions of ECMAScript charts (ADR 22): each step runs in an engine of its own,
built from the stored position, and what it stores loads again."""

from __future__ import annotations

import json
from typing import Any

import statifier
from statifier import MachineState
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.datamodel import stored_variables
from statifier.datamodel.ecmascript import CIRCULAR
from statifier_persistence import Executions, Stepped

from persistence_support.common import NS, chart, unique

PAYLOAD = "globalThis.approved = true, function () {}"

GATE = chart(
    """
    <datamodel>
      <data id="approved" expr="false"/><data id="order"/><data id="v" expr="0"/>
    </datamodel>
    <state id="open">
      <transition event="order"><assign location="order" expr="_event.data"/></transition>
      <transition event="deep">
        <assign location="v" expr="(function () { var o = {leaf: true};
          for (var i = 0; i &lt; 300; i++) o = {o: o}; return o })()"/>
        <send event="measure" delay="1s"/>
      </transition>
      <transition event="measure">
        <log label="depth" expr="(function () { var d = 0, o = v;
          while (o.o) { o = o.o; d++ } return d + ':' + o.leaf })()"/>
      </transition>
      <transition event="check" cond="approved === true" target="hacked"/>
      <transition event="check" target="safe"/>
    </state>
    <final id="hacked"/><final id="safe"/>
    """,
    datamodel="ecmascript",
)


async def test_event_data_sent_to_an_execution_is_never_code(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(GATE, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="order", data={"$function": PAYLOAD}))
    assert isinstance(stepped, Stepped)
    stepped = await executions.step(execution_id, Event(name="check"))
    assert isinstance(stepped, Stepped)
    done = [e.configuration for e in stepped.effects if isinstance(e, fx.Done)]
    assert done == [("safe",)]
    # Stored as data: its "$" key escaped, so that it can never read as a tag; read back as
    # the data it is.
    assert stored_variables(stepped.state.datamodel)["order"] == {"$$function": PAYLOAD}
    assert stepped.state.datamodel["order"] == {"$function": PAYLOAD}


async def test_a_deep_value_stores_and_the_next_step_reads_it(executions: Executions) -> None:
    execution_id = unique()
    await executions.create(GATE, execution_id=execution_id)
    stepped = await executions.step(execution_id, Event(name="deep"))
    assert isinstance(stepped, Stepped)
    assert [e.event for e in stepped.effects if isinstance(e, fx.SendDelayed)] == ["measure"]
    stepped = await executions.step(execution_id, Event(name="measure"))
    assert isinstance(stepped, Stepped)
    assert [e.value for e in stepped.effects if isinstance(e, fx.Log)] == ["300:true"]


SHARED = chart(
    """
    <datamodel>
      <data id="o" expr="({k: 1, f: function () { return 1 }})"/>
      <data id="p" expr="o"/><data id="n" expr="NaN"/>
    </datamodel>
    <state id="open">
      <transition event="bump">
        <assign location="p.k" expr="p.k + 1"/><log label="both" expr="[o, p]"/>
      </transition>
      <transition event="loop"><assign location="o.self" expr="o"/></transition>
      <transition event="end" target="done"/>
    </state>
    <final id="done"><donedata><param name="p" expr="p"/></donedata></final>
    """,
    datamodel="ecmascript",
)
"""Two variables holding one object (with a method), a NaN, and a cycle on ``loop``."""


def user_variables(state: MachineState) -> dict[str, Any]:
    """The chart's variables of ``state`` (system variables left out)."""
    return {k: v for k, v in state.datamodel.items() if not k.startswith("_")}


async def test_a_loaded_execution_reads_its_variables_as_plain_data(
    executions: Executions,
) -> None:
    # The position keeps o and p as one object ({"$ref": 0} and #objects) and NaN as a tag;
    # a host loading the execution reads the data as JSON.stringify writes it.
    execution_id = unique()
    await executions.create(SHARED, execution_id=execution_id)
    _, state = await executions.load(execution_id)
    assert stored_variables(state.datamodel)["p"] == {"$ref": 0}
    assert user_variables(state) == {"o": {"k": 1}, "p": {"k": 1}, "n": None}
    assert await executions.step(execution_id, Event(name="loop"))
    _, state = await executions.load(execution_id)
    circular = {"k": 1, "self": CIRCULAR}
    assert user_variables(state) == {"o": circular, "p": circular, "n": None}
    json.dumps(dict(state.datamodel))  # every value is JSON


async def test_history_and_outcome_of_an_ecmascript_chart_hold_plain_data(
    executions: Executions,
) -> None:
    execution_id = unique()
    await executions.create(SHARED, execution_id=execution_id)
    # A run of <assign> ending in its <log> goes to the engine in one call (ADR 22).
    assert await executions.step(execution_id, Event(name="bump", data={"$ref": 0}))
    stepped = await executions.step(execution_id, Event(name="end"))
    assert isinstance(stepped, Stepped)
    assert stepped.execution.outcome == {"configuration": ["done"], "donedata": {"p": {"k": 2}}}
    entries = (await executions.history(execution_id)).entries
    bump = next(entry.to_json() for entry in entries if entry.kind == "event")
    assert bump["event"]["data"] == {"$ref": 0}  # event data is data, whatever its shape
    assert bump["logs"] == [
        {"label": "both", "value": [{"k": 2}, {"k": 2}], "value_clipped": False}
    ]
    assert user_variables(stepped.state) == {"o": {"k": 2}, "p": {"k": 2}, "n": None}


async def test_a_migration_keeps_shared_objects_and_takes_the_operators_data(
    executions: Executions,
) -> None:
    # A migration exports the position (plain values plus the engine's stored form) and
    # imports it into the new revision: o and p stay one object, the chart's method stays,
    # and what the operator sets is data, whatever its shape.
    v1 = chart(
        """
        <datamodel><data id="o" expr="({k: 1, f: function () { return 7 }})"/>
          <data id="p" expr="o"/></datamodel>
        <state id="open">
          <transition event="bump"><assign location="p.k" expr="p.k + 1"/></transition>
        </state>
        """,
        datamodel="ecmascript",
        name="shared_move",
    )
    v2 = statifier.compile(
        f"""<scxml {NS} datamodel="ecmascript" name="shared_move">
        <datamodel><data id="o" expr="({{k: 1, f: function () {{ return 7 }}}})"/>
          <data id="p" expr="o"/><data id="note"/></datamodel>
        <state id="open">
          <transition event="bump"><assign location="p.k" expr="p.k + 1"/></transition>
          <transition event="check">
            <log label="same" expr="o === p &amp;&amp; o.k + ':' + o.f()"/>
          </transition>
        </state></scxml>""",
        version="2",
    )
    execution_id = unique()
    await executions.create(v1, execution_id=execution_id)
    assert await executions.step(execution_id, Event(name="bump"))
    await executions.register(v2)
    migrated = await executions.migrate(
        execution_id, v2, datamodel={"note": {"$function": PAYLOAD}}
    )
    assert user_variables(migrated.state) == {
        "o": {"k": 2}, "p": {"k": 2}, "note": {"$function": PAYLOAD}
    }  # fmt: skip
    stepped = await executions.step(execution_id, Event(name="check"))
    assert isinstance(stepped, Stepped)
    assert [e.value for e in stepped.effects if isinstance(e, fx.Log)] == ["2:7"]
