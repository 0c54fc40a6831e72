"""``MachineState.final_configuration``: where a finished execution ended, from the state."""

from __future__ import annotations

from pathlib import Path

import statifier
from statifier.core import position

ROOT = Path(__file__).resolve().parents[3]
CARD = statifier.compile((ROOT / "examples" / "card_authorization.scxml").read_text())

NESTED = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="work">
      <state id="work" initial="step">
        <state id="step"><transition event="go" target="inner_done"/></state>
        <final id="inner_done"/>
        <transition event="done.state.work" target="end"/>
      </state>
      <final id="other"/>
      <final id="end"/>
    </scxml>"""
)


def test_a_completed_execution_names_the_final_state_it_reached() -> None:
    state, _ = statifier.initialize(CARD, session_id="s")
    state, _ = statifier.handle_event(state, "capture.requested")
    state, effects = statifier.handle_event(state, "capture.succeeded")
    done = [e for e in effects if isinstance(e, statifier.effects.Done)]
    assert state.status == "done"
    assert state.active_leaf_ids() == ()  # every state was exited (exitInterpreter)
    assert state.final_configuration == ("settled",) == done[0].configuration


def test_a_running_execution_has_no_final_configuration() -> None:
    state, _ = statifier.initialize(CARD, session_id="s")
    assert state.final_configuration == ()
    state, _ = statifier.handle_event(state, "capture.requested")
    assert state.final_configuration == ()


def test_a_cancelled_execution_reached_no_final_state() -> None:
    state, _ = statifier.initialize(CARD, session_id="s")
    state, effects = statifier.cancel(state)
    assert state.status == "done"
    assert state.final_configuration == ()
    # The Done effect still says where it stood when it was cancelled.
    assert [e.configuration for e in effects if isinstance(e, statifier.effects.Done)] == [
        ("authorized",)
    ]


def test_only_the_top_level_final_entered_counts() -> None:
    state, _ = statifier.initialize(NESTED, session_id="s")
    state, _ = statifier.handle_event(state, "go")  # inner_done, then done.state.work -> end
    assert state.status == "done"
    assert state.final_configuration == ("end",)


def test_the_final_configuration_survives_a_position_round_trip() -> None:
    state, _ = statifier.initialize(CARD, session_id="s")
    state, _ = statifier.handle_event(state, "capture.requested")
    state, _ = statifier.handle_event(state, "capture.succeeded")
    loaded = position.loads(position.dumps(state), CARD)
    assert loaded == state
    assert loaded.final_configuration == ("settled",)
