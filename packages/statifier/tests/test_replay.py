"""Replayed macrosteps (``statifier.core._replay``) give exactly what a full run gives.

Every comparison drives the same events twice: once with the step memo emptied before
each event (every macrostep runs in full), once with the memo warm (steps that only move
the configuration are rebuilt from it). States, effects and position bytes must agree.
"""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from hypothesis import given, settings
from hypothesis import strategies as st
from statifier import Event, MachineState, external, handle_event, initialize
from statifier.budget import MacrostepLimits
from statifier.core import _replay, effects
from statifier.core.position import dumps

from engine_support import chartgen

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0"'

CHAIN = f"""<scxml {NS} initial="left">
  <state id="left"><transition event="go" target="l1"/></state>
  <state id="l1"><transition target="l2"/></state>
  <state id="l2"><transition target="l3"/></state>
  <state id="l3"><transition target="right"/></state>
  <state id="right"><transition event="go" target="left"/></state>
</scxml>"""

Step = tuple[MachineState, list[effects.Effect]]


def _drive(state: MachineState, events: list[Event], *, full: bool) -> list[Step]:
    steps: list[Step] = []
    for event in events:
        if not state.running:
            break
        if full:
            state.machine._cache.pop(_replay.STEPS, None)
        state, out = handle_event(state, event)
        steps.append((state, out))
    return steps


def _assert_same(full: list[Step], replayed: list[Step]) -> None:
    assert len(full) == len(replayed)
    for (state_a, out_a), (state_b, out_b) in zip(full, replayed, strict=True):
        assert out_b == out_a
        assert state_b == state_a
        assert state_b.entered == state_a.entered
        assert dumps(state_b) == dumps(state_a)


def _replays(machine: statifier.Machine) -> int:
    return len(machine._cache.get(_replay.STEPS, {}))


@settings(max_examples=150, deadline=None)
@given(
    source=chartgen.charts(),
    names=st.lists(st.sampled_from(chartgen.EVENTS), max_size=15),
    budget=st.sampled_from([4, 40]),
    contexts=st.booleans(),
)
def test_replayed_steps_equal_full_runs(
    source: str, names: list[str], budget: int, contexts: bool
) -> None:
    machine = statifier.compile(source)
    events = [
        external(name, data=i if i % 2 else None, caller_context={"i": i} if contexts else None)
        for i, name in enumerate(names)
    ]

    def start() -> MachineState:
        state, _ = initialize(
            machine,
            session_id="sess_replay",
            max_macrostep_rounds=budget,
            invoke_types={chartgen.INVOKE_TYPE},
        )
        return state

    full = _drive(start(), events, full=True)
    _drive(start(), events, full=False)  # warms the memo
    _assert_same(full, _drive(start(), events, full=False))


@pytest.mark.parametrize("shape", ["ping-pong", "parallel", "deep", "chain"])
def test_structural_charts_replay_and_agree(shape: str) -> None:
    source = {
        "ping-pong": f"""<scxml {NS}><state id="m"><state id="off">
            <transition event="t" target="on"/></state><state id="on">
            <transition event="t" target="off"/></state></state></scxml>""",
        "parallel": f"""<scxml {NS}><parallel id="p">
            <state id="r1"><state id="a1"><transition event="t" target="b1"/></state>
              <state id="b1"><transition event="t" target="a1"/></state></state>
            <state id="r2"><state id="a2"><transition event="t" target="b2"/></state>
              <state id="b2"><transition event="t" target="a2"/></state></state>
            </parallel></scxml>""",
        "deep": f"""<scxml {NS}><state id="a1"><state id="a2"><state id="a3">
            <transition event="t" target="b3"/></state></state></state>
            <state id="b1"><state id="b2"><state id="b3"><transition event="t" target="a3"/>
            </state></state></state></scxml>""",
        "chain": CHAIN.replace('event="go"', 'event="t"'),
    }[shape]
    machine = statifier.compile(source)
    state, _ = initialize(machine, session_id="sess_shape")
    events = [Event(name="t", caller_context=i) for i in range(6)]
    full = _drive(state, events, full=True)
    _drive(state, events, full=False)
    assert _replays(machine) == 2  # one step per configuration
    _assert_same(full, _drive(state, events, full=False))


def test_a_fresh_execution_replays_the_states_entered_on_the_way() -> None:
    machine = statifier.compile(CHAIN)
    warm, _ = initialize(machine, session_id="sess_warm")
    for _ in range(4):
        warm, _ = handle_event(warm, "go")
    fresh, _ = initialize(machine, session_id="sess_fresh")
    replayed, out = handle_event(fresh, "go")
    assert out == []
    ids = {machine.states[i].id for i in replayed.entered}
    assert {"l1", "l2", "l3", "right"} <= ids
    machine._cache.pop(_replay.STEPS)
    assert handle_event(fresh, "go") == (replayed, [])


@pytest.mark.parametrize(
    ("rounds", "limits", "reason"),
    [(3, MacrostepLimits(), "rounds"), (None, MacrostepLimits(steps=70), "steps")],
)
def test_a_step_that_does_not_fit_the_budget_runs_in_full(
    rounds: int | None, limits: MacrostepLimits, reason: str
) -> None:
    machine = statifier.compile(CHAIN)
    roomy, _ = initialize(machine, session_id="sess_roomy")
    handle_event(roomy, "go")
    assert _replays(machine) == 1
    tight, _ = initialize(
        machine, session_id="sess_tight", max_macrostep_rounds=rounds, limits=limits
    )
    step = handle_event(tight, "go")
    exhausted = [e for e in step[1] if isinstance(e, effects.BudgetExhausted)]
    assert [e.reason for e in exhausted] == [reason]
    machine._cache.pop(_replay.STEPS)
    assert handle_event(tight, "go") == step


def test_a_replay_carries_routes_context_and_event() -> None:
    machine = statifier.compile(CHAIN)
    state, _ = initialize(machine, session_id="sess_ctx", routes=frozenset({"#_parent"}))
    handle_event(state, "go")
    routes: Any = frozenset({"#_scxml_other"})
    event = Event(name="go", data={"k": 1}, caller_context={"who": "host"})
    replayed, out = handle_event(state, event, routes=routes)
    machine._cache.pop(_replay.STEPS)
    assert handle_event(state, event, routes=routes) == (replayed, out)
    assert replayed.routes == routes
    assert replayed.caller_context == {"who": "host"}
    assert replayed.datamodel["_event"]["data"] == {"k": 1}
    kept, _ = handle_event(state, event)
    assert kept.routes == frozenset({"#_parent"})


def test_guarded_or_content_steps_are_not_remembered() -> None:
    machine = statifier.compile(
        f"""<scxml {NS}><datamodel><data id="n" expr="0"/></datamodel>
        <state id="a"><transition event="g" cond="n &lt; 5" target="b"/>
          <transition event="c" target="b"><assign location="n" expr="n + 1"/></transition>
        </state><state id="b"><transition event="back" target="a"/></state></scxml>"""
    )
    state, _ = initialize(machine, session_id="sess_guarded")
    handle_event(state, "g")
    handle_event(state, "c")
    assert _replays(machine) == 0
    state, _ = handle_event(state, "c")
    handle_event(state, "back")
    assert _replays(machine) == 1
