"""ECMAScript charts keep JavaScript's meaning (ADR 22): variables are references, the
values live in the engine between steps, and a position stores shared and cyclic objects
once and brings them back as the same objects."""

from __future__ import annotations

from typing import Any

import statifier
from statifier.core.position import dumps, loads

from engine_support import blobs
from engine_support.ecmascript import chart, errors, logged


def looks(machine: statifier.Machine, setup: str, probe: str) -> tuple[list[Any], list[Any]]:
    """What ``probe`` logs right after the ``setup`` event, and after a position round trip."""
    state, _ = statifier.initialize(machine, session_id="sess_identity")
    state, effects = statifier.handle_event(state, setup)
    assert errors(effects) == []
    _, live = statifier.handle_event(state, probe)
    _, restored = statifier.handle_event(loads(dumps(state), machine), probe)
    return logged(live), logged(restored)


GRAPH = chart(
    """
    <datamodel>
      <data id="o" expr="({k: 1})"/><data id="p"/><data id="list" expr="[]"/>
    </datamodel>
    <state id="s">
      <transition event="share">
        <assign location="p" expr="o"/>
        <assign location="p.k" expr="2"/>
        <assign location="o.self" expr="o"/>
        <script>list.push(o, p, {deep: o}); var again = list</script>
        <log expr="o.k + ':' + (p === o)"/>
      </transition>
      <transition event="probe">
        <log expr="[o.k, p === o, o.self === o, list[2].deep === p, again === list].join()"/>
      </transition>
    </state>
    """
)


def test_a_variable_assigned_an_object_holds_that_object() -> None:
    state, _ = statifier.initialize(GRAPH, session_id="sess_identity")
    _, effects = statifier.handle_event(state, "share")
    assert logged(effects) == ["2:true"]


def test_shared_and_cyclic_objects_stay_one_object_across_a_position() -> None:
    live, restored = looks(GRAPH, "share", "probe")
    assert live == restored == ["2,true,true,true,true"]


def test_shared_objects_are_stored_once() -> None:
    machine = chart(
        """
        <datamodel><data id="big" expr="'x'.repeat(100000)"/><data id="many"/></datamodel>
        <state id="s"><transition event="fill">
          <script>var one = {text: big}; many = []; for (var i = 0; i &lt; 1000; i++)
            many.push(one)</script>
        </transition></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_once")
    state, effects = statifier.handle_event(state, "fill")
    assert errors(effects) == []
    assert len(dumps(state)) < 250_000  # the object once, a thousand short references


def test_an_old_state_steps_in_an_engine_of_its_own() -> None:
    machine = chart(
        """
        <datamodel><data id="n" expr="0"/><data id="box" expr="({n: 0})"/></datamodel>
        <state id="s"><transition event="bump">
          <assign location="n" expr="n + 1"/><script>box.n = box.n + 10</script>
          <log expr="n + ':' + box.n"/>
        </transition></state>
        """
    )
    first, _ = statifier.initialize(machine, session_id="sess_fork")
    second, effects = statifier.handle_event(first, "bump")
    assert logged(effects) == ["1:10"]
    _, effects = statifier.handle_event(second, "bump")
    assert logged(effects) == ["2:20"]
    _, effects = statifier.handle_event(first, "bump")  # the first state is a value still
    assert logged(effects) == ["1:10"]
    assert first.datamodel["n"] == 0
    assert second.datamodel["box"] == {"n": 10}


def test_closures_live_in_the_engine_from_step_to_step() -> None:
    machine = chart(
        """
        <datamodel><data id="next"/></datamodel>
        <script>next = (function () { var n = 0; return function () { return ++n } })()</script>
        <state id="s"><transition event="tick"><log expr="next()"/></transition></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_closure")
    seen = []
    for _ in range(3):
        state, effects = statifier.handle_event(state, "tick")
        seen += logged(effects)
    assert seen == [1, 2, 3]
    # A position keeps the function (the chart's own literal), not what it closed over.
    _, effects = statifier.handle_event(loads(dumps(state), machine), "tick")
    assert logged(effects) == []
    assert "ReferenceError: n is not defined" in errors(effects)[0]


def test_the_charts_functions_and_prototypes_survive_a_position() -> None:
    machine = chart(
        """
        <datamodel><data id="p"/><data id="made"/><data id="tools" expr="new Map()"/></datamodel>
        <script>
          function Point(x) { this.x = x }
          Point.prototype.twice = function () { return this.x * 2 };
          p = new Point(3);
          made = Function('return 1');
          tools.set('re', /a+b/g); tools.set('set', new Set([1, 2]));
        </script>
        <state id="s"><transition event="probe">
          <log expr="[p.twice(), p instanceof Point, typeof made,
            tools.get('re').test('xaab'), tools.get('set').has(2)].join()"/>
        </transition></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_proto")
    _, live = statifier.handle_event(state, "probe")
    _, restored = statifier.handle_event(loads(dumps(state), machine), "probe")
    assert logged(live) == ["6,true,function,true,true"]
    # A function the chart did not write (made from a string) does not come back.
    assert logged(restored) == ["6,true,undefined,true,true"]


def test_a_variable_holding_part_of_the_event_keeps_it_after_the_next_one() -> None:
    machine = chart(
        """
        <datamodel><data id="order"/><data id="same"/></datamodel>
        <state id="s">
          <transition event="order">
            <assign location="order" expr="_event.data"/>
            <assign location="same" expr="order === _event.data"/>
          </transition>
          <transition event="probe"><log expr="JSON.stringify(order) + same"/></transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_event")
    state, _ = statifier.handle_event(state, statifier.Event(name="order", data={"id": 7}))
    assert statifier.handle_event(loads(dumps(state), machine), "probe")[1]
    state, effects = statifier.handle_event(state, "probe")
    assert logged(effects) == ['{"id":7}true']
    _, effects = statifier.handle_event(loads(dumps(state), machine), "probe")
    assert logged(effects) == ['{"id":7}true']
    assert state.datamodel["order"] == {"id": 7}


def test_foreach_binds_the_arrays_own_items() -> None:
    machine = chart(
        """
        <datamodel><data id="items" expr="[{n: 1}, {n: 2}]"/></datamodel>
        <state id="s"><onentry>
          <foreach array="items" item="item" index="i">
            <assign location="item.seen" expr="i"/>
          </foreach>
          <log expr="JSON.stringify(items) + (item === items[1])"/>
        </onentry></state>
        """
    )
    _, effects = statifier.initialize(machine, session_id="sess_foreach")
    assert logged(effects) == ['[{"n":1,"seen":0},{"n":2,"seen":1}]true']


def test_a_deep_value_is_stored_and_read_back() -> None:
    machine = chart(
        """
        <datamodel><data id="chain"/></datamodel>
        <state id="s">
          <transition event="build"><script>
            var head = null;
            for (var i = 0; i &lt; 2000; i++) head = {i: i, next: head};
            chain = head
          </script></transition>
          <transition event="probe"><log expr="(function () { var n = 0, c = chain;
            while (c) { n++; c = c.next } return n })()"/></transition>
        </state>
        """
    )
    live, restored = looks(machine, "build", "probe")
    assert live == restored == [2000]


def test_stored_data_keeps_its_dollar_keys_as_data() -> None:
    machine = chart(
        """
        <datamodel><data id="v" expr="({$ref: 0, $$x: 1, plain: [undefined, null]})"/></datamodel>
        <state id="s"><transition event="probe">
          <log expr="JSON.stringify(v) + ('0' in v.plain)"/>
        </transition></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_dollar")
    assert blobs.payload(dumps(state))["datamodel"]["v"] == {
        "$$ref": 0,
        "$$$x": 1,
        "plain": [{"$undefined": True}, None],
    }
    _, effects = statifier.handle_event(loads(dumps(state), machine), "probe")
    # A position writes keys sorted (canonical JSON): their order is not kept.
    assert logged(effects) == ['{"$$x":1,"$ref":0,"plain":[null,null]}true']
