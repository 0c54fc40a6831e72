"""A resumed live session starts where its store says (ADR 14).

A durable store cannot stop a send whose job a worker is running when the ``<cancel>``
reaches it; the session remembers the cancel and drops that send when it fires. A session
resumed from its saved position gets those cancels from its store
(``KeyedDelayedSends.resume``) and keeps the ones its position holds: of ordinal at
most the position's ``timer_counter``. A cancel of a later ordinal belongs to a step that
was never saved, so the send fires into the resumed session as it would have. The store
also answers the highest ordinal it holds: the session's next ordinals come after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
import statifier
from statifier.budget import MAX_LIMIT
from statifier.core import effects as fx
from statifier.core.position import dumps
from statifier.runtime import registry
from statifier.runtime.session import (
    DelayedSendsUnavailable,
    HaltReason,
    KeyedDelayedSends,
    Message,
    ResumeError,
    ResumePoint,
    Session,
)

NS = 'xmlns="http://www.w3.org/2005/07/scxml" datamodel="python"'

HOLD = statifier.compile(
    f"""<scxml {NS} initial="authorized">
      <datamodel><data id="expirations" expr="0"/></datamodel>
      <state id="authorized">
        <onentry><send id="hold" event="authorization.expired" delay="7d"/></onentry>
        <onexit><cancel sendid="hold"/></onexit>
        <transition event="authorization.expired" target="expired">
          <assign location="expirations" expr="expirations + 1"/>
        </transition>
        <transition event="disarm" target="disarmed"/>
      </state>
      <state id="expired"/>
      <state id="disarmed">
        <transition event="authorization.expired">
          <assign location="expirations" expr="expirations + 1"/>
        </transition>
        <transition event="probe"><log label="probe"/></transition>
      </state>
    </scxml>"""
)


class Store:
    """A ``KeyedDelayedSends`` store that takes every delayed send and answers ``marks``
    and ``top`` (the highest ordinal it holds, at least the position's counter)."""

    def __init__(
        self, marks: Mapping[str, int] | None = None, *, fail: bool = False, top: int = 0
    ) -> None:
        self.marks = dict(marks or {})
        self.fail = fail
        self.top = top
        self.sent: list[fx.SendDelayed] = []
        self.cancels: list[fx.Cancel] = []
        self.calls: list[str] = []

    async def claim(self, session: Session) -> None:
        """Record the claim."""
        self.calls.append("claim")

    async def begin(self, session: Session) -> None:
        """Record the fresh start."""
        self.calls.append("begin")

    async def release(self, session: Session, reason: HaltReason) -> None:
        """Record the release."""
        self.calls.append(f"release:{reason}")

    async def schedule(self, session: Session, effect: fx.SendDelayed) -> bool:
        """Keep the send (no in-process timer)."""
        self.sent.append(effect)
        return True

    async def cancel(self, session: Session, effect: fx.Cancel) -> None:
        """Record the cancel."""
        self.cancels.append(effect)

    async def resume(self, session: Session, timer_counter: int) -> ResumePoint:
        """The marks and the top ordinal given, or the store cannot answer."""
        self.calls.append(f"resume:{timer_counter}")
        if self.fail:
            raise DelayedSendsUnavailable("the store is down")
        return ResumePoint(self.marks, max(self.top, timer_counter))


async def first_life(session_id: str) -> tuple[Store, fx.SendDelayed, bytes, bytes]:
    """Run until ``disarm``; the hold, the positions before and after the disarm."""
    store = Store()
    session = await Session.start(HOLD, session_id=session_id, delayed_sends=store)
    [hold] = store.sent
    before = dumps(session.snapshot())
    session.send_event("disarm")
    await wait_for(lambda: session.status().configuration == ("disarmed",))
    after = dumps(session.snapshot())
    await session.stop()
    [cancel] = store.cancels
    assert (hold.ordinal, cancel.ordinal) == (1, 2)
    return store, hold, before, after


async def wait_for(predicate: object, timeout: float = 5.0) -> None:
    """Poll a predicate until it holds (a hang fails the test)."""
    assert callable(predicate)
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def fire_then_probe(session: Session, hold: fx.SendDelayed) -> list[Message]:
    """Fire ``hold`` into ``session``, then an event queued behind it; return the effects
    seen once that event's ``<log>`` (or the fire's transition) has run."""
    seen: list[Message] = []
    session.subscribe(lambda _sid, message: seen.append(message))
    session.fire_delayed(hold)
    session.send_event("probe")
    await wait_for(
        lambda: (
            any(isinstance(m, fx.Log) for m in seen)
            or session.status().configuration == ("expired",)
        )
    )
    return seen


async def test_a_resumed_session_drops_the_fire_of_a_cancel_its_position_holds() -> None:
    _, hold, _, after = await first_life("saved")
    store = Store({"hold": 2})  # the disarm's cancel, ordinal 2: the position's counter
    assert isinstance(store, KeyedDelayedSends)
    resumed = await Session.start(HOLD, resume=after, delayed_sends=store)
    assert resumed.snapshot().timer_counter == 2
    await fire_then_probe(resumed, hold)
    assert resumed.status().configuration == ("disarmed",)
    assert resumed.snapshot().datamodel["expirations"] == 0
    assert store.calls == ["claim", "resume:2"]
    await resumed.stop()


async def test_a_cancel_of_a_step_never_saved_does_not_hold_back_the_fire() -> None:
    _, hold, before, _ = await first_life("unsaved")
    # The position saved before the disarm: its counter is 1, the cancel's ordinal 2.
    resumed = await Session.start(HOLD, resume=before, delayed_sends=Store({"hold": 2}))
    assert resumed.snapshot().timer_counter == 1
    await fire_then_probe(resumed, hold)
    assert resumed.status().configuration == ("expired",)
    assert resumed.snapshot().datamodel["expirations"] == 1
    await resumed.stop()


async def test_a_mark_of_another_send_id_or_an_earlier_send_holds_nothing_back() -> None:
    _, hold, _, after = await first_life("other")
    # Only "other" was cancelled; and "hold" at ordinal 1 cancels no send before it.
    store = Store({"other": 2, "hold": 1})
    resumed = await Session.start(HOLD, resume=after, delayed_sends=store)
    await fire_then_probe(resumed, hold)
    assert resumed.snapshot().datamodel["expirations"] == 1
    await resumed.stop()


async def test_a_fresh_session_begins_in_its_store_and_does_not_resume() -> None:
    store = Store({"hold": 1})
    session = await Session.start(HOLD, session_id="fresh", delayed_sends=store)
    assert store.calls == ["claim", "begin"]
    await session.stop()


async def test_a_store_that_cannot_resume_starts_nothing_and_releases() -> None:
    _, _, _, after = await first_life("refused")
    store = Store(fail=True)
    with pytest.raises(DelayedSendsUnavailable):
        await Session.start(HOLD, resume=after, delayed_sends=store)
    assert registry.lookup("refused") is None
    assert store.calls == ["claim", "resume:2", "release:stopped"]


async def test_the_next_ordinals_come_after_the_highest_the_store_holds() -> None:
    _, hold, _, after = await first_life("top")
    store = Store(top=7)  # a step never saved used ordinals 3 to 7
    resumed = await Session.start(HOLD, resume=after, delayed_sends=store)
    assert resumed.snapshot().timer_counter == 7
    await fire_then_probe(resumed, hold)  # no mark: the hold fires (disarmed counts it)
    assert resumed.snapshot().datamodel["expirations"] == 1
    await resumed.stop()
    lower = await Session.start(HOLD, resume=after, delayed_sends=Store(top=1))
    assert lower.snapshot().timer_counter == 2  # never below the position's own
    await lower.stop()


@pytest.mark.parametrize(("top", "starts"), [(MAX_LIMIT, True), (MAX_LIMIT + 1, False)])
async def test_a_store_counter_past_what_a_position_holds_refuses_the_resume(
    top: int, starts: bool
) -> None:
    _, _, _, after = await first_life(f"huge_{starts}")
    store = Store(top=top)
    if starts:
        resumed = await Session.start(HOLD, resume=after, delayed_sends=store)
        assert resumed.snapshot().timer_counter == MAX_LIMIT
        await resumed.stop()
        return
    with pytest.raises(ResumeError, match="past what a position holds"):
        await Session.start(HOLD, resume=after, delayed_sends=store)
    assert store.calls[-1] == "release:stopped"


class Taken(Store):
    """A store that still holds sends of an earlier session under every id."""

    async def begin(self, session: Session) -> None:
        """Refuse the fresh start."""
        await super().begin(session)
        raise LookupError(f"session id {session.session_id!r} is not free")


async def test_a_fresh_session_its_store_refuses_does_not_start() -> None:
    store = Taken()
    with pytest.raises(LookupError, match="is not free"):
        await Session.start(HOLD, session_id="taken", delayed_sends=store)
    assert registry.lookup("taken") is None
    assert store.sent == []
    assert store.calls == ["claim", "begin", "release:stopped"]
