"""Outbound BasicHTTP POSTs over real HTTP on loopback: the client under the allow-list,
and live sessions that send with it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import statifier
from statifier import instrumentation
from statifier.basichttp import (
    BasicHTTP,
    BasicHTTPError,
    Locations,
    OutboundPolicy,
    OutboundRequest,
    PostFailed,
    PostRefused,
)
from statifier.basichttp.client import USER_AGENT, BasicHTTPClient
from statifier.runtime.session import NO_HTTP_CLIENT, Session
from statifier.testing import HttpReceiver

from engine_support.recording import Recording

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'
LOOPBACK = ("127.0.0.0/8", "::1/128")


def policy(**options: object) -> OutboundPolicy:
    settings: dict[str, object] = {
        "hosts": ("127.0.0.1", "localhost"),
        "ports": None,
        "networks": LOOPBACK,
    }
    settings.update(options)
    return OutboundPolicy(**settings)  # type: ignore[arg-type]


def request(url: str, body: bytes = b"a=1") -> OutboundRequest:
    return OutboundRequest(url, "application/x-www-form-urlencoded", body, "send_1")


@pytest.fixture
async def receiver() -> AsyncIterator[HttpReceiver]:
    async with HttpReceiver() as running:
        yield running


async def test_a_post_arrives_with_its_body_type_and_key(receiver: HttpReceiver) -> None:
    async with BasicHTTPClient(policy()) as client:
        status = await client.post(request(receiver.url("/in?x=1")), idempotency_key="e/7")
    assert status == 204
    (got,) = receiver.requests
    assert (got.method, got.target, got.body) == ("POST", "/in?x=1", b"a=1")
    assert got.headers["content-type"] == "application/x-www-form-urlencoded"
    assert got.headers["idempotency-key"] == "e/7"
    assert got.headers["user-agent"] == USER_AGENT == f"statifier-basichttp/{statifier.__version__}"
    assert got.headers["host"] == f"127.0.0.1:{receiver.port}"


class Carrying(Recording):
    """A recorder whose context travels as W3C headers (and baggage)."""

    def carrier(self) -> dict[str, str] | None:
        return {"traceparent": TRACEPARENT, "tracestate": "k=v", "baggage": "user=secret"}


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_a_post_carries_the_trace_but_not_the_baggage(receiver: HttpReceiver) -> None:
    async with BasicHTTPClient(policy()) as client:
        with instrumentation.installed(Carrying()):
            await client.post(request(receiver.url()))
        await client.post(request(receiver.url()))  # tracing off: no trace headers
    traced, untraced = receiver.requests
    assert (traced.headers["traceparent"], traced.headers["tracestate"]) == (TRACEPARENT, "k=v")
    assert "baggage" not in traced.headers
    assert not {"traceparent", "tracestate", "baggage"} & set(untraced.headers)


async def test_a_name_is_checked_on_the_addresses_it_resolves_to(receiver: HttpReceiver) -> None:
    # "localhost" is on the allow-list by name, but resolves to loopback: refused unless
    # the loopback network is allowed too.
    url = receiver.url(host="localhost")
    async with BasicHTTPClient(policy(networks=())) as client:
        with pytest.raises(PostRefused, match="is not public"):
            await client.post(request(url))
    assert receiver.requests == []
    async with BasicHTTPClient(policy()) as client:
        assert await client.post(request(url)) == 204


async def test_the_allow_list_is_checked_before_anything_is_sent(receiver: HttpReceiver) -> None:
    async with BasicHTTPClient(OutboundPolicy()) as client:
        with pytest.raises(PostRefused, match="allow-list is empty"):
            await client.post(request(receiver.url()))
    async with BasicHTTPClient(policy(ports=(80, 443))) as client:
        with pytest.raises(PostRefused, match=f"port {receiver.port} is not allowed"):
            await client.post(request(receiver.url()))
    async with BasicHTTPClient(policy(max_body_bytes=2)) as client:
        with pytest.raises(PostRefused, match="over the limit of 2"):
            await client.post(request(receiver.url()))
    assert receiver.requests == []


@pytest.mark.parametrize(
    ("status", "retry"),
    [(500, True), (503, True), (429, True), (408, True), (404, False), (400, False), (302, False)],
)
async def test_an_answer_other_than_2xx_fails(status: int, retry: bool) -> None:
    async with HttpReceiver(statuses=[status]) as receiver, BasicHTTPClient(policy()) as client:
        with pytest.raises(PostFailed) as caught:
            await client.post(request(receiver.url()))
    assert (caught.value.status, caught.value.retry) == (status, retry)
    assert len(receiver.requests) == 1  # a redirect is not followed


async def test_an_attempt_is_bounded_in_time() -> None:
    hanging = HttpReceiver(hang=True)
    async with hanging as receiver, BasicHTTPClient(policy(timeout_s=0.3)) as client:
        started = asyncio.get_running_loop().time()
        with pytest.raises(PostFailed, match=r"0\.3 s") as caught:
            await client.post(request(receiver.url()))
        assert asyncio.get_running_loop().time() - started < 5
    assert caught.value.retry


async def test_nobody_listening_fails_and_may_be_retried(receiver: HttpReceiver) -> None:
    closed = receiver.url().replace(str(receiver.port), "9")
    async with BasicHTTPClient(policy()) as client:
        with pytest.raises(PostFailed) as caught:
            await client.post(request(closed))
    assert caught.value.retry
    assert caught.value.status is None


# -- live sessions ------------------------------------------------------------------------


def sender(target: str, extra: str = "") -> statifier.Machine:
    return statifier.compile(
        f'<scxml {NS} initial="s"><datamodel><data id="why"/></datamodel><state id="s"><onentry>'
        f'<send id="h" type="basichttp" event="ping" target="{target}">'
        '<param name="n" expr="1"/></send></onentry>'
        '<transition event="error.communication" target="failed">'
        '<assign location="why" expr="_event.data"/></transition></state>'
        f'{extra}<final id="failed"/></scxml>'
    )


async def test_a_live_session_posts_in_process(receiver: HttpReceiver) -> None:
    async with BasicHTTPClient(policy()) as client:
        session = await Session.start(
            sender(receiver.url()), session_id="live1", basichttp=BasicHTTP(client)
        )
        (got,) = await receiver.wait_for(1)
        assert got.body == b"_scxmleventname=ping&n=1"
        assert got.headers["idempotency-key"].startswith("live1/")
        assert session.status().configuration == ("s",)
        await session.stop()


async def test_a_live_session_hears_error_communication_when_its_post_fails() -> None:
    async with HttpReceiver(statuses=[404]) as receiver, BasicHTTPClient(policy()) as client:
        session = await Session.start(sender(receiver.url()), basichttp=BasicHTTP(client))
        await asyncio.wait_for(session.wait_halted(), 5)
        assert session.status().configuration == ("failed",)
        why = session.snapshot().datamodel["why"]
        assert why == {"message": "answered 404", "status": 404, "attempts": 1}
        await session.stop()


async def test_a_live_session_without_a_client_or_allowance_is_refused_at_once() -> None:
    session = await Session.start(sender("http://a.example/"))
    assert session.status().configuration == ("failed",)
    assert session.snapshot().datamodel["why"] == {"message": NO_HTTP_CLIENT}
    await session.stop()
    async with BasicHTTPClient(OutboundPolicy()) as client:
        session = await Session.start(sender("http://a.example/"), basichttp=BasicHTTP(client))
        assert session.status().configuration == ("failed",)
        assert "allow-list is empty" in session.snapshot().datamodel["why"]["message"]
        await session.stop()


async def test_a_live_session_bounds_the_posts_under_way() -> None:
    gate = asyncio.Event()
    arrived: list[bytes] = []

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        arrived.append(await reader.readuntil(b"\r\n\r\n"))
        await gate.wait()  # answers only once the test has seen the third send refused
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(held, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    three = statifier.compile(
        f'<scxml {NS} initial="s"><datamodel><data id="errors" expr="[]"/></datamodel>'
        '<state id="s"><onentry><foreach array="[1, 2, 3]" item="n">'
        f'<send type="basichttp" event="ping" target="http://127.0.0.1:{port}/" namelist="n"/>'
        '</foreach></onentry><transition event="error.communication">'
        '<assign location="errors" expr="errors + [_event.data]"/></transition></state></scxml>'
    )
    async with server, BasicHTTPClient(policy()) as client:
        session = await Session.start(three, basichttp=BasicHTTP(client, max_pending=2))
        try:
            while len(arrived) < 2:
                await asyncio.sleep(0.01)
            errors = session.snapshot().datamodel["errors"]
            assert errors == [{"message": "more than 2 BasicHTTP sends under way"}]
        finally:
            gate.set()
            await session.stop()
    assert len(arrived) == 2


@pytest.mark.parametrize("bound", [0, -1, True, 1.5])
def test_max_pending_is_a_positive_integer(bound: object) -> None:
    with pytest.raises(BasicHTTPError, match="max_pending"):
        BasicHTTP(max_pending=bound)  # type: ignore[arg-type]


async def test_a_live_session_has_the_location_its_host_gives() -> None:
    locations = Locations("https://app.example", b"k" * 16)
    machine = statifier.compile(
        f'<scxml {NS}><datamodel><data id="here" '
        "expr=\"_ioprocessors['basichttp']['location']\"/></datamodel><state id=\"s\"/></scxml>"
    )
    session = await Session.start(
        machine, session_id="live2", basichttp=BasicHTTP(locations=locations)
    )
    assert session.snapshot().datamodel["here"] == locations.location("live2", "session")
    await session.stop()
