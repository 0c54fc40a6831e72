"""The effect planner: targets, delivered events and instructions, owned in one place."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from statifier.core import effects as fx
from statifier.core import planner
from statifier.core.events import SCXML_EVENT_PROCESSOR, Event


class Counters(TypedDict):
    """The step counters every effect carries (typed, so ``**COUNTERS`` checks)."""

    macrostep: int
    microstep: int
    round: int


COUNTERS: Counters = {"macrostep": 2, "microstep": 1, "round": 1}


def send(**fields: Any) -> fx.Send:
    values: dict[str, Any] = {
        "event": "tick",
        "target": None,
        "type": None,
        "data": None,
        "send_id": "send_1",
        "c_index": 0,
        "owner": ("transition", 0),
        "id_from_author": False,
        "caller_context": None,
        **COUNTERS,
    }
    values.update(fields)
    return fx.Send(**values)


def send_delayed(**fields: Any) -> fx.SendDelayed:
    values: dict[str, Any] = {
        "event": "tick",
        "target": None,
        "type": None,
        "data": None,
        "send_id": "send_1",
        "delay_ms": 10,
        "c_index": 0,
        "owner": ("transition", 0),
        "ordinal": 1,
        "id_from_author": False,
        "caller_context": None,
        **COUNTERS,
    }
    values.update(fields)
    return fx.SendDelayed(**values)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (None, planner.SelfTarget()),
        ("#_scxml_me", planner.SelfTarget()),
        ("#_internal", planner.InternalTarget()),
        ("#_parent", planner.ParentTarget()),
        ("#_scxml_other", planner.SessionTarget("other")),
        ("#_child.inv_1", planner.InvocationTarget("child.inv_1")),
        ("#_scxml_", planner.UnsupportedTarget("#_scxml_")),
        ("#_", planner.UnsupportedTarget("#_")),
        ("", planner.UnsupportedTarget("")),
        ("http://example.com/x", planner.UnsupportedTarget("http://example.com/x")),
    ],
)
def test_parse_target(target: str | None, expected: planner.Target) -> None:
    assert planner.parse_target(target, "me") == expected


@pytest.mark.parametrize(
    "target",
    ["#_internal", "#_parent", "#_scxml_other", "#_inv", "#_scxml_", "nowhere"],
)
def test_address_spells_a_parsed_target_back(target: str) -> None:
    assert planner.address(planner.parse_target(target, "me")) == target


def test_sent_event_is_external_with_origin_and_verbatim_payload() -> None:
    effect = send(data={"n": 1}, send_id="hold", id_from_author=True, caller_context={"t": 1})
    assert planner.sent_event("sess_a", effect) == Event(
        name="tick",
        type="external",
        data={"n": 1},
        sendid="hold",
        origin="#_scxml_sess_a",
        origintype=SCXML_EVENT_PROCESSOR,
        caller_context={"t": 1},
    )


def test_sent_event_hides_a_generated_send_id() -> None:
    assert planner.sent_event("s", send_delayed(send_id="send_7")).sendid is None
    authored = send_delayed(send_id="hold", id_from_author=True)
    assert planner.sent_event("s", authored).sendid == "hold"


@pytest.mark.parametrize("value", [None, 0, "", False, [], {}])
def test_sent_event_carries_falsy_values_verbatim(value: Any) -> None:
    event = planner.sent_event("s", send_delayed(data=value, caller_context=value))
    assert event.data == value
    assert type(event.data) is type(value)
    assert event.caller_context == value


def test_a_send_to_internal_delivers_an_internal_event() -> None:
    event = planner.sent_event("s", send_delayed(target="#_internal"))
    assert event.type == "internal"
    immediate = planner.internal_send_event("s", "go", {"x": 1}, "send_2", False)
    assert (immediate.type, immediate.sendid, immediate.origin) == ("internal", None, "#_scxml_s")


def test_fire_is_the_delivery_of_the_sent_event() -> None:
    effect = send_delayed(target="#_parent", caller_context="ctx")
    assert planner.fire("sess_a", effect) == planner.Deliver(
        planner.sent_event("sess_a", effect), planner.ParentTarget(), "send_1"
    )


def test_invocation_answers() -> None:
    done = planner.invocation_done("inv", {"ok": 1}, child_session_id="c1", caller_context="k")
    assert done == Event(
        name="done.invoke.inv",
        type="external",
        data={"ok": 1},
        invokeid="inv",
        origin="#_scxml_c1",
        origintype=SCXML_EVENT_PROCESSOR,
        caller_context="k",
    )
    handler_done = planner.invocation_done("inv")
    assert (handler_done.origin, handler_done.origintype) == (None, None)
    failed = planner.invocation_failed("inv", "boom", caller_context="k")
    assert (failed.name, failed.data, failed.caller_context) == (
        "error.communication.invoke.inv",
        {"reason": "boom"},
        "k",
    )
    assert planner.invocation_failed("inv", {"reason": "x", "attempts": 3}).data == {
        "reason": "x",
        "attempts": 3,
    }
    assert planner.is_answer_of(done, "inv")
    assert planner.is_answer_of(failed, "inv")
    assert not planner.is_answer_of(done, "other")


def test_an_event_from_an_invocation_keeps_everything_but_gains_the_invokeid() -> None:
    event = planner.sent_event("child", send(target="#_parent", caller_context="k"))
    received = planner.from_invocation(event, "inv")
    assert received.invokeid == "inv"
    assert received.caller_context == "k"
    assert received.origin == "#_scxml_child"


def test_undeliverable_is_a_platform_error_with_the_send_id() -> None:
    event = planner.undeliverable("send_3", "no route")
    assert (event.name, event.type, event.sendid, event.data) == (
        "error.communication",
        "platform",
        "send_3",
        {"message": "no route"},
    )


def test_plan_maps_every_core_effect_and_skips_what_only_informs() -> None:
    """One of each core effect (and some trace effects), in one step's order."""
    delayed = send_delayed()
    cancel = fx.Cancel(send_id="h", c_index=1, owner=None, ordinal=2, **COUNTERS)
    invoke = fx.Invoke(
        invoke_id="i",
        type="scxml",
        src=None,
        params={},
        content=None,
        autoforward=False,
        state_index=1,
        invoke_index=0,
        **COUNTERS,
    )
    stop = fx.CancelInvoke(invoke_id="i", state_index=1, **COUNTERS)
    forwarded = Event(name="x")
    forward = fx.Autoforward(invoke_id="i", state_index=1, event=forwarded, **COUNTERS)
    log = fx.Log(label="l", value=1, c_index=0, owner=("transition", 0), **COUNTERS)
    error = fx.ErrorRaised(
        name="error.execution", message="m", sendid=None, line=3, c_index=0, owner=None, **COUNTERS
    )
    done = fx.Done(donedata=None, configuration=(), **COUNTERS)
    budget = fx.BudgetExhausted(configuration=(), budget=1, pending_internal_events=0, **COUNTERS)
    informs = [
        fx.DatamodelInit(datamodel={}, **COUNTERS),
        fx.MacrostepStable(configuration=(), **COUNTERS),
        fx.EventDequeued(event=forwarded, source="external", **COUNTERS),
    ]
    immediate = send(target="#_scxml_other")
    planned = planner.plan(
        "me",
        [immediate, delayed, *informs, cancel, invoke, stop, forward, log, error, done, budget],
    )
    assert planned == [
        planner.Deliver(
            planner.sent_event("me", immediate), planner.SessionTarget("other"), "send_1"
        ),
        planner.Schedule(delayed),
        planner.CancelTimers(cancel),
        planner.StartInvocation(invoke),
        planner.StopInvocation(stop),
        planner.Forward("i", forwarded),
        planner.Report(log),
        planner.Report(error),
        planner.Halt(done),
        planner.Halt(budget),
    ]
