"""Durable executions of ECMAScript charts (ADR 22): each step runs in an engine of its own,
built from the stored position, and what it stores loads again."""

from __future__ import annotations

from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.datamodel import stored_variables
from statifier_persistence import Executions, Stepped

from persistence_support.common import chart, unique

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
