"""The BasicHTTP locations of the app over real HTTP on loopback against real PostgreSQL:
a POST to an execution's location becomes one external event, its capability the only
credential; bounds, keys and typed answers; a live session's location; a chart that POSTs
to its own location through a job."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.basichttp import BasicHTTP, Kind, Locations
from statifier.core.events import BASIC_HTTP_EVENT_PROCESSOR
from statifier.runtime.session import Session
from statifier_persistence import MAX_ID_LENGTH
from statifier_web._basichttp import MAX_IDEMPOTENCY_KEY, SESSION_KEYS, RateLimit, RecentKeys

from tests.spans import traced
from web_support.basichttp import KEY, BasicHTTPRig, basichttp_rig
from web_support.rig import web_rig

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

LISTENER = statifier.compile(
    f"""<scxml {NS} name="listener" initial="waiting">
      <datamodel><data id="got"/><data id="raw"/><data id="origintype"/></datamodel>
      <state id="waiting">
        <transition event="paid" target="paid">
          <assign location="got" expr="_event.data"/>
          <assign location="raw" expr="_event.raw"/>
          <assign location="origintype" expr="_event.origintype"/>
        </transition>
        <transition event="HTTP.POST" target="posted">
          <assign location="got" expr="_event.data"/>
        </transition>
        <transition event="stop" target="stopped"/>
      </state>
      <state id="paid"><transition event="paid" target="paid_twice"/></state>
      <state id="posted"/>
      <final id="paid_twice"/>
      <final id="stopped"/>
    </scxml>"""
)

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest_asyncio.fixture
async def rig(pool: AsyncConnectionPool) -> AsyncIterator[BasicHTTPRig]:
    """The app with BasicHTTP locations under its own address."""
    async with basichttp_rig(pool, basichttp_rate=1000.0, basichttp_burst=1000) as served:
        yield served


async def listener(rig: BasicHTTPRig, execution_id: str = "l1") -> str:
    """Create a ``LISTENER`` execution; its location's path (under the app)."""
    created = await rig.executions.create(LISTENER, execution_id=execution_id)
    location = created.state.datamodel["_ioprocessors"]["basichttp"]["location"]
    assert location == rig.locations.location(execution_id)
    assert location.startswith(rig.url + "/basichttp/")
    return str(urlsplit(location).path)


async def test_a_form_posted_to_the_location_is_one_external_event(rig: BasicHTTPRig) -> None:
    path = await listener(rig)
    response = await rig.client.post(path, content=b"_scxmleventname=paid&amount=12", headers=FORM)
    assert response.status_code == 204, response.text
    _, state = await rig.executions.load("l1")
    assert state.active_leaf_ids() == ("paid",)
    assert state.datamodel["got"] == {"amount": "12"}
    assert state.datamodel["origintype"] == BASIC_HTTP_EVENT_PROCESSOR
    assert state.datamodel["raw"].startswith(f"POST {path} HTTP/1.1\r\n")
    assert state.datamodel["raw"].endswith("\r\n\r\n_scxmleventname=paid&amount=12")
    entry = (await rig.executions.history("l1")).entries[-1]
    assert (entry.kind, entry.trigger.source) == ("event", "http")
    assert entry.event is not None
    assert entry.event.name == "paid"


async def test_json_and_a_name_in_the_query(rig: BasicHTTPRig) -> None:
    path = await listener(rig)
    response = await rig.client.post(f"{path}?_scxmleventname=paid", json={"amount": 12})
    assert response.status_code == 204, response.text
    _, state = await rig.executions.load("l1")
    assert state.datamodel["got"] == {"amount": 12}


async def test_without_a_name_the_event_is_http_post(rig: BasicHTTPRig) -> None:
    path = await listener(rig)
    response = await rig.client.post(path, content=b"hello", headers={"Content-Type": "text/plain"})
    assert response.status_code == 204
    _, state = await rig.executions.load("l1")
    assert (state.active_leaf_ids(), state.datamodel["got"]) == (("posted",), "hello")


async def test_an_idempotency_key_applies_a_post_once(rig: BasicHTTPRig) -> None:
    path = await listener(rig)
    headers = {**FORM, "Idempotency-Key": "partner-7"}
    first = await rig.client.post(path, content=b"_scxmleventname=paid", headers=headers)
    again = await rig.client.post(path, content=b"_scxmleventname=paid", headers=headers)
    assert (first.status_code, again.status_code) == (204, 200)
    assert again.json() == {"already_applied": True}
    _, state = await rig.executions.load("l1")
    assert state.active_leaf_ids() == ("paid",)  # not paid_twice
    bad = await rig.client.post(path, content=b"", headers={**FORM, "Idempotency-Key": "a b"})
    assert bad.status_code == 400


async def test_only_the_capability_opens_a_location(rig: BasicHTTPRig) -> None:
    path = await listener(rig)
    capability = path.rsplit("/", 1)[1]
    other = capability[:-1] + ("A" if capability[-1] != "A" else "B")
    answers = [
        await rig.client.post(p, content=b"_scxmleventname=paid", headers=FORM)
        for p in (
            path.replace(capability, other),  # a wrong capability
            f"/basichttp/l2/{rig.locations.capability('l2')}",  # no such execution
            f"/basichttp/l1/{rig.locations.capability('l1', 'session')}",  # a session's
            "/basichttp/l1",
            "/basichttp/%ff/x",
        )
    ]
    assert [a.status_code for a in answers] == [404] * 5
    assert len({a.text for a in answers[:3]}) == 1  # one answer: no oracle
    _, state = await rig.executions.load("l1")
    assert state.active_leaf_ids() == ("waiting",)


async def test_a_location_needs_no_token_and_the_api_still_does(rig: BasicHTTPRig) -> None:
    assert "authorization" not in rig.client.headers
    assert (await rig.client.get("/api/executions")).status_code == 401


async def test_an_execution_that_ended_or_is_parked_takes_no_post(rig: BasicHTTPRig) -> None:
    path = await listener(rig)
    await rig.executions.step("l1", statifier.Event(name="stop"))
    ended = await rig.client.post(path, content=b"_scxmleventname=paid", headers=FORM)
    assert ended.status_code == 409
    assert ended.json()["error"]["code"] == "execution_terminal"
    parked = await listener(rig, "l3")
    await rig.executions.park("l3")
    answer = await rig.client.post(parked, content=b"_scxmleventname=paid", headers=FORM)
    assert (answer.status_code, answer.json()["error"]["code"]) == (409, "execution_parked")


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/octet-stream", b"\x00", 415),
        ("application/x-www-form-urlencoded", b"_scxmleventname=a&_scxmleventname=b", 400),
        ("application/json", b"{", 400),
    ],
)
async def test_what_is_no_event_is_refused(
    rig: BasicHTTPRig, content_type: str, body: bytes, status: int
) -> None:
    path = await listener(rig)
    response = await rig.client.post(path, content=body, headers={"Content-Type": content_type})
    assert response.status_code == status
    assert response.json()["error"]["code"] == "not_an_event"


async def test_the_body_is_bounded(pool: AsyncConnectionPool) -> None:
    async with basichttp_rig(pool, basichttp_max_bytes=20) as rig:
        path = await listener(rig)
        text = {"Content-Type": "text/plain"}
        assert (await rig.client.post(path, content=b"x" * 20, headers=text)).status_code == 204
        too_large = await rig.client.post(path, content=b"x" * 21, headers=text)
        assert too_large.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:
            for _ in range(3):
                yield b"x" * 10

        chunked = await rig.client.post(path, content=chunks(), headers=text)
        assert chunked.status_code == 413


async def test_the_rate_of_a_location_is_bounded(pool: AsyncConnectionPool) -> None:
    async with basichttp_rig(pool, basichttp_rate=0.5, basichttp_burst=2) as rig:
        path = await listener(rig)
        other = await listener(rig, "l4")
        codes = [
            (await rig.client.post(path, content=b"", headers=FORM)).status_code for _ in range(3)
        ]
        assert codes == [204, 204, 429]
        refused = await rig.client.post(path, content=b"", headers=FORM)
        assert refused.json()["error"]["retry_after_s"] == 2
        assert (await rig.client.post(other, content=b"", headers=FORM)).status_code == 204


def test_a_token_bucket_refills_at_its_rate() -> None:
    limit = RateLimit(rate=2.0, burst=2)
    key: tuple[Kind, str] = ("execution", "x")
    assert limit.wait_s(key, now=0.0) == 0
    assert limit.wait_s(key, now=0.0) == 0
    assert limit.wait_s(key, now=0.0) == pytest.approx(0.5)
    assert limit.wait_s(key, now=0.49) > 0
    assert limit.wait_s(key, now=0.5) == 0
    other: tuple[Kind, str] = ("execution", "y")
    assert limit.wait_s(other, now=0.5) == 0


async def test_an_app_without_locations_receives_nothing(pool: AsyncConnectionPool) -> None:
    async with web_rig(pool) as web:
        path = f"/basichttp/x/{Locations('http://127.0.0.1', KEY).capability('x')}"
        response = await web.client.post(path, content=b"", headers=FORM)
        assert response.status_code == 404


async def test_an_id_holding_a_slash_is_one_segment(rig: BasicHTTPRig) -> None:
    path = await listener(rig, "orders/7")
    assert "/orders%2F7/" in path
    response = await rig.client.post(path, content=b"_scxmleventname=paid", headers=FORM)
    assert response.status_code == 204
    _, state = await rig.executions.load("orders/7")
    assert state.active_leaf_ids() == ("paid",)


async def test_a_live_session_in_the_app_s_process_has_a_location(rig: BasicHTTPRig) -> None:
    session = await Session.start(
        LISTENER, session_id="live1", basichttp=BasicHTTP(locations=rig.locations)
    )
    location = session.snapshot().datamodel["_ioprocessors"]["basichttp"]["location"]
    assert location == rig.locations.location("live1", "session")
    response = await rig.client.post(
        urlsplit(location).path, content=b"_scxmleventname=paid&a=1", headers=FORM
    )
    assert response.status_code == 202
    for _ in range(200):
        if session.status().configuration == ("paid",):
            break
        await asyncio.sleep(0.01)
    assert session.snapshot().datamodel["got"] == {"a": "1"}
    # An execution's capability never reaches the session (nor the other way round).
    wrong = f"/basichttp/live1/{rig.locations.capability('live1')}"
    assert (await rig.client.post(wrong, content=b"", headers=FORM)).status_code == 404
    await session.stop()
    gone = await rig.client.post(urlsplit(location).path, content=b"", headers=FORM)
    assert gone.status_code == 404


COUNTER = statifier.compile(
    f"""<scxml {NS} name="counter" initial="s">
      <datamodel><data id="paid" expr="0"/></datamodel>
      <state id="s">
        <transition event="paid"><assign location="paid" expr="paid + 1"/></transition>
        <transition event="stop" target="end"/>
      </state>
      <final id="end"/>
    </scxml>"""
)


async def test_a_live_session_applies_a_key_once(rig: BasicHTTPRig) -> None:
    session = await Session.start(
        COUNTER, session_id="live2", basichttp=BasicHTTP(locations=rig.locations)
    )
    path = urlsplit(rig.locations.location("live2", "session")).path
    answers = [
        await rig.client.post(path, content=b"_scxmleventname=paid", headers=headers)
        for headers in (
            {**FORM, "Idempotency-Key": "k1"},
            {**FORM, "Idempotency-Key": "k1"},
            {**FORM, "Idempotency-Key": "k2"},
            FORM,
        )
    ]
    assert [a.status_code for a in answers] == [202, 200, 202, 202]
    assert answers[1].json() == {"already_applied": True}
    await rig.client.post(path, content=b"_scxmleventname=stop", headers=FORM)
    await asyncio.wait_for(session.wait_halted(), 5)  # events are taken in order
    assert session.snapshot().datamodel["paid"] == 3
    await session.stop()
    # A session of the same id started later has seen no key.
    again = await Session.start(
        COUNTER, session_id="live2", basichttp=BasicHTTP(locations=rig.locations)
    )
    headers = {**FORM, "Idempotency-Key": "k1"}
    response = await rig.client.post(path, content=b"_scxmleventname=paid", headers=headers)
    assert response.status_code == 202
    await again.stop()


async def test_a_session_remembers_its_last_keys() -> None:
    assert SESSION_KEYS == 1000
    one, two = await Session.start(COUNTER), await Session.start(COUNTER)
    recent = RecentKeys(2)
    assert [recent.first_use(one, key) for key in ("a", "b", "a", "c")] == [
        True, True, False, True
    ]  # fmt: skip
    assert recent.first_use(two, "a")  # each session has its own
    assert not recent.first_use(one, "a")  # used last: kept
    assert recent.first_use(one, "b")  # the oldest: forgotten
    for session in (one, two):
        await session.stop()


ECHO = statifier.compile(
    f"""<scxml {NS} name="echo" initial="s">
      <datamodel><data id="got"/></datamodel>
      <state id="s">
        <onentry>
          <send type="basichttp" event="ping" targetexpr="_ioprocessors['basichttp']['location']">
            <param name="n" expr="1"/>
          </send>
        </onentry>
        <transition event="ping" target="heard">
          <assign location="got" expr="_event.data"/>
        </transition>
        <transition event="error.communication" target="failed"/>
      </state>
      <state id="heard"/>
      <final id="failed"/>
    </scxml>"""
)


async def echoed(rig: BasicHTTPRig, execution_id: str) -> Any:
    """Create an ``ECHO`` execution; its state once it heard itself (or failed)."""
    await rig.executions.create(ECHO, execution_id=execution_id)
    state: Any = None
    for _ in range(300):
        _, state = await rig.executions.load(execution_id)
        if state.active_leaf_ids() != ("s",):
            break
        await asyncio.sleep(0.02)
    return state


async def test_a_chart_posts_to_its_own_location_through_a_job(rig: BasicHTTPRig) -> None:
    state = await echoed(rig, "echo")
    assert state.active_leaf_ids() == ("heard",)
    assert state.datamodel["got"] == {"n": "1"}
    entry = (await rig.executions.history("echo")).entries[-1]
    assert entry.key is not None  # the job's Idempotency-Key was the step's key
    assert entry.key.startswith("echo/")


async def test_a_key_longer_than_a_step_key_is_taken_by_its_digest(rig: BasicHTTPRig) -> None:
    # The longest execution id makes an Idempotency-Key ("<id>/<job id>") over 200.
    execution_id = "e" * MAX_ID_LENGTH
    state = await echoed(rig, execution_id)
    assert state.active_leaf_ids() == ("heard",)
    entry = (await rig.executions.history(execution_id)).entries[-1]
    assert entry.key is not None
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", entry.key)
    path = urlsplit(rig.locations.location(execution_id)).path
    longest = {**FORM, "Idempotency-Key": "k" * MAX_IDEMPOTENCY_KEY}
    answers = [
        await rig.client.post(path, content=b"_scxmleventname=ping", headers=headers)
        for headers in (longest, longest, {**FORM, "Idempotency-Key": "k" * 1025})
    ]
    assert [a.status_code for a in answers] == [204, 200, 400]


async def test_a_chart_posting_to_a_chart_stays_in_one_trace(rig: BasicHTTPRig) -> None:
    with traced() as tracing:
        state = await echoed(rig, "echo_traced")
        for _ in range(200):
            if tracing.named("Step:echo"):
                break
            await asyncio.sleep(0.01)
    assert state.active_leaf_ids() == ("heard",)
    (create,) = tracing.named("Create:echo")
    (step,) = tracing.named("Step:echo")  # the POST, received by the route
    assert step.trace_id == create.trace_id
