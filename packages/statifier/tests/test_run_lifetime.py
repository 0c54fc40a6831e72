"""A public call of the core leaves no reference cycle behind: its working copy is freed
when the call returns, not by the cyclic garbage collector (which would also keep the
resumed state and the call's effects alive until it runs)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import statifier
from statifier import Event, handle_event
from statifier.core.algorithm import cancel, deliver_internal

CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python">
  <datamodel><data id="count" expr="0"/><data id="box" expr="{'last': 0}"/></datamodel>
  <state id="open">
    <transition event="go" cond="_event.data['n'] &gt;= 0" target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="box.last" expr="_event.data.n"/>
      <log label="count" expr="count"/>
    </transition>
    <transition event="ping"><raise event="pong"/></transition>
  </state>
</scxml>
"""


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collector")
def test_calls_leave_no_cyclic_garbage() -> None:
    machine = statifier.compile(CHART)
    state, _ = statifier.initialize(machine, session_id="s")
    for n in range(20):
        state, _ = handle_event(state, Event(name="go", data={"n": n}))
        state, _ = handle_event(state, "ping")
    state, _ = deliver_internal(state, Event(name="go", type="internal", data={"n": 1}))
    state, _ = cancel(state)
    assert gc.collect() == 0
    assert state.datamodel["count"] == 21
