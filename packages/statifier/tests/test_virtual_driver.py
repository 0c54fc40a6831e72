"""The virtual driver's host invocations (answered by the caller) and its forks."""

from __future__ import annotations

import pytest
import statifier
from statifier.virtual import VirtualDriver

from engine_support import charts
from engine_support.counting import python_steps

CAPTURE = statifier.compile(charts.CAPTURE)


def started(invoke_types: list[str] | None = None) -> VirtualDriver:
    driver = VirtualDriver(CAPTURE, invoke_types=invoke_types)
    driver.start()
    driver.run_until_idle()
    return driver


def test_a_host_invocation_stays_open_until_answered() -> None:
    driver = started(invoke_types=["payments:capture"])
    (open_,) = driver.open_invocations()
    assert (open_.session_id, open_.effect.invoke_id) == ("sess_virtual", "cap")
    assert open_.effect.params == {"amount": 125}
    driver.answer_invocation("cap", {"capture_id": "c1"})
    driver.run_until_idle()
    assert driver.state.final_configuration == ("settled",)
    assert driver.state.datamodel["result"] == {"capture_id": "c1"}
    assert driver.open_invocations() == []
    assert driver.errors == []


def test_a_failed_host_invocation_is_heard_as_its_error_event() -> None:
    driver = started(invoke_types=["payments:capture"])
    driver.fail_invocation("cap", "declined")
    driver.run_until_idle()
    assert driver.state.final_configuration == ("failed",)
    assert driver.state.datamodel["result"] == {"reason": "declined"}


def test_an_unregistered_invoke_type_is_refused_by_the_core() -> None:
    driver = started()
    assert [error.name for _, error in driver.errors] == ["error.execution"]
    assert driver.open_invocations() == []


def test_leaving_the_state_closes_the_invocation() -> None:
    driver = started(invoke_types=["payments:capture"])
    driver.advance(30_000)
    assert driver.state.final_configuration == ("failed",)
    assert driver.open_invocations() == []
    with pytest.raises(LookupError, match="no open invocation 'cap'"):
        driver.answer_invocation("cap")


def test_a_fork_goes_its_own_way() -> None:
    driver = started(invoke_types=["payments:capture"])
    effects_before = list(driver.effects)
    twin = driver.fork()
    assert twin.effects == []
    assert twin.errors == []
    assert twin.pending_timers() == driver.pending_timers()
    twin.answer_invocation("cap")
    twin.run_until_idle()
    assert twin.state.final_configuration == ("settled",)
    assert twin.pending_timers() == []
    # The original still waits for its answer, its timer pending, its records unchanged.
    assert driver.state.active_leaf_ids() == ("capturing",)
    assert [timer.effect.send_id for timer in driver.pending_timers()] == ["give_up"]
    assert len(driver.open_invocations()) == 1
    assert driver.effects == effects_before
    driver.advance(30_000)
    assert driver.state.final_configuration == ("failed",)
    assert twin.state.final_configuration == ("settled",)


RESTARTED = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" initial="idle">
      <datamodel>
        <data id="entries" expr="0"/>
        <data id="dones" expr="0"/>
      </datamodel>
      <state id="idle"><transition event="go" target="s"/></state>
      <state id="s">
        <onentry><assign location="entries" expr="entries + 1"/></onentry>
        <invoke id="c" type="scxml">
          <param name="quick" expr="entries == 1"/>
          <content>
            <scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" initial="w">
              <datamodel><data id="quick" expr="False"/></datamodel>
              <state id="w"><transition cond="quick" target="f"/></state>
              <final id="f"/>
            </scxml>
          </content>
        </invoke>
        <transition event="done.invoke.c" target="after">
          <assign location="dones" expr="dones + 1"/>
        </transition>
        <transition event="restart" target="s"/>
      </state>
      <state id="after"/>
    </scxml>"""
)


def test_a_done_queued_before_its_invoke_id_restarts_is_not_the_new_childs() -> None:
    """The first child finishes at once; its done waits behind ``restart``, which starts
    a second child under the same id: that done is the first child's, and is dropped."""
    driver = VirtualDriver(RESTARTED)
    driver.start()
    driver.send("go")
    driver.send("restart")
    driver.run_until_idle()
    assert driver.state.datamodel["entries"] == 2
    assert driver.state.datamodel["dones"] == 0
    assert driver.state.configuration_ids() == ("s",)
    children = [s for s in driver.sessions.values() if s.parent is not None and not s.halted]
    assert len(children) == 1  # the second child runs, the first finished


# -- long runs: a step costs what the live sessions make it cost -------------------------

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'

RESTARTING = statifier.compile(
    f"""<scxml {NS} initial="s">
      <state id="s">
        <onentry><send event="again" delay="60s"/></onentry>
        <invoke type="scxml">
          <content><scxml {NS} initial="w"><state id="w"/></scxml></content>
        </invoke>
        <transition event="again" target="s"/>
      </state>
    </scxml>"""
)
"""A child started every minute of virtual time (the first at 0), cancelled the next."""


def restarted_for(hours: int) -> tuple[int, VirtualDriver]:
    """The work of ``hours`` of virtual time of ``RESTARTING``, and the driver after it."""
    driver = VirtualDriver(RESTARTING, session_id="top")
    driver.start()
    return python_steps(lambda: driver.advance(hours * 3_600_000)), driver


def test_a_long_run_costs_in_proportion_to_its_virtual_time() -> None:
    # The halted children stay in ``sessions``, but a step looked through all of them
    # (for a queue, for the send targets, for the tree's count): four times the virtual
    # time cost 7.8 times the work; and every start compiled the child's chart again.
    short, _ = restarted_for(3)
    long, driver = restarted_for(12)
    assert len(driver.sessions) == 1 + 12 * 60 + 1
    assert [s.session_id for s in driver.sessions.values() if not s.halted] == [
        "top",
        f"top.child{12 * 60 + 1}",
    ]
    assert long < 4.2 * short
    machines = {id(s.state.machine) for s in driver.sessions.values() if s.parent is not None}
    assert len(machines) == 1  # compiled once, shared as sessions of one chart share it


def test_a_fork_steps_only_its_own_live_sessions() -> None:
    _, driver = restarted_for(1)
    twin = driver.fork()
    twin.advance(60_000)
    driver.advance(120_000)
    assert twin.now_ms == 3_660_000
    assert driver.now_ms == 3_720_000
    live = [s.session_id for s in twin.sessions.values() if not s.halted]
    assert live == ["top", "top.child62"]
    assert [s.session_id for s in driver.sessions.values() if not s.halted] == [
        "top",
        "top.child63",
    ]
    assert driver.sessions[live[1]] is not twin.sessions[live[1]]
