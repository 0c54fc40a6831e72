"""A superseded live session stops at once (issue 18, ADR 14).

Once another process owns a session, its ``on_step`` save is refused with
``OwnershipLost`` (a fenced save: ``statifier_oban.LeaseLost`` is one). The session must
stop right there: status ``superseded``, subscribers told ``Halted("superseded")``, and
nothing of the events queued behind performed (their logs, in-process sends,
invocations). A store that owns its sessions (``OwningDelayedSends``) claims a session
before its first macrostep and lets it go once, when it halts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import statifier
from statifier.core import effects as fx
from statifier.runtime import registry
from statifier.runtime.session import (
    Halted,
    HaltReason,
    Message,
    OwnershipLost,
    OwningDelayedSends,
    Session,
)

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

COUNTER = statifier.compile(
    f"""<scxml {NS} initial="counting">
      <datamodel><data id="n" expr="0"/></datamodel>
      <state id="counting">
        <transition event="tick">
          <assign location="n" expr="n + 1"/>
          <log label="tick" expr="n"/>
          <send event="echo"/>
        </transition>
        <transition event="echo"><log label="echo" expr="n"/></transition>
        <transition event="stop" target="end"/>
      </state>
      <final id="end"/>
    </scxml>"""
)


class Taken(OwnershipLost):
    """What a fenced save raises once another process took the session over."""


class Host:
    """Saves each step's position; refuses (``Taken``) from the ``fail_at``-th save on."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.saves: list[int] = []
        self.messages: list[Message] = []

    def save(self, session: Session) -> None:
        """The ``on_step`` listener."""
        if len(self.saves) + 1 >= self.fail_at:
            raise Taken(f"session {session.session_id} is owned by another process")
        self.saves.append(session.snapshot().datamodel["n"])

    def record(self, _session_id: str, message: Message) -> None:
        """A subscriber."""
        self.messages.append(message)

    def logs(self) -> list[tuple[str | None, Any]]:
        """The ``<log>`` effects seen, in order."""
        return [(m.label, m.value) for m in self.messages if isinstance(m, fx.Log)]


async def test_a_refused_save_stops_the_session_before_anything_queued_behind_it() -> None:
    host = Host(fail_at=3)  # the initial save and the first tick's save pass
    session = await Session.start(COUNTER, on_step=host.save, subscribers=[host.record])
    halted = asyncio.Event()
    session.subscribe(lambda _sid, m: halted.set() if isinstance(m, Halted) else None)
    for _ in range(5):
        session.send_event("tick")
    await asyncio.wait_for(halted.wait(), 5)
    # tick 1 was saved; tick 2's save was refused: nothing queued after it ran (ticks 3
    # to 5, and tick 1's echo, queued behind them).
    assert host.saves == [0, 1]
    assert host.logs() == [("tick", 1), ("tick", 2)]
    assert host.messages[-1] == Halted("superseded")
    assert [m for m in host.messages if isinstance(m, Halted)] == [Halted("superseded")]
    status = session.status()
    assert status.status == "superseded"
    assert status.macrostep == 3  # the step whose save was refused, and no other
    assert registry.lookup(session.session_id) is None
    session.send_event("tick")
    await asyncio.sleep(0.05)  # the loop turns over: a superseded session takes nothing
    assert host.logs()[-1] == ("tick", 2)


async def test_a_session_whose_first_save_is_refused_does_not_start() -> None:
    host = Host(fail_at=1)
    with pytest.raises(Taken):
        await Session.start(COUNTER, session_id="taken_at_once", on_step=host.save)
    assert registry.lookup("taken_at_once") is None


class Owner:
    """An ``OwningDelayedSends`` store: it claims and releases, and keeps no timer."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, str]] = []
        self.on_release: Callable[[], object] = lambda: None

    async def claim(self, session: Session) -> None:
        """Record the claim (made before the first macrostep), or refuse it."""
        self.calls.append(("claim", session.session_id))
        if registry.lookup(session.session_id) is not None:
            raise AssertionError("claimed after the session was registered")
        if self.refuse:
            raise Taken("owned elsewhere")

    async def release(self, session: Session, reason: HaltReason) -> None:
        """Record the release."""
        self.calls.append(("release", reason))
        self.on_release()

    async def schedule(self, session: Session, effect: fx.SendDelayed) -> bool:
        """Leave delayed sends to the session."""
        return False

    async def cancel(self, session: Session, effect: fx.Cancel) -> None:
        """Nothing to cancel."""


@pytest.mark.parametrize(
    ("end", "reason"), [("stop", "done"), ("session.stop", "stopped"), ("cancel", "cancelled")]
)
async def test_an_owning_store_claims_before_the_first_step_and_releases_once(
    end: str, reason: str
) -> None:
    owner = Owner()
    assert isinstance(owner, OwningDelayedSends)
    session = await Session.start(COUNTER, session_id=f"owned_{end}", delayed_sends=owner)
    assert owner.calls == [("claim", f"owned_{end}")]
    if end == "session.stop":
        await session.stop()
    elif end == "cancel":
        await session.cancel_and_wait()
    else:
        session.send_event(end)
        await session.wait_halted()
    await session.stop()
    assert owner.calls == [("claim", f"owned_{end}"), ("release", reason)]


async def test_a_refused_claim_starts_nothing() -> None:
    owner = Owner(refuse=True)
    host = Host(fail_at=99)
    with pytest.raises(Taken):
        await Session.start(COUNTER, session_id="refused", delayed_sends=owner, on_step=host.save)
    assert registry.lookup("refused") is None
    assert host.saves == []
    assert owner.calls == [("claim", "refused")]


async def test_a_session_superseded_by_its_store_releases_nothing() -> None:
    owner = Owner()
    session = await Session.start(COUNTER, delayed_sends=owner)
    await session.supersede()
    assert session.status().status == "superseded"
    assert owner.calls[-1] == ("release", "superseded")


LOOPING = statifier.compile(
    f"""<scxml {NS} initial="a">
      <state id="a">
        <onexit><cancel sendid="never"/></onexit>
        <transition target="b"/>
      </state>
      <state id="b"><transition target="a"/></state>
    </scxml>"""
)


class CancelRecorder(Owner):
    """An owner that records the cancels it is given (they are writes of the session)."""

    async def cancel(self, session: Session, effect: fx.Cancel) -> None:
        """Record the cancel."""
        self.calls.append(("cancel", effect.send_id))


@pytest.mark.parametrize("end", ["cancel", "stop"])
async def test_a_session_out_of_budget_keeps_its_claim_until_it_ends(end: str) -> None:
    """Its budget ran out, but it can still be cancelled, and its cancel still writes."""
    owner = CancelRecorder()
    session = await Session.start(
        LOOPING, session_id=f"looping_{end}", max_macrostep_rounds=20, delayed_sends=owner
    )
    assert session.status().status == "budget_exhausted"
    exhausted = len(owner.calls)
    assert ("release", "budget_exhausted") not in owner.calls
    if end == "cancel":
        released = asyncio.Event()
        owner.on_release = released.set
        session.cancel()  # (cancel_and_wait returns at once: the session halted already)
        await asyncio.wait_for(released.wait(), 5)
        assert session.status().status == "cancelled"
        # the chart's cancel left state a (or b): its onexit cancel was still written
        assert owner.calls[-1] == ("release", "cancelled")
        assert set(owner.calls[exhausted:-1]) <= {("cancel", "never")}
    await session.stop()
    releases = [call for call in owner.calls if call[0] == "release"]
    assert releases == [("release", "cancelled" if end == "cancel" else "stopped")]
