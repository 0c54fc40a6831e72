"""Live asyncio sessions: inbox, registry routing, timers, subscribers, invocations, resume."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.runtime import registry
from statifier.runtime.invoke import HandlerContext
from statifier.runtime.session import Halted, Message, ResumeError, Session

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'


def chart(body: str, **attrs: str) -> statifier.Machine:
    extra = " ".join(f'{k}="{v}"' for k, v in attrs.items())
    return statifier.compile(f"<scxml {NS} {extra}>{body}</scxml>")


async def until(predicate: Any, timeout: float = 2.0) -> None:
    """Wait (polling the loop) until ``predicate()`` is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


TOGGLE = chart(
    """
    <state id="off"><transition event="flip" target="on"/></state>
    <state id="on"><transition event="flip" target="off"/>
      <transition event="finish" target="end"/></state>
    <final id="end"/>
    """
)


class Recorder:
    """A subscriber that keeps every message."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Message]] = []

    def __call__(self, session_id: str, message: Message) -> None:
        self.messages.append((session_id, message))

    def kinds(self) -> list[str]:
        return [type(m).__name__ for _, m in self.messages]


async def test_start_registers_with_a_generated_id_and_stop_unregisters() -> None:
    session = await Session.start(TOGGLE)
    assert session.session_id.startswith("sess_")
    assert len(session.session_id) == 31
    assert registry.lookup(session.session_id) is session
    await session.stop()
    assert registry.lookup(session.session_id) is None


async def test_events_are_processed_in_order_and_status_reports_them() -> None:
    session = await Session.start(TOGGLE, session_id="sess_toggle")
    for _ in range(3):
        session.send_event("flip")
    await until(lambda: session.status().macrostep == 4)
    status = session.status()
    assert status.status == "running"
    assert status.configuration == ("on",)
    assert status.queued_events == 0
    assert status.pending_timers == 0
    await session.stop()


async def test_halted_session_queues_events_forever_and_never_raises() -> None:
    recorder = Recorder()
    session = await Session.start(TOGGLE, subscribers=[recorder])
    session.send_event("flip")
    session.send_event("finish")
    await session.wait_halted()
    session.send_event("flip")
    session.send_event(Event(name="flip"))
    await asyncio.sleep(0.02)
    status = session.status()
    assert status.status == "done"
    assert status.configuration == ("end",)
    assert status.queued_events == 2
    assert recorder.kinds()[-2:] == ["Done", "Halted"]
    assert recorder.kinds().count("Halted") == 1
    await session.stop()
    assert recorder.kinds().count("Halted") == 1


async def test_async_subscribers_and_the_async_iterator_end_with_halted() -> None:
    seen: list[str] = []

    async def slow(session_id: str, message: Message) -> None:
        await asyncio.sleep(0)
        seen.append(type(message).__name__)

    session = await Session.start(TOGGLE, subscribers=[slow])
    collected: list[Message] = []

    async def consume() -> None:
        async for _, message in session.messages():
            collected.append(message)

    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0)
    session.send_event("flip")
    session.send_event("finish")
    await asyncio.wait_for(consumer, 2)
    assert isinstance(collected[-1], Halted)
    assert collected[-1].reason == "done"
    assert seen[-1] == "Halted"
    await session.stop()


async def test_a_raising_subscriber_is_dropped_and_the_session_survives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = 0

    def broken(session_id: str, message: Message) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    recorder = Recorder()
    session = await Session.start(TOGGLE, subscribers=[broken, recorder])
    session.send_event("flip")
    await until(lambda: session.status().configuration == ("on",))
    assert calls == 1
    assert "subscriber" in caplog.text
    await session.stop()


DELAYS = chart(
    """
    <state id="idle">
      <onentry>
        <send id="t" event="tick" delay="40ms"/>
        <send id="t" event="tick" delay="60ms"/>
        <send id="other" event="other" delay="30ms"/>
      </onentry>
      <transition event="stop_t"><cancel sendid="t"/></transition>
      <transition event="nothing"><cancel sendid="no-such-id"/></transition>
      <transition event="other" target="waiting"/>
    </state>
    <state id="waiting">
      <transition event="tick" target="ticked"/>
      <transition event="quit" target="end"/>
    </state>
    <state id="ticked"/>
    <final id="end"/>
    """
)


async def test_delayed_sends_fire_on_the_loop_timer() -> None:
    session = await Session.start(DELAYS)
    assert session.status().pending_timers == 3
    await until(lambda: session.status().configuration == ("ticked",))
    await session.stop()


async def test_cancel_removes_every_timer_under_the_id_and_a_miss_is_a_no_op() -> None:
    session = await Session.start(DELAYS)
    session.send_event("nothing")
    session.send_event("stop_t")
    await until(lambda: session.status().pending_timers == 1)
    await until(lambda: session.status().configuration == ("waiting",))
    await asyncio.sleep(0.08)
    assert session.status().configuration == ("waiting",)
    await session.stop()


async def test_a_halted_session_discards_its_pending_timers() -> None:
    session = await Session.start(DELAYS)
    await until(lambda: session.status().configuration == ("waiting",))
    assert session.status().pending_timers == 2
    session.send_event("quit")
    await session.wait_halted()
    assert session.status().pending_timers == 0
    await session.stop()


async def test_send_to_another_session_goes_through_the_registry() -> None:
    receiver = await Session.start(TOGGLE, session_id="sess_receiver")
    sender_chart = chart(
        """
        <state id="a">
          <onentry>
            <send event="flip" target="#_scxml_sess_receiver"/>
            <send event="x" target="#_scxml_sess_nobody"/>
          </onentry>
          <transition event="error.communication" target="b"/>
        </state>
        <state id="b"/>
        """
    )
    sender = await Session.start(sender_chart)
    await until(lambda: receiver.status().configuration == ("on",))
    assert sender.status().configuration == ("b",)
    await sender.stop()
    await receiver.stop()


class EchoHandler:
    """An in-process handler answering every invocation with its params."""

    def __init__(self) -> None:
        self.started: list[fx.Invoke] = []
        self.cancelled: list[str] = []

    async def start(self, invoke: fx.Invoke, ctx: HandlerContext) -> None:
        self.started.append(invoke)
        if invoke.params.get("answer") == "ok":
            ctx.session.done_invocation(invoke.invoke_id, {"echo": invoke.params})
        elif invoke.params.get("answer") == "fail":
            ctx.session.failed_invocation(invoke.invoke_id, "run_failed")

    def cancel(self, invoke_id: str, ctx: HandlerContext) -> None:
        self.cancelled.append(invoke_id)

    def forward(self, invoke_id: str, event: Event, ctx: HandlerContext) -> None:
        pass


HANDLED = chart(
    """
    <datamodel><data id="answer" expr="'ok'"/><data id="result" expr="None"/></datamodel>
    <state id="calling">
      <invoke id="call" type="myapp:echo">
        <param name="answer" expr="answer"/>
        <finalize><assign location="result" expr="_event.data"/></finalize>
      </invoke>
      <transition event="done.invoke.call" target="done"/>
      <transition event="error.communication.invoke.call" target="failed"/>
      <transition event="leave" target="elsewhere"/>
    </state>
    <state id="done"/><state id="failed"/><state id="elsewhere"/>
    """
)


async def test_handler_answers_become_done_invoke_with_finalize() -> None:
    session = await Session.start(HANDLED, invoke_handlers={"myapp:echo": EchoHandler})
    await until(lambda: session.status().configuration == ("done",))
    assert session.snapshot().datamodel["result"] == {"echo": {"answer": "ok"}}
    await session.stop()


async def test_failed_invocation_becomes_error_communication_invoke() -> None:
    session = await Session.start(
        HANDLED, invoke_handlers={"myapp:echo": EchoHandler}, datamodel=None
    )
    await session.stop()
    failing = chart(
        """
        <state id="calling">
          <invoke id="call" type="myapp:echo"><param name="answer" expr="'fail'"/></invoke>
          <transition event="error.communication.invoke.call"
                      cond="_event.data['reason'] == 'run_failed'" target="failed"/>
        </state>
        <state id="failed"/>
        """
    )
    session = await Session.start(failing, invoke_handlers={"myapp:echo": EchoHandler()})
    await until(lambda: session.status().configuration == ("failed",))
    await session.stop()


async def test_a_late_answer_for_a_cancelled_invocation_is_dropped() -> None:
    quiet = chart(
        """
        <state id="calling">
          <invoke id="call" type="myapp:echo"><param name="answer" expr="'later'"/></invoke>
          <transition event="leave" target="elsewhere"/>
          <transition event="done.invoke.call" target="wrong"/>
        </state>
        <state id="elsewhere"><transition event="done.invoke.call" target="wrong"/></state>
        <state id="wrong"/>
        """
    )
    handler = EchoHandler()
    session = await Session.start(quiet, invoke_handlers={"myapp:echo": handler})
    session.send_event("leave")
    await until(lambda: session.status().configuration == ("elsewhere",))
    assert handler.cancelled == ["call"]
    session.done_invocation("call", {"late": True})
    session.done_invocation("never-started", {})
    await asyncio.sleep(0.02)
    assert session.status().configuration == ("elsewhere",)
    await session.stop()


async def test_handlers_are_per_session_and_unregistered_types_raise_error_execution() -> None:
    missing = chart(
        """
        <state id="calling">
          <invoke type="myapp:echo"/>
          <transition event="error.execution" target="refused"/>
        </state>
        <state id="refused"/>
        """
    )
    with_handler = await Session.start(missing, invoke_handlers={"myapp:echo": EchoHandler})
    without = await Session.start(missing)
    assert with_handler.status().configuration == ("calling",)
    assert without.status().configuration == ("refused",)
    await with_handler.stop()
    await without.stop()


PARENT = chart(
    """
    <state id="s0">
      <invoke id="kid" src="file:child.scxml" type="scxml">
        <param name="greeting" expr="'hi'"/>
      </invoke>
      <transition event="ready" cond="_event.data['greeting'] == 'hi'">
        <send target="#_kid" event="bye"/>
      </transition>
      <transition event="done.invoke.kid" target="end"/>
      <transition event="error.communication.invoke.kid" target="broken"/>
    </state>
    <final id="end"/>
    <final id="broken"/>
    """
)

CHILD = f"""<scxml {NS} initial="k">
  <datamodel><data id="greeting" expr="'default'"/></datamodel>
  <state id="k">
    <onentry><send target="#_parent" event="ready" namelist="greeting"/></onentry>
    <transition event="bye" target="kf"/>
  </state>
  <final id="kf"/>
</scxml>"""


async def test_scxml_child_from_a_resolved_src_with_parent_routing() -> None:
    sources = {"file:child.scxml": CHILD}
    session = await Session.start(PARENT, resolver=sources.__getitem__)
    await asyncio.wait_for(session.wait_halted(), 2)
    assert session.status().configuration == ("end",)
    await session.stop()


async def test_scxml_child_src_without_resolver_fails_the_invocation() -> None:
    session = await Session.start(PARENT)
    await asyncio.wait_for(session.wait_halted(), 2)
    assert session.status().configuration == ("broken",)
    await session.stop()


async def test_resume_continues_with_the_same_id_and_an_empty_timer_table() -> None:
    session = await Session.start(DELAYS, session_id="sess_resumable")
    position = session.snapshot()
    assert session.status().pending_timers == 3
    await session.stop()
    resumed = await Session.start(DELAYS, resume=position)
    assert resumed.session_id == "sess_resumable"
    assert resumed.snapshot().datamodel["_sessionid"] == "sess_resumable"
    assert resumed.status().pending_timers == 0
    resumed.send_event("other")
    await until(lambda: resumed.status().configuration == ("waiting",))
    await resumed.stop()


async def test_resume_refuses_a_finished_position_and_conflicting_options() -> None:
    session = await Session.start(TOGGLE)
    running = session.snapshot()
    session.send_event("flip")
    session.send_event("finish")
    await session.wait_halted()
    finished = session.snapshot()
    await session.stop()
    with pytest.raises(ResumeError, match="finished"):
        await Session.start(TOGGLE, resume=finished)
    with pytest.raises(ResumeError, match="conflicts"):
        await Session.start(TOGGLE, resume=running, session_id="sess_other")
    with pytest.raises(ResumeError, match="another chart"):
        await Session.start(DELAYS, resume=running)


async def test_budget_exhausted_halts_but_still_cancels() -> None:
    looping = chart(
        """
        <datamodel><data id="n" expr="0"/></datamodel>
        <state id="a">
          <transition target="b"><assign location="n" expr="n + 1"/></transition>
        </state>
        <state id="b"><transition target="a"/></state>
        """
    )
    recorder = Recorder()
    session = await Session.start(looping, max_macrostep_rounds=20, subscribers=[recorder])
    assert session.status().status == "budget_exhausted"
    assert recorder.kinds()[-2:] == ["BudgetExhausted", "Halted"]
    session.send_event("ignored")
    await session.cancel_and_wait()
    await until(lambda: session.status().status == "cancelled")
    assert recorder.kinds().count("Halted") == 1
    await session.stop()


async def test_cancel_reports_cancelled_and_runs_onexit() -> None:
    recorder = Recorder()
    session = await Session.start(
        chart('<state id="a"><onexit><log label="bye" expr="1"/></onexit></state>'),
        subscribers=[recorder],
    )
    await session.cancel_and_wait()
    assert session.status().status == "cancelled"
    assert recorder.kinds()[-3:] == ["Log", "Done", "Halted"]
    assert isinstance(recorder.messages[-1][1], Halted)
    assert recorder.messages[-1][1].reason == "cancelled"
    await session.stop()


async def test_resume_from_a_position_blob_and_refuse_another_charts_blob() -> None:
    session = await Session.start(DELAYS, session_id="sess_blob")
    blob = statifier.core.position.dumps(session.snapshot())
    await session.stop()
    resumed = await Session.start(DELAYS, resume=memoryview(blob))
    assert resumed.session_id == "sess_blob"
    assert resumed.status().configuration == ("idle",)
    await resumed.stop()
    with pytest.raises(statifier.core.position.IdentityMismatch):
        await Session.start(TOGGLE, resume=blob)
    assert registry.lookup("sess_blob") is None


async def test_resume_from_a_keyed_blob_needs_the_key() -> None:
    secret = b"the host's own secret"
    session = await Session.start(DELAYS, session_id="sess_keyed")
    blob = statifier.core.position.dumps(session.snapshot(), key=secret)
    await session.stop()
    with pytest.raises(statifier.core.position.CorruptPosition):
        await Session.start(DELAYS, resume=blob)
    with pytest.raises(statifier.core.position.CorruptPosition):
        await Session.start(DELAYS, resume=blob, position_key=b"another host's secret")
    resumed = await Session.start(DELAYS, resume=blob, position_key=secret)
    assert resumed.session_id == "sess_keyed"
    await resumed.stop()


async def test_an_answer_to_an_unknown_invocation_is_dropped_and_kept_nowhere() -> None:
    # Sessions that invoked nothing share one empty bookkeeping; an answer must not land
    # there, nor be kept at all: taken, it would be dropped, and keeping what unknown ids
    # answered would grow without bound.
    first = await Session.start(TOGGLE)
    second = await Session.start(TOGGLE)
    try:
        first.done_invocation("never-started", {"x": 1})
        first.failed_invocation("never-started", "gone")
        assert not first.status().queued_events
        for session in (first, second):
            kept = session._invocations
            assert (len(kept.finished), len(kept.pending), len(kept.types)) == (0, 0, 0)
        assert first._invocations is not second._invocations
    finally:
        await first.stop()
        await second.stop()
