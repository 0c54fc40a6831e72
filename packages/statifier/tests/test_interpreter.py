"""Behaviour of the pure core: counters, ids, budget, determinism, invocations, errors."""

from __future__ import annotations

import dataclasses

import pytest
import statifier
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import Event

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def chart(body: str, **attrs: str) -> statifier.Machine:
    extra = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


def of_type[E: fx.Effect](effects: list[fx.Effect], kind: type[E]) -> list[E]:
    return [e for e in effects if isinstance(e, kind)]


TIMERS = chart(
    """
    <datamodel><data id="items" expr="[1, 2, 3]"/></datamodel>
    <state id="a">
      <onentry>
        <foreach array="items" item="i">
          <send id="tick" event="tick" delay="1s"/>
        </foreach>
        <send event="anon" delay="2s"/>
      </onentry>
      <onexit><cancel sendid="tick"/></onexit>
      <transition event="go" target="b"/>
    </state>
    <state id="b"/>
    """
)


def test_ordinals_are_unique_and_foreach_iterations_share_the_author_id() -> None:
    state, effects = statifier.initialize(TIMERS, session_id="sess_t")
    delayed = of_type(effects, fx.SendDelayed)
    assert [e.send_id for e in delayed] == ["tick", "tick", "tick", "send_1"]
    assert [e.ordinal for e in delayed] == [1, 2, 3, 4]
    assert [e.id_from_author for e in delayed] == [True, True, True, False]
    assert {e.c_index for e in delayed[:3]} == {delayed[0].c_index}
    assert delayed[0].delay_ms == 1000
    assert delayed[3].delay_ms == 2000
    state, effects = statifier.handle_event(state, Event(name="go"))
    (cancel,) = of_type(effects, fx.Cancel)
    assert cancel.send_id == "tick"
    assert cancel.ordinal == 5
    assert cancel.owner == ("onexit", 1, 0)
    assert (cancel.macrostep, cancel.microstep) == (2, 1)


def test_replaying_the_same_inputs_gives_byte_identical_effects() -> None:
    runs = []
    for _ in range(2):
        state, first = statifier.initialize(TIMERS, session_id="sess_same")
        state, second = statifier.handle_event(state, Event(name="go"))
        runs.append([dataclasses.astuple(e) for e in first + second])
    assert runs[0] == runs[1]


def test_caller_context_is_copied_onto_effects_of_its_macrostep() -> None:
    state, _ = statifier.initialize(TIMERS, session_id="sess_ctx")
    event = Event(name="go", caller_context={"trace": "t1"})
    _, effects = statifier.handle_event(state, event)
    (cancel,) = of_type(effects, fx.Cancel)
    assert cancel.caller_context == {"trace": "t1"}


def test_round_budget_stops_an_eventless_loop_and_leaves_it_running() -> None:
    machine = chart(
        """
        <datamodel><data id="n" expr="0"/></datamodel>
        <state id="a">
          <transition target="b"><assign location="n" expr="n + 1"/></transition>
        </state>
        <state id="b"><transition target="a"/></state>
        """
    )
    state, effects = statifier.initialize(machine, session_id="s", max_macrostep_rounds=50)
    (exhausted,) = of_type(effects, fx.BudgetExhausted)
    assert exhausted.budget == 50
    assert state.running
    assert state.status == "running"
    assert not of_type(effects, fx.Done)
    assert state.datamodel["n"] == 25
    # Each external event gets a fresh budget.
    state, effects = statifier.handle_event(state, Event(name="poke"))
    assert of_type(effects, fx.BudgetExhausted)
    assert state.datamodel["n"] == 50


def test_counters_macrostep_microstep_round() -> None:
    machine = chart(
        """
        <state id="a"><transition event="go" target="b"/></state>
        <state id="b"><onentry><raise event="next"/></onentry>
          <transition event="next" target="c"/></state>
        <state id="c"><onentry><log label="here" expr="1"/></onentry></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="s")
    assert (state.macrostep, state.microstep) == (1, 1)
    state, effects = statifier.handle_event(state, "go")
    (log,) = of_type(effects, fx.Log)
    # go -> b is microstep 1 (round 0, before the loop); next -> c is microstep 2.
    assert (log.macrostep, log.microstep) == (2, 2)
    assert log.round >= 1
    assert state.active_leaf_ids() == ("c",)


def test_errors_in_expressions_become_error_execution_not_exceptions() -> None:
    machine = chart(
        """
        <state id="a">
          <onentry>
            <assign location="_sessionid" expr="'x'"/>
            <raise event="never"/>
          </onentry>
          <transition event="error.execution" target="b"/>
          <transition event="never" target="fail"/>
        </state>
        <state id="b"/>
        <final id="fail"/>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_e")
    assert state.active_leaf_ids() == ("b",)
    assert state.datamodel["_sessionid"] == "sess_e"


def test_invalid_send_target_aborts_the_block_with_error_execution() -> None:
    machine = chart(
        """
        <state id="a">
          <onentry>
            <send event="x" target="nowhere"/>
            <raise event="after"/>
          </onentry>
          <transition event="error.execution" cond="_event.sendid == 'send_1'" target="ok"/>
        </state>
        <state id="ok"/>
        """
    )
    state, effects = statifier.initialize(machine, session_id="s")
    assert state.active_leaf_ids() == ("ok",)
    assert not of_type(effects, fx.Send)


def test_routes_snapshot_judges_reachability() -> None:
    machine = chart(
        """
        <state id="a">
          <onentry><send event="x" target="#_scxml_other"/></onentry>
          <transition event="error.communication" target="unreachable"/>
          <transition event="*" target="other"/>
        </state>
        <state id="unreachable"/><state id="other"/>
        """
    )
    state, _ = statifier.initialize(machine, session_id="s", routes=frozenset())
    assert state.active_leaf_ids() == ("unreachable",)
    state, effects = statifier.initialize(
        machine, session_id="s", routes=frozenset({"#_scxml_other"})
    )
    assert state.active_leaf_ids() == ("a",)
    (send,) = of_type(effects, fx.Send)
    assert send.target == "#_scxml_other"


def test_deliver_internal_starts_no_macrostep() -> None:
    machine = chart(
        """
        <state id="a"><transition event="error.communication" target="b"/></state>
        <state id="b"/>
        """
    )
    state, _ = statifier.initialize(machine, session_id="s")
    event = planner.undeliverable("send_9", "no route")
    state, effects = statifier.deliver_internal(state, event)
    assert state.macrostep == 1
    assert state.active_leaf_ids() == ("b",)
    (raised,) = of_type(effects, fx.ErrorRaised)
    assert (raised.name, raised.message, raised.sendid, raised.line) == (
        "error.communication",
        "no route",
        "send_9",
        None,
    )


def test_cancel_runs_onexit_cancels_invocations_and_ends_with_done() -> None:
    machine = chart(
        """
        <state id="a">
          <onexit><log label="bye" expr="'a'"/></onexit>
          <invoke id="child" type="scxml">
            <content><scxml version="1.0"><state id="x"/></scxml></content>
          </invoke>
        </state>
        """
    )
    state, effects = statifier.initialize(machine, session_id="s")
    (invoke,) = of_type(effects, fx.Invoke)
    assert invoke.invoke_id == "child"
    assert "<scxml" in invoke.content
    state, effects = statifier.cancel(state)
    assert [type(e) for e in effects] == [fx.Log, fx.CancelInvoke, fx.Done]
    assert state.status == "done"
    assert not state.running
    with pytest.raises(statifier.NotRunningError):
        statifier.handle_event(state, "anything")
    assert statifier.cancel(state) == (state, [])


def test_generated_invoke_ids_finalize_and_done_invoke() -> None:
    machine = chart(
        """
        <datamodel><data id="got" expr="None"/></datamodel>
        <state id="s0">
          <invoke type="scxml" autoforward="true">
            <content><scxml version="1.0"><final id="f"/></scxml></content>
            <finalize><assign location="got" expr="_event.data"/></finalize>
          </invoke>
          <transition event="done.invoke" target="s1"/>
        </state>
        <state id="s1"/>
        """
    )
    state, effects = statifier.initialize(machine, session_id="s")
    (invoke,) = of_type(effects, fx.Invoke)
    assert invoke.invoke_id == "s0.inv_1"
    state, effects = statifier.handle_event(state, Event(name="other"))
    (forward,) = of_type(effects, fx.Autoforward)
    assert forward.event.name == "other"
    done = Event(name="done.invoke.s0.inv_1", invokeid="s0.inv_1", data={"k": 1})
    state, effects = statifier.handle_event(state, done)
    assert state.datamodel["got"] == {"k": 1}
    assert state.active_leaf_ids() == ("s1",)
    # The invocation finished: leaving its state cancels nothing.
    assert not of_type(effects, fx.CancelInvoke)


def test_unregistered_invoke_type_raises_error_execution() -> None:
    machine = chart(
        """
        <state id="a">
          <invoke type="myapp:capture"/>
          <transition event="error.execution" target="b"/>
        </state>
        <state id="b"/>
        """
    )
    state, effects = statifier.initialize(machine, session_id="s")
    assert state.active_leaf_ids() == ("b",)
    assert not of_type(effects, fx.Invoke)
    state, effects = statifier.initialize(machine, session_id="s", invoke_types={"myapp:capture"})
    (invoke,) = of_type(effects, fx.Invoke)
    assert invoke.type == "myapp:capture"
    assert state.active_leaf_ids() == ("a",)


def test_late_binding_assigns_values_on_first_entry() -> None:
    machine = chart(
        """
        <state id="a"><transition event="go" target="b"/></state>
        <state id="b"><datamodel><data id="v" expr="42"/></datamodel></state>
        """,
        binding="late",
    )
    state, _ = statifier.initialize(machine, session_id="s")
    assert "v" in state.datamodel
    assert state.datamodel["v"] is None
    state, _ = statifier.handle_event(state, "go")
    assert state.datamodel["v"] == 42


def test_states_returned_are_not_mutated_by_later_steps() -> None:
    machine = chart(
        """
        <datamodel><data id="d" expr="{'a': [1]}"/></datamodel>
        <state id="a">
          <transition event="go" target="a"><assign location="d['a'][0]" expr="2"/></transition>
        </state>
        """
    )
    first, _ = statifier.initialize(machine, session_id="s")
    second, _ = statifier.handle_event(first, "go")
    assert first.datamodel["d"] == {"a": [1]}
    assert second.datamodel["d"] == {"a": [2]}


def test_done_carries_configuration_and_top_level_donedata() -> None:
    machine = chart(
        """
        <parallel id="p">
          <state id="r1"><final id="f1"/></state>
          <state id="r2"><final id="f2"/></state>
          <transition event="done.state.p" target="end"/>
        </parallel>
        <final id="end"><donedata><param name="ok" expr="True"/></donedata></final>
        """
    )
    state, effects = statifier.initialize(machine, session_id="s")
    (done,) = of_type(effects, fx.Done)
    assert done.configuration == ("end",)
    assert done.donedata == {"ok": True}
    assert state.status == "done"


# A transition from inside a parallel state (one region) to that state's deep history: its domain
# depends on the history, which the exit records. Entering under the exit's domain keeps
# the parallel state; Appendix D read literally entered only its descendants (found by
# the generated-charts property test).
PARALLEL_HISTORY = chart(
    """
    <datamodel><data id="n" expr="0"/></datamodel>
    <state id="start">
      <transition cond="n &lt; 2" target="p"><assign location="n" expr="n + 1"/></transition>
    </state>
    <parallel id="p">
      <history id="deep" type="deep"><transition target="left"/></history>
      <state id="left">
        <state id="inner">
          <transition cond="n &lt; 2" target="deep"><assign location="n" expr="n + 1"/></transition>
        </state>
      </state>
    </parallel>
    """
)


@pytest.mark.parametrize("trace", [False, True])
def test_a_parallel_states_deep_history_targeted_from_inside_keeps_the_parallel_state(
    trace: bool,
) -> None:
    state, effects = statifier.initialize(PARALLEL_HISTORY, trace=trace)
    assert state.datamodel["n"] == 2  # the history transition was taken
    assert set(state.configuration_ids()) == {"p", "left", "inner"}
    loaded = statifier.position.loads(statifier.position.dumps(state), PARALLEL_HISTORY)
    assert loaded.active_leaf_ids() == ("inner",)
    if trace:
        exited, entered = (
            of_type(effects, fx.StatesExited)[-1],
            of_type(effects, fx.StatesEntered)[-1],
        )
        assert set(exited.states) == set(entered.states) == {"p", "left", "inner"}
