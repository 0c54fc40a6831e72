"""What users read of an ECMAScript chart's variables is plain data (ADR 22).

Positions keep the stored form (``{"$ref": 0}``, ``#objects``, tags); ``state.datamodel``,
``export_position``, traced values, ``statifier run`` and live sessions show plain JSON
values: shared objects as equal copies, a cycle as ``CIRCULAR``, bounded.
"""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import statifier
import statifier.testing
from statifier.cli import main
from statifier.core import effects as fx
from statifier.core.position import dumps, export_position, import_position, loads
from statifier.datamodel import stored_variables
from statifier.datamodel.ecmascript import CIRCULAR, TRUNCATED, VariablesView
from statifier.datamodel.ecmascript.plain import MAX_DEPTH, MAX_REPEATED, PlainDecoder
from statifier.runtime.session import Session
from statifier.virtual import run_chart

from engine_support.ecmascript import NS, chart, logged

SHARED = chart(
    """
    <datamodel><data id="o" expr="({k: 1})"/><data id="p" expr="o"/></datamodel>
    <state id="a">
      <transition event="bump"><assign location="p.k" expr="p.k + 1"/></transition>
      <transition event="loop"><assign location="o.self" expr="o"/></transition>
      <transition event="same"><log expr="o === p"/></transition>
      <transition event="end" target="z"/>
    </state>
    <final id="z"/>
    """
)


def user(datamodel: Any) -> dict[str, Any]:
    """The chart's variables (system variables left out), as plain data."""
    return {k: v for k, v in datamodel.items() if not k.startswith("_")}


# -- the public attribute ----------------------------------------------------------------


def test_state_datamodel_shows_shared_objects_as_equal_copies() -> None:
    state, _ = statifier.initialize(SHARED, session_id="sess_shared")
    assert user(state.datamodel) == {"o": {"k": 1}, "p": {"k": 1}}
    assert dict(state.datamodel)["_sessionid"] == "sess_shared"
    assert list(state.datamodel) == ["_sessionid", "_name", "_ioprocessors", "_event", "o", "p"]
    assert "#objects" not in state.datamodel
    assert len(state.datamodel) == 6
    # Positions keep the one object once.
    stored = stored_variables(state.datamodel)
    assert stored["o"] == stored["p"] == {"$ref": 0}
    assert stored["#objects"] == [{"k": 1}]
    state, _ = statifier.handle_event(state, "bump")
    assert user(state.datamodel) == {"o": {"k": 2}, "p": {"k": 2}}
    _, effects = statifier.handle_event(loads(dumps(state), SHARED), "same")
    assert logged(effects) == [True]


def test_a_cycle_reads_as_the_circular_marker() -> None:
    state, _ = statifier.initialize(SHARED, session_id="sess_cycle")
    state, _ = statifier.handle_event(state, "loop")
    assert CIRCULAR == "[Circular]"
    expected = {"k": 1, "self": CIRCULAR}
    assert user(state.datamodel) == {"o": expected, "p": expected}
    json.dumps(dict(state.datamodel))  # plain data: JSON writes it
    assert user(loads(dumps(state), SHARED).datamodel) == user(state.datamodel)


def test_values_json_cannot_say_read_as_json_stringify_writes_them() -> None:
    machine = chart(
        """
        <datamodel>
          <data id="v" expr="({$ref: 0, $$x: 1, u: undefined, f: function () {},
            n: [undefined, NaN, -0, Infinity, function () {}], m: new Map([[1, 2]]),
            s: new Set([1]), r: /x/g, b: 12345678901234567890n, nul: null})"/>
          <data id="nothing"/><data id="none" expr="null"/><data id="fn" expr="Math.max"/>
          <data id="ev"/>
        </datamodel>
        <state id="a">
          <transition event="keep"><assign location="ev" expr="_event.data"/></transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_json")
    state, _ = statifier.handle_event(
        state, statifier.Event(name="keep", data={"$y": [1, {"z": None}]})
    )
    assert user(state.datamodel) == {
        "v": {
            "$ref": 0,
            "$$x": 1,
            "n": [None, None, 0, None, None],
            "m": {},
            "s": {},
            "r": {},
            "b": 12345678901234567890,
            "nul": None,
        },
        "nothing": None,
        "none": None,
        "fn": None,
        "ev": {"$y": [1, {"z": None}]},
    }
    assert stored_variables(state.datamodel)["ev"] == {"$system": ["_event", "data"]}
    assert user(loads(dumps(state), machine).datamodel) == user(state.datamodel)


def test_nesting_past_the_depth_bound_is_truncated() -> None:
    assert MAX_DEPTH == 256
    machine = chart(
        """
        <datamodel><data id="v" expr="0"/></datamodel>
        <state id="a">
          <transition event="deep">
            <script>v = []; var o = v; for (var i = 0; i &lt; _event.data; i++) {
              var n = []; o.push(n); o = n }</script>
          </transition>
        </state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_deep")

    def depth(value: Any) -> int:
        levels = 0
        while isinstance(value, list) and value:
            value, levels = value[0], levels + 1
        return levels if value != TRUNCATED else -levels

    # 255 nested arrays under v: the innermost (at depth 255) is still shown.
    at_bound, _ = statifier.handle_event(state, statifier.Event(name="deep", data=255))
    assert depth(at_bound.datamodel["v"]) == 255
    assert json.dumps(at_bound.datamodel["v"]).count(TRUNCATED) == 0
    # One more: the array at depth 256 is what is cut.
    past, _ = statifier.handle_event(state, statifier.Event(name="deep", data=256))
    assert depth(past.datamodel["v"]) == -256


def test_shared_objects_written_out_again_are_bounded() -> None:
    # Each level holds the one below twice: 40 levels would write out 2**40 values.
    machine = chart(
        """
        <datamodel><data id="v" expr="0"/></datamodel>
        <state id="a"><onentry>
          <script>var o = 0; for (var i = 0; i &lt; 40; i++) o = [o, o]; v = o</script>
        </onentry></state>
        """
    )
    state, _ = statifier.initialize(machine, session_id="sess_doubling")
    text = json.dumps(state.datamodel["v"])
    assert TRUNCATED in text
    assert MAX_REPEATED < text.count("[") + text.count("0") < 3 * MAX_REPEATED


def test_the_repeat_bound_counts_every_value_written_again() -> None:
    stored = {"#objects": [[1, 2]], "v": [{"$ref": 0}, {"$ref": 0}, {"$ref": 0}]}
    # The first copy is free; each of the two others writes out 3 values (the list, 1, 2).
    exact = PlainDecoder(stored, {}, repeated=6).variable("v")
    assert exact == [[1, 2], [1, 2], [1, 2]]
    short = PlainDecoder(stored, {}, repeated=5).variable("v")
    assert short == [[1, 2], [1, 2], [1, TRUNCATED]]


def test_stored_data_from_anywhere_never_fails_to_read() -> None:
    tampered = {
        "_sessionid": "sess_t",
        "#objects": [{"$ref": 0}, "not an object", [{"$ref": 1}]],
        "a": {"$ref": 7},
        "b": {"$nonsense": 1},
        "c": {"$ref": 0},
        "d": {"$ref": 2},
        "e": {"$bigint": "12x"},
        "f": {"$system": ["_event", "data", "missing"]},
        "g": {"$": 1, "k": 2},
        "h": [{"$undefined": True}, {"$builtin": "Math.max"}],
    }
    view = VariablesView.from_stored(tampered)
    assert user(view) == {
        "a": None,
        "b": None,
        "c": None,
        "d": [None],
        "e": None,
        "f": None,
        "g": None,
        "h": [None, None],
    }


# -- the view as a value ----------------------------------------------------------------


def test_the_view_is_read_only_and_copies_to_its_stored_form() -> None:
    state, _ = statifier.initialize(SHARED, session_id="sess_value")
    view = state.datamodel
    assert isinstance(view, VariablesView)
    with pytest.raises(TypeError):
        view["o"] = 1  # type: ignore[index]
    for duplicate in (copy.copy(view), copy.deepcopy(view), pickle.loads(pickle.dumps(view))):  # noqa: S301
        assert duplicate == view
        assert stored_variables(duplicate) == stored_variables(view)
    # A view equals any mapping of the same plain values; two views, the same stored form.
    assert view == dict(view)
    assert dict(view) == view
    copied = VariablesView.from_stored(
        {**stored_variables(view), "#objects": [], "o": {"k": 1}, "p": {"k": 1}}
    )
    assert dict(copied) == dict(view)
    assert copied != view


def test_python_charts_keep_a_dict() -> None:
    machine = statifier.compile(
        f'<scxml {NS.replace("ecmascript", "python")}><datamodel><data id="o" expr="{{}}"/>'
        '</datamodel><state id="a"/></scxml>'
    )
    state, _ = statifier.initialize(machine, session_id="sess_py")
    assert type(state.datamodel) is dict
    assert stored_variables(state.datamodel) is state.datamodel


# -- every surface ------------------------------------------------------------------------


def test_export_position_shows_plain_data_and_keeps_the_stored_form() -> None:
    state, _ = statifier.initialize(SHARED, session_id="sess_export")
    exported = export_position(state)
    assert user(exported["datamodel"]) == {"o": {"k": 1}, "p": {"k": 1}}
    assert exported["stored_datamodel"]["p"] == {"$ref": 0}
    json.dumps(exported)
    # Importing keeps what plain data cannot say: o and p stay one object.
    imported = import_position(exported, SHARED)
    assert imported.datamodel == state.datamodel
    bumped, _ = statifier.handle_event(imported, "bump")
    assert user(bumped.datamodel) == {"o": {"k": 2}, "p": {"k": 2}}


def test_an_export_edited_by_hand_takes_the_edit_as_data() -> None:
    state, _ = statifier.initialize(SHARED, session_id="sess_edit")
    exported = export_position(state)
    exported["datamodel"]["p"] = {"k": 1.0}  # a float now: an edit, not the same data
    exported["datamodel"]["o"] = {"$function": "x"}
    imported = import_position(exported, SHARED)
    stored = stored_variables(imported.datamodel)
    assert stored["p"] == {"k": 1.0}
    assert stored["o"] == {"$$function": "x"}
    bumped, _ = statifier.handle_event(imported, "bump")
    assert user(bumped.datamodel) == {"o": {"$function": "x"}, "p": {"k": 2}}
    # Without the stored form the plain data is taken as data throughout.
    del exported["stored_datamodel"]
    exported["datamodel"]["p"] = {"k": 1}
    plain = import_position(exported, SHARED)
    assert stored_variables(plain.datamodel)["p"] == {"k": 1}
    assert "#objects" not in stored_variables(plain.datamodel)


def test_an_export_refuses_a_stored_form_that_is_not_one() -> None:
    state, _ = statifier.initialize(SHARED, session_id="sess_bad")
    exported = export_position(state)
    exported["stored_datamodel"] = [1]
    with pytest.raises(statifier.core.position.ImportRefused, match="stored_datamodel"):
        import_position(exported, SHARED)
    exported = export_position(state)
    exported["datamodel"]["#objects"] = []
    with pytest.raises(statifier.core.position.ImportRefused, match="not a variable name"):
        import_position(exported, SHARED)


def test_traced_values_and_the_initial_datamodel_are_plain() -> None:
    state, effects = statifier.initialize(
        SHARED, session_id="sess_trace", trace=True, datamodel={"seed": {"$x": 1}}
    )
    (init,) = [e for e in effects if isinstance(e, fx.DatamodelInit)]
    assert init.datamodel["seed"] == {"$x": 1}
    changes = [e for e in effects if isinstance(e, fx.DatamodelChange)]
    assert [(c.location, c.new_value) for c in changes] == [("o", {"k": 1}), ("p", {"k": 1})]
    _, effects = statifier.handle_event(state, "loop")
    (change,) = [e for e in effects if isinstance(e, fx.DatamodelChange)]
    assert change.new_value == {"k": 1, "self": CIRCULAR}


def test_statifier_run_prints_plain_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cycle.scxml"
    path.write_text(
        f'<scxml {NS} initial="a"><datamodel><data id="o" expr="({{k: 1}})"/>'
        '<data id="p" expr="[o, o]"/></datamodel><state id="a">'
        '<transition event="go" target="b"><assign location="o.self" expr="o"/>'
        '<assign location="p" expr="p"/></transition></state><state id="b"/></scxml>'
    )
    assert main(["run", str(path), "-e", "go"]) == 0
    out = capsys.readouterr().out
    assert "$ref" not in out
    writes = [line.strip() for line in out.splitlines() if line.strip().startswith("set ")]
    assert writes == [
        "set o = {'k': 1}",
        "set p = [{'k': 1}, {'k': 1}]",
        "set o.self = {'k': 1, 'self': '[Circular]'}",
        "set p = [{'k': 1, 'self': '[Circular]'}, {'k': 1, 'self': '[Circular]'}]",
    ]
    assert main(["run", "--json", str(path), "-e", "go"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    values = [r["new_value"] for r in records if r.get("effect") == "DatamodelChange"]
    assert values[-1] == [{"k": 1, "self": CIRCULAR}, {"k": 1, "self": CIRCULAR}]


def test_the_virtual_driver_and_a_live_session_show_plain_values() -> None:
    run = run_chart(SHARED, events=["loop", "end"])
    assert run.configuration == ("z",)
    assert user(run.state.datamodel)["p"] == {"k": 1, "self": CIRCULAR}


async def test_a_live_session_shows_plain_values() -> None:
    session = await Session.start(SHARED, session_id="sess_live")
    session.send_event("bump")
    session.send_event("end")
    await session.wait_halted()
    assert user(session.snapshot().datamodel) == {"o": {"k": 2}, "p": {"k": 2}}


def test_the_testing_toolkit_checks_plain_values() -> None:
    run = statifier.testing.start(SHARED)
    run.assert_datamodel(o={"k": 1}, p={"k": 1})
    run.send("loop")
    run.assert_datamodel(p={"k": 1, "self": CIRCULAR})
    assert run.datamodel == {"o": {"k": 1, "self": CIRCULAR}, "p": {"k": 1, "self": CIRCULAR}}
    with pytest.raises(statifier.testing.ChartAssertionError) as failed:
        run.assert_datamodel(o={"k": 2})
    assert "$ref" not in str(failed.value)
