"""A live session hears a finished child only while that child is its invocation's.

An ``scxml`` child that finishes queues its ``done`` in the parent's inbox. If the
parent leaves the invoking state and enters it again before that ``done`` is processed,
the invoke id belongs to a new child: the waiting ``done`` is the old child's and must
be dropped, not taken as the new child's (ADR 31's amendment, for live sessions).
A finished child whose state was left and not entered again still answers (W3C 236).
"""

from __future__ import annotations

import asyncio

import statifier
from statifier.core import effects as fx
from statifier.runtime.session import Message, Session

NS = 'xmlns="http://www.w3.org/2005/07/scxml" datamodel="python"'

PARENT = statifier.compile(
    f"""<scxml {NS} initial="s">
      <datamodel><data id="dones" expr="0"/></datamodel>
      <state id="top">
        <transition event="probe"><log label="probe"/></transition>
        <state id="s">
          <invoke id="c" type="scxml">
            <content>
              <scxml {NS} initial="w">
                <state id="w"><transition event="finish" target="f"/></state>
                <final id="f"/>
              </scxml>
            </content>
          </invoke>
          <transition event="done.invoke.c" target="after">
            <assign location="dones" expr="dones + 1"/>
          </transition>
          <transition event="restart" target="s"/>
          <transition event="leave" target="away"/>
        </state>
        <state id="away">
          <transition event="done.invoke.c" target="after">
            <assign location="dones" expr="dones + 1"/>
          </transition>
        </state>
        <state id="after"/>
      </state>
    </scxml>"""
)


async def finished_then_probed(parent: Session, child: Session, event: str) -> None:
    """Queue ``event``, then have ``child`` finish (its task runs first, so its ``done``
    is queued behind ``event``), then queue ``probe`` behind the ``done``, and wait until
    the parent has processed ``probe``: everything before it has been processed too."""
    seen: list[Message] = []
    parent.subscribe(lambda _sid, message: seen.append(message))
    child.send_event("finish")
    parent.send_event(event)
    await asyncio.wait_for(child.wait_halted(), timeout=5)
    assert child.status().status == "done"
    parent.send_event("probe")
    async with asyncio.timeout(5):
        while not any(isinstance(m, fx.Log) for m in seen):
            await asyncio.sleep(0.005)


async def test_a_done_queued_before_the_invoke_id_restarts_is_dropped() -> None:
    parent = await Session.start(PARENT, session_id="restarting")
    first = parent.child("c")
    assert first is not None
    await finished_then_probed(parent, first, "restart")
    assert parent.snapshot().datamodel["dones"] == 0
    assert parent.status().configuration == ("top", "s")
    second = parent.child("c")
    assert second is not None
    assert second is not first
    assert second.status().status == "running"
    parent.send_event("leave")  # the new child is the invocation: leaving cancels it
    await asyncio.wait_for(second.wait_halted(), timeout=5)
    assert second.status().status == "cancelled"
    await parent.stop()


async def test_a_done_of_a_child_whose_state_was_left_still_answers() -> None:
    parent = await Session.start(PARENT, session_id="leaving")
    first = parent.child("c")
    assert first is not None
    await finished_then_probed(parent, first, "leave")
    assert parent.snapshot().datamodel["dones"] == 1
    assert parent.status().configuration == ("top", "after")
    await parent.stop()


def cycling(child_initial: str) -> statifier.Machine:
    """Each entry of ``s`` starts a child under a new generated invoke id; the child
    starts in ``child_initial`` (``w`` waits, ``f`` finishes at once). Every child's
    ``done`` is counted, the left ones' too (W3C 236)."""
    return statifier.compile(
        f"""<scxml {NS} initial="s">
          <datamodel><data id="dones" expr="0"/></datamodel>
          <state id="top">
            <transition event="probe"><log label="probe"/></transition>
            <transition event="done.invoke.*">
              <assign location="dones" expr="dones + 1"/>
            </transition>
            <state id="s">
              <invoke type="scxml">
                <content>
                  <scxml {NS} initial="{child_initial}">
                    <state id="w"><transition event="finish" target="f"/></state>
                    <final id="f"/>
                  </scxml>
                </content>
              </invoke>
              <transition event="flip" target="t"/>
            </state>
            <state id="t"><transition event="flip" target="s"/></state>
          </state>
        </scxml>"""
    )


def bookkeeping_sizes(session: Session) -> dict[str, int]:
    """How many entries each part of the session's invocation bookkeeping holds."""
    kept = session._invocations
    parts = ("types", "context", "starts", "cancelled", "finished", "pending", "left")
    return {name: len(getattr(kept, name)) for name in parts} | {
        "children": len(kept.scxml.children)
    }


async def cycled(chart: statifier.Machine, session_id: str, flips: int, dones: int) -> Session:
    """Enter and leave the invoking state ``flips`` times, then wait until a ``probe``
    sent behind the flips has been processed and ``dones`` children have answered."""
    session = await Session.start(chart, session_id=session_id)
    seen: list[Message] = []
    session.subscribe(lambda _sid, message: seen.append(message))
    for _ in range(flips):
        session.send_event("flip")
    session.send_event("probe")
    async with asyncio.timeout(10):
        while (
            not any(isinstance(m, fx.Log) for m in seen)
            or session.snapshot().datamodel["dones"] < dones
        ):
            await asyncio.sleep(0.005)
    assert session.snapshot().datamodel["dones"] == dones
    return session


async def test_invocations_left_are_forgotten() -> None:
    chart = cycling("w")
    for flips in (20, 80):
        session = await cycled(chart, f"waiting-{flips}", flips, dones=0)
        # Back in ``s`` after an even number of flips: its one child is all that is kept.
        assert bookkeeping_sizes(session) == {
            "types": 1,
            "context": 1,
            "starts": 1,
            "cancelled": 0,
            "finished": 0,
            "pending": 0,
            "left": 0,
            "children": 1,
        }
        await session.stop()


async def test_answered_invocations_are_let_go() -> None:
    chart = cycling("f")
    for flips in (20, 80):
        # Every child finishes at once. The first answers while its state is active; the
        # others' answers wait behind flips that leave their state and are still heard
        # (W3C 236). Each is let go once answered, its child session too.
        session = await cycled(chart, f"finishing-{flips}", flips, dones=flips // 2 + 1)
        assert set(bookkeeping_sizes(session).values()) == {0}
        await session.stop()


HEARING = statifier.compile(
    f"""<scxml {NS} initial="idle">
      <datamodel><data id="heard" expr="0"/></datamodel>
      <state id="top">
        <transition event="probe"><log label="probe"/></transition>
        <transition event="hello"><assign location="heard" expr="heard + 1"/></transition>
        <state id="idle"><transition event="go" target="s"/></state>
        <state id="s">
          <invoke id="c" type="scxml">
            <content>
              <scxml {NS} initial="w">
                <state id="w">
                  <onentry><send event="hello" target="#_parent"/></onentry>
                </state>
              </scxml>
            </content>
          </invoke>
          <transition event="leave" target="away"/>
        </state>
        <state id="away"/>
      </state>
    </scxml>"""
)
"""The child says ``hello`` as it starts; the parent counts every ``hello`` it hears."""


async def heard_after(*events: str) -> tuple[Session, int]:
    """Send ``events`` and ``probe``; once ``probe`` and every child message queued have
    been taken, the session and how many ``hello`` it heard."""
    session = await Session.start(HEARING, session_id="-".join(events))
    seen: list[Message] = []
    session.subscribe(lambda _sid, message: seen.append(message))
    for event in (*events, "probe"):
        session.send_event(event)
    async with asyncio.timeout(5):
        while not any(isinstance(m, fx.Log) for m in seen) or session._invocations.pending:
            await asyncio.sleep(0.005)
    return session, session.snapshot().datamodel["heard"]


async def test_what_a_child_sent_before_its_state_was_left_is_dropped() -> None:
    # The control: the child's ``hello`` is heard while its state is active.
    session, heard = await heard_after("go")
    assert (session.status().configuration, heard) == (("top", "s"), 1)
    await session.stop()
    # ``leave`` is queued before the child starts (while ``go`` is processed) and says
    # ``hello``: the invocation is cancelled with its ``hello`` still waiting.
    session, heard = await heard_after("go", "leave")
    assert (session.status().configuration, heard) == (("top", "away"), 0)
    assert set(bookkeeping_sizes(session).values()) == {0}
    await session.stop()
