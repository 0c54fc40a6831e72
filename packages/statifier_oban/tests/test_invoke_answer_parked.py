"""An invocation answered while its parent is parked: the answer waits on its job, and the
handler is not run again while it waits (the snooze keeps the answer; ADR 7's amendment).
"""

from __future__ import annotations

import statifier
from statifier_oban import Ok
from statifier_oban.testing import DurableEnv

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="python"'

CAPTURE = statifier.compile(
    f"""<scxml {NS} name="capture_once" initial="capturing">
  <datamodel><data id="captured" expr="None"/></datamodel>
  <state id="capturing">
    <invoke id="cap" type="payments:capture"/>
    <transition event="done.invoke.cap" target="captured">
      <assign location="captured" expr="_event.data"/>
    </transition>
  </state>
  <final id="captured"/>
</scxml>"""
)


async def test_an_answer_into_a_parked_execution_waits_without_running_its_handler_again(
    durable_env: DurableEnv,
) -> None:
    # Each snooze ran the whole job again, the handler's run included: a capture made 61
    # times in an hour parked (once a minute).
    runs: list[int] = []

    def capture(invoke: object, context: object) -> Ok:
        runs.append(len(runs) + 1)
        return Ok({"capture_id": f"cap_{len(runs)}"})

    durable_env.invocations("payments:capture").answer(capture)
    await durable_env.executions.create(CAPTURE, execution_id="parked-capture")
    await durable_env.executions.park("parked-capture")
    await durable_env.advance("1h")
    assert runs == [1]
    await durable_env.executions.unpark("parked-capture")
    await durable_env.advance("2m")
    await durable_env.assert_done("parked-capture", "captured")
    assert runs == [1]
    _, state = await durable_env.executions.load("parked-capture")
    assert state.datamodel["captured"] == {"capture_id": "cap_1"}
