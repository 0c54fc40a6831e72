"""Export and import of a position by state id: crossing chart revisions."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import statifier
from statifier.budget import MacrostepLimits
from statifier.core import effects as fx
from statifier.core.position import (
    EXPORT_FORMAT,
    ImportRefused,
    MissingVariables,
    NotQuiescent,
    UnknownInvocations,
    UnknownStates,
    dumps,
    export_position,
    import_position,
)
from statifier.core.state import MachineState

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'
WORKER = frozenset({"test:worker"})

V1 = f"""<scxml {NS} initial="open" name="pickup">
  <datamodel><data id="book" expr="'Dune'"/><data id="reminders" expr="0"/></datamodel>
  <state id="open">
    <history id="last"/>
    <state id="available"><transition event="hold" target="on_hold"/></state>
    <state id="on_hold">
      <onentry><send id="expiry" event="pickup.expired" delay="3d"/></onentry>
      <onexit><cancel sendid="expiry"/></onexit>
      <invoke id="notifier" type="test:worker"/>
      <invoke type="test:worker"/>
      <transition event="remind" type="internal">
        <assign location="reminders" expr="reminders + 1"/>
      </transition>
      <transition event="pickup.expired" target="available"/>
    </state>
    <transition event="pause" target="paused"/>
  </state>
  <state id="paused"><transition event="resume" target="last"/></state>
</scxml>"""


def compile_(source: str, **edits: str) -> statifier.Machine:
    """Compile ``source`` after replacing every occurrence of each key of ``edits``."""
    for old, new in edits.items():
        assert old in source, old
        source = source.replace(old, new)
    return statifier.compile(source)


def drive(machine: statifier.Machine, *events: str) -> MachineState:
    """A fresh execution of ``machine`` after ``events``."""
    state, _ = statifier.initialize(machine, session_id="loan_7", invoke_types=WORKER)
    for name in events:
        state, _ = statifier.handle_event(state, statifier.Event(name=name))
    return state


@pytest.fixture(scope="module")
def v1() -> statifier.Machine:
    """The first revision."""
    return statifier.compile(V1)


def test_the_export_names_states_by_id_and_is_json(v1: statifier.Machine) -> None:
    state = drive(v1, "hold", "remind")
    exported = export_position(state)
    assert exported["format"] == EXPORT_FORMAT
    assert exported["identity"] == v1.identity
    assert exported["configuration"] == ["open", "on_hold"]
    assert exported["entered"] == ["open", "available", "on_hold"]
    assert exported["history"] == {}
    assert exported["invocations"] == [
        {"state": "on_hold", "index": 0, "node_id": "notifier", "id": "notifier"},
        {"state": "on_hold", "index": 1, "node_id": None, "id": "on_hold.inv_1"},
    ]
    assert exported["datamodel"]["reminders"] == 1
    assert exported["counters"]["timer"] == state.timer_counter == 1
    assert json.loads(json.dumps(exported)) == exported
    exported["datamodel"]["reminders"] = 99  # a copy: the state is untouched
    assert state.datamodel["reminders"] == 1


def test_export_then_import_into_the_same_chart_is_the_same_position(
    v1: statifier.Machine,
) -> None:
    state = drive(v1, "hold", "remind", "pause")
    again = import_position(export_position(state), v1, invoke_types=WORKER)
    assert dumps(again) == dumps(dataclasses.replace(state, caller_context=None))


def test_a_position_at_work_is_not_exported(v1: statifier.Machine) -> None:
    state = drive(v1, "hold")
    busy = dataclasses.replace(state, internal_queue=(statifier.Event(name="x"),))
    with pytest.raises(NotQuiescent, match="1 events wait"):
        export_position(busy)


def test_renamed_states_migrate_through_the_state_map(v1: statifier.Machine) -> None:
    v2 = compile_(V1, on_hold="held", last="previous")
    state = drive(v1, "hold", "remind", "pause")
    assert state.active_leaf_ids() == ("paused",)
    moved = import_position(
        export_position(state),
        v2,
        state_map={"on_hold": "held", "last": "previous"},
        invoke_types=WORKER,
    )
    assert moved.machine is v2
    assert moved.history == {v2.state_ids["previous"]: (v2.state_ids["held"],)}
    assert moved.datamodel["reminders"] == 1
    resumed, _ = statifier.handle_event(moved, statifier.Event(name="resume"))
    assert resumed.active_leaf_ids() == ("held",)


def test_timers_and_invocations_keep_their_keys(v1: statifier.Machine) -> None:
    v2 = compile_(V1, on_hold="held")
    state = drive(v1, "hold")
    moved = import_position(
        export_position(state), v2, state_map={"on_hold": "held"}, invoke_types=WORKER
    )
    assert moved.session_id == state.session_id
    assert set(moved.live_invocations()) == {"notifier", "on_hold.inv_1"}
    assert (moved.timer_counter, moved.send_counter) == (state.timer_counter, state.send_counter)
    # the next timer continues the ordinals, and the expiry can still be cancelled by id
    _, effects = statifier.handle_event(moved, statifier.Event(name="pickup.expired"))
    (cancel,) = [e for e in effects if isinstance(e, fx.Cancel)]
    assert (cancel.send_id, cancel.ordinal) == ("expiry", state.timer_counter + 1)
    stops = {e.invoke_id for e in effects if isinstance(e, fx.CancelInvoke)}
    assert stops == {"notifier", "on_hold.inv_1"}


def test_states_that_are_gone_are_named_all_at_once(v1: statifier.Machine) -> None:
    v2 = compile_(V1, on_hold="held", last="previous")
    state = drive(v1, "hold", "pause")
    with pytest.raises(UnknownStates) as caught:
        import_position(export_position(state), v2, invoke_types=WORKER)
    assert caught.value.state_ids == ("last", "on_hold")
    assert "map them with state_map" in str(caught.value)


def test_a_state_mapped_to_nothing_real_is_unknown(v1: statifier.Machine) -> None:
    state = drive(v1, "hold")
    with pytest.raises(UnknownStates) as caught:
        import_position(export_position(state), v1, state_map={"on_hold": "nowhere"})
    assert caught.value.state_ids == ("on_hold",)


def test_states_once_entered_but_gone_are_dropped(v1: statifier.Machine) -> None:
    v2 = compile_(
        V1, **{'<state id="available">': '<state id="free">', 'target="available"': 'target="free"'}
    )
    state = drive(v1, "hold")  # 'available' was entered, and is gone
    moved = import_position(export_position(state), v2, invoke_types=WORKER)
    assert "available" not in {v2.states[i].id for i in moved.entered}
    assert moved.active_leaf_ids() == ("on_hold",)


def test_unnamed_states_must_be_mapped() -> None:
    source = (
        f'<scxml {NS}><state><transition event="go" target="b"/></state><state id="b"/></scxml>'
    )
    old = statifier.compile(source)
    state, _ = statifier.initialize(old, session_id="s")
    exported = export_position(state)
    assert exported["configuration"] == ["__state1"]
    with pytest.raises(UnknownStates, match="__state1"):
        import_position(exported, old)
    named = statifier.compile(source.replace("<state>", '<state id="a">'))
    moved = import_position(exported, named, state_map={"__state1": "a"})
    assert moved.active_leaf_ids() == ("a",)
    # an unnamed state of the new chart is a target by its synthesized id
    same = import_position(exported, old, state_map={"__state1": "__state1"})
    assert same.active_leaf_ids() == ("__state1",)


def test_an_invocation_whose_invoke_is_gone_refuses(v1: statifier.Machine) -> None:
    v2 = compile_(V1, **{'<invoke id="notifier" type="test:worker"/>': ""})
    state = drive(v1, "hold")
    with pytest.raises(UnknownInvocations) as caught:
        import_position(export_position(state), v2, invoke_types=WORKER)
    # the unnamed invoke moved to place 0 and is not guessed either
    assert caught.value.invocations == (("on_hold", "notifier"), ("on_hold", "on_hold.inv_1"))


def test_an_invoke_with_an_authored_id_is_found_where_it_moved(v1: statifier.Machine) -> None:
    swapped = compile_(
        V1,
        **{
            '<invoke id="notifier" type="test:worker"/>\n      <invoke type="test:worker"/>': (
                '<invoke type="test:other"/><invoke id="notifier" type="test:worker"/>'
            )
        },
    )
    state = drive(v1, "hold")
    exported = export_position(state)
    exported["invocations"] = exported["invocations"][:1]
    moved = import_position(exported, swapped, invoke_types={*WORKER, "test:other"})
    assert moved.invocations == {(swapped.state_ids["on_hold"], 1): "notifier"}


def test_datamodel_changes_apply_and_new_variables_need_a_value(v1: statifier.Machine) -> None:
    declared = '<data id="reminders" expr="0"/>'
    v2 = compile_(V1, **{declared: declared + '<data id="branch"/>'})
    state = drive(v1, "hold")
    with pytest.raises(MissingVariables) as caught:
        import_position(export_position(state), v2, invoke_types=WORKER)
    assert caught.value.names == ("branch",)
    moved = import_position(
        export_position(state),
        v2,
        datamodel={"branch": 3, "reminders": 5},
        invoke_types=WORKER,
    )
    assert (moved.datamodel["branch"], moved.datamodel["reminders"]) == (3, 5)
    assert moved.datamodel["book"] == "Dune"


def test_late_bound_variables_of_states_not_entered_are_bound_later() -> None:
    source = f"""<scxml {NS} binding="late">
      <state id="a"><transition event="go" target="b"/></state>
      <state id="b"><datamodel><data id="x" expr="41 + 1"/></datamodel></state>
    </scxml>"""
    old = statifier.compile(source.replace('<data id="x" expr="41 + 1"/>', ""))
    new = statifier.compile(source)
    state, _ = statifier.initialize(old, session_id="s")
    moved = import_position(export_position(state), new)
    stepped, _ = statifier.handle_event(moved, statifier.Event(name="go"))
    assert stepped.datamodel["x"] == 42


def test_system_variables_cannot_be_set(v1: statifier.Machine) -> None:
    with pytest.raises(ImportRefused, match="_sessionid"):
        import_position(export_position(drive(v1)), v1, datamodel={"_sessionid": "other"})


def test_the_chart_name_follows_the_new_revision(v1: statifier.Machine) -> None:
    renamed = compile_(V1, **{'name="pickup"': 'name="pickup2"'})
    moved = import_position(export_position(drive(v1)), renamed)
    assert moved.datamodel["_name"] == "pickup2"


def test_an_illegal_result_is_refused_by_the_meaning_checks(v1: statifier.Machine) -> None:
    state = drive(v1)  # in open/available
    with pytest.raises(ImportRefused, match="would not be valid") as caught:
        import_position(export_position(state), v1, state_map={"available": "paused"})
    assert "'pickup' has 2 active children" in str(caught.value)


def test_budgets_are_kept_and_checked_against_the_host_ceiling(v1: statifier.Machine) -> None:
    exported = export_position(drive(v1))
    assert import_position(exported, v1).limits == drive(v1).limits
    with pytest.raises(ImportRefused, match="allows at most"):
        import_position(exported, v1, max_limits=MacrostepLimits(steps=10))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "other"}, "is not 'statifier-export-1'"),
        ({"extra": 1}, "unexpected \\['extra'\\]"),
        ({"configuration": "open"}, "list of state ids"),
        ({"history": {"last": "x"}}, "history must map"),
        ({"invocations": [{"state": "on_hold"}]}, "invocations\\[0\\]"),
        ({"counters": {"invoke": 1}}, "counters must name"),
        ({"session_id": ""}, "session_id is empty"),
        ({"datamodel": []}, "datamodel must be an object"),
    ],
)
def test_what_is_not_an_export_is_refused(
    v1: statifier.Machine, change: dict[str, Any], message: str
) -> None:
    exported = {**export_position(drive(v1, "hold")), **change}
    with pytest.raises(ImportRefused, match=message):
        import_position(exported, v1, invoke_types=WORKER)
