"""The compiled Machine's numbering and structure: states, transitions, content, owners."""

from __future__ import annotations

import dataclasses

import pytest
import statifier
from statifier.chart.model import (
    AssignNode,
    ForeachNode,
    IfNode,
    LogNode,
    RaiseNode,
    SendNode,
)

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

NESTED = f"""<scxml {NS} initial="a">
  <state id="a" initial="a2">
    <state id="a1">
      <transition event="t0" target="a2"/>
    </state>
    <state id="a2">
      <state id="a2x"/>
      <history id="a2h">
        <transition target="a2x"/>
      </history>
      <transition event="t2" target="b"/>
    </state>
    <transition event="t3" target="b"/>
  </state>
  <parallel id="b">
    <state id="b1">
      <transition event="t4" target="a1"/>
    </state>
    <state id="b2"/>
  </parallel>
  <final id="c"/>
</scxml>
"""


@pytest.fixture(scope="module")
def nested() -> statifier.Machine:
    return statifier.compile(NESTED)


def test_states_are_in_document_order_with_integer_indexes(nested: statifier.Machine) -> None:
    root = nested.states[0]
    assert root.kind == "scxml"
    assert root.parent == -1
    assert [s.id for s in nested.states[1:]] == [
        "a",
        "a1",
        "a2",
        "a2x",
        "a2h",
        "b",
        "b1",
        "b2",
        "c",
    ]
    assert [s.index for s in nested.states] == list(range(len(nested.states)))
    assert all(nested.state_ids[s.id] == s.index for s in nested.states[1:])
    assert [s.kind for s in nested.states[1:]] == [
        "state",
        "state",
        "state",
        "state",
        "history",
        "parallel",
        "state",
        "state",
        "final",
    ]
    lines = [s.line for s in nested.states[1:]]
    assert lines == sorted(lines)


def test_parents_children_and_history(nested: statifier.Machine) -> None:
    s = nested.state
    assert nested.states[0].children == (s("a").index, s("b").index, s("c").index)
    assert s("a").children == (s("a1").index, s("a2").index)
    assert s("a2").children == (s("a2x").index,)
    assert s("a2").history == (s("a2h").index,)
    assert s("a2h").parent == s("a2").index
    assert s("b").children == (s("b1").index, s("b2").index)


def test_ancestors_nearest_first_up_to_the_root(nested: statifier.Machine) -> None:
    ancestors = {st.id: st.ancestors for st in nested.states[1:]}
    assert ancestors == {
        "a": (0,),
        "a1": (1, 0),
        "a2": (1, 0),
        "a2x": (3, 1, 0),
        "a2h": (3, 1, 0),
        "b": (0,),
        "b1": (6, 0),
        "b2": (6, 0),
        "c": (0,),
    }
    assert [st.depth for st in nested.states] == [0, 1, 2, 2, 3, 3, 1, 2, 2, 1]


def test_last_is_the_end_of_the_subtree_range(nested: statifier.Machine) -> None:
    last = {st.id: st.last for st in nested.states}
    assert last == {
        "scxml": 9,
        "a": 5,
        "a1": 2,
        "a2": 5,
        "a2x": 4,
        "a2h": 5,
        "b": 8,
        "b1": 7,
        "b2": 8,
        "c": 9,
    }
    # The range test agrees with ancestry for every pair of states.
    for d in nested.states:
        for a in nested.states:
            assert nested.is_descendant(d.index, a.index) == (a.index in d.ancestors)


def test_atomic_and_compound(nested: statifier.Machine) -> None:
    atomic = {s.id for s in nested.states if s.atomic}
    compound = {s.id for s in nested.states if s.compound}
    assert atomic == {"a1", "a2x", "b1", "b2", "c"}
    assert compound == {"scxml", "a", "a2"}


def test_transitions_are_numbered_in_document_order(nested: statifier.Machine) -> None:
    assert [t.index for t in nested.transitions] == list(range(len(nested.transitions)))
    s = nested.state
    written = [t for t in nested.transitions if t.events or s("a2h").index == t.source]
    # t0, the history default, t2, t3, t4 -- in the order they appear in the document.
    assert [(t.events, nested.states[t.source].id) for t in written] == [
        (("t0",), "a1"),
        ((), "a2h"),
        (("t2",), "a2"),
        (("t3",), "a"),
        (("t4",), "b1"),
    ]
    indexes = [t.index for t in written]
    assert indexes == sorted(indexes)
    lines = [t.line for t in written]
    assert lines == sorted(lines)
    assert s("a1").transitions == (written[0].index,)
    assert s("a2").transitions == (written[2].index,)
    assert s("a2h").initial_transition == written[1].index
    assert nested.transitions[written[1].index].targets == (s("a2x").index,)


def test_initial_transitions_target_the_initial_children(nested: statifier.Machine) -> None:
    s = nested.state
    targets = {
        st.id: nested.transitions[st.initial_transition].targets
        for st in nested.states
        if st.initial_transition is not None and st.kind != "history"
    }
    assert targets == {
        "scxml": (s("a").index,),
        "a": (s("a2").index,),
        "a2": (s("a2x").index,),
    }


CONTENT = f"""<scxml {NS}>
  <datamodel>
    <data id="x" expr="0"/>
  </datamodel>
  <state id="s">
    <onentry>
      <log label="c0" expr="x"/>
      <if cond="x == 0">
        <raise event="c2"/>
        <assign location="x" expr="1"/>
      <elseif cond="x == 1"/>
        <raise event="c4"/>
      <else/>
        <foreach array="[1, 2]" item="i">
          <raise event="c6"/>
        </foreach>
      </if>
    </onentry>
    <onentry>
      <raise event="c7"/>
    </onentry>
    <invoke type="scxml" src="one.scxml"/>
    <invoke type="scxml" src="two.scxml">
      <finalize>
        <assign location="x" expr="2"/>
        <log label="c9"/>
      </finalize>
    </invoke>
    <onexit>
      <send event="c10" delay="1s"/>
    </onexit>
    <transition event="go" target="t">
      <raise event="c11"/>
      <if cond="True">
        <raise event="c13"/>
      </if>
    </transition>
  </state>
  <state id="t">
    <onexit>
      <log label="c14"/>
    </onexit>
    <onexit>
      <log label="c15"/>
    </onexit>
  </state>
</scxml>
"""

EXECUTABLE_TAGS = ("<log", "<if ", "<raise", "<assign", "<foreach", "<send")


@pytest.fixture(scope="module")
def content_machine() -> statifier.Machine:
    return statifier.compile(CONTENT)


def test_c_index_is_dense_and_in_document_pre_order(content_machine: statifier.Machine) -> None:
    content = content_machine.content
    assert [n.c_index for n in content] == list(range(16))
    expected_lines = [
        number
        for number, text in enumerate(CONTENT.splitlines(), start=1)
        if text.lstrip().startswith(EXECUTABLE_TAGS)
    ]
    assert [n.line for n in content] == expected_lines
    kinds = [type(n) for n in content]
    assert kinds == [
        LogNode,
        IfNode,
        RaiseNode,
        AssignNode,
        RaiseNode,
        ForeachNode,
        RaiseNode,
        RaiseNode,
        AssignNode,
        LogNode,
        SendNode,
        RaiseNode,
        IfNode,
        RaiseNode,
        LogNode,
        LogNode,
    ]


def test_nested_bodies_share_the_content_table(content_machine: statifier.Machine) -> None:
    content = content_machine.content
    if_node = content[1]
    assert isinstance(if_node, IfNode)
    bodies = [[n.c_index for n in body] for _, body in if_node.branches]
    assert bodies == [[2, 3], [4], [5]]
    foreach = content[5]
    assert isinstance(foreach, ForeachNode)
    assert [n.c_index for n in foreach.body] == [6]
    # The tree nodes and the flat table are the same objects.
    assert if_node.branches[0][1][0] is content[2]
    assert foreach.body[0] is content[6]


def test_owners_for_every_block_kind(content_machine: statifier.Machine) -> None:
    m = content_machine
    s, t = m.state("s").index, m.state("t").index
    (go,) = [tr for tr in m.transitions if tr.events == ("go",)]
    owners = [n.owner for n in m.content]
    assert owners == [
        ("onentry", s, 0),  # log c0
        ("onentry", s, 0),  # if
        ("onentry", s, 0),  # raise inside if
        ("onentry", s, 0),  # assign inside if
        ("onentry", s, 0),  # raise inside elseif
        ("onentry", s, 0),  # foreach inside else
        ("onentry", s, 0),  # raise inside foreach
        ("onentry", s, 1),  # second onentry block
        ("finalize", s, 1),  # finalize of the second invoke
        ("finalize", s, 1),
        ("onexit", s, 0),
        ("transition", go.index),
        ("transition", go.index),
        ("transition", go.index),
        ("onexit", t, 0),
        ("onexit", t, 1),
    ]


def test_blocks_are_attached_to_their_states(content_machine: statifier.Machine) -> None:
    m = content_machine
    s = m.state("s")
    assert [[n.c_index for n in block] for block in s.onentry] == [[0, 1], [7]]
    assert [[n.c_index for n in block] for block in s.onexit] == [[10]]
    assert [inv.index for inv in s.invokes] == [0, 1]
    assert s.invokes[0].finalize == ()
    assert [n.c_index for n in s.invokes[1].finalize] == [8, 9]
    (go,) = [tr for tr in m.transitions if tr.events == ("go",)]
    assert [n.c_index for n in go.content] == [11, 12]
    assert [[n.c_index for n in block] for block in m.state("t").onexit] == [[14], [15]]


def test_data_is_numbered_and_attached_to_its_state() -> None:
    source = f"""<scxml {NS}>
      <datamodel><data id="a" expr="1"/><data id="b" expr="2"/></datamodel>
      <state id="s">
        <datamodel><data id="c" expr="3"/></datamodel>
      </state>
    </scxml>"""
    m = statifier.compile(source)
    assert [(d.d_index, d.id, d.state) for d in m.data] == [
        (0, "a", 0),
        (1, "b", 0),
        (2, "c", m.state("s").index),
    ]
    assert m.states[0].data == (0, 1)
    assert m.state("s").data == (2,)


IMMUTABLE = (dataclasses.FrozenInstanceError, AttributeError)


def test_machine_is_immutable(nested: statifier.Machine) -> None:
    with pytest.raises(IMMUTABLE):
        nested.states = ()  # type: ignore[misc]
    with pytest.raises(IMMUTABLE):
        nested.identity = "sha256:forged"  # type: ignore[misc]
    # A brand-new attribute is refused too. (CPython 3.12's frozen+slots dataclasses raise
    # TypeError from the generated __setattr__ here rather than FrozenInstanceError.)
    with pytest.raises((*IMMUTABLE, TypeError)):
        nested.brand_new_attribute = 1  # type: ignore[attr-defined]
    assert not hasattr(nested, "brand_new_attribute")
    assert isinstance(nested.states, tuple)
    assert isinstance(nested.transitions, tuple)
    assert isinstance(nested.content, tuple)


def test_machine_parts_are_immutable(
    nested: statifier.Machine, content_machine: statifier.Machine
) -> None:
    with pytest.raises(IMMUTABLE):
        nested.states[1].last = 0  # type: ignore[misc]
    with pytest.raises(IMMUTABLE):
        nested.transitions[0].targets = ()  # type: ignore[misc]
    with pytest.raises(IMMUTABLE):
        content_machine.content[0].owner = ("onexit", 0, 0)  # type: ignore[misc]
    assert isinstance(nested.states[1].children, tuple)
    assert isinstance(nested.states[1].ancestors, tuple)
