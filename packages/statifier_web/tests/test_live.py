"""The console's live stream (server-sent events) over real HTTP: a change event now and
after every step, ``gone`` for an execution that disappears, an end (logged) when its feed
fails, and a bound on streams that holds for requests arriving together."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from statifier_persistence import Execution, Executions
from statifier_web import PollingFeed, WebSettings, create_app

from web_support.rig import WebRig, web_rig
from web_support.server import serving

TIMEOUT_S = 10.0


@pytest.fixture(params=["notify", "polling"])
async def live(pool: AsyncConnectionPool, request: pytest.FixtureRequest) -> AsyncIterator[WebRig]:
    """An open app (no login) with at most 2 streams, its feed woken by NOTIFY (the
    default) or polling every 50 ms."""
    feed = None if request.param == "notify" else (lambda e: PollingFeed(e, 0.05))
    async with web_rig(pool, feed, tokens=(), open=True, max_streams=2) as rig:
        yield rig


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """``(event, data)`` of each server-sent event of a streaming answer."""
    name, data = "message", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = line.removeprefix("data: ")
        elif line == "" and data:
            yield name, json.loads(data)
            name, data = "message", ""


async def test_a_stream_says_when_the_execution_changes(live: WebRig) -> None:
    await live.client.post("/api/executions", json={"chart": "card", "id": "s1"})
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT_S) as browser,
        browser.stream("GET", "/console/executions/s1/stream") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = events(response)
        name, first = await asyncio.wait_for(anext(stream), TIMEOUT_S)
        assert (name, first["status"]) == ("change", "active")
        await live.client.post("/api/executions/s1/events", json={"name": "capture.requested"})
        name, second = await asyncio.wait_for(anext(stream), TIMEOUT_S)
        assert (name, second["status"]) == ("change", "active")
        assert second["version"] != first["version"]
        await live.client.post("/api/executions/s1/park")
        name, third = await asyncio.wait_for(anext(stream), TIMEOUT_S)
        assert third["status"] == "needs_migration"


async def test_a_notified_stream_ends_with_its_execution(pool: AsyncConnectionPool) -> None:
    async with web_rig(pool, tokens=(), open=True) as live:
        await live.client.post("/api/executions", json={"chart": "card", "id": "s3"})
        async with (
            httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT_S) as browser,
            browser.stream("GET", "/console/executions/s3/stream") as response,
        ):
            stream = events(response)
            assert (await asyncio.wait_for(anext(stream), TIMEOUT_S))[1]["status"] == "active"
            await live.client.post("/api/executions/s3/cancel")
            name, last = await asyncio.wait_for(anext(stream), TIMEOUT_S)
            assert (name, last["status"]) == ("change", "cancelled")
            assert (await asyncio.wait_for(anext(stream), TIMEOUT_S))[0] == "ended"
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(anext(stream), TIMEOUT_S)


async def test_streams_are_bounded_and_freed_when_their_clients_leave(live: WebRig) -> None:
    await live.client.post("/api/executions", json={"chart": "card", "id": "s2"})
    path = "/console/executions/s2/stream"
    async with httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT_S) as browser:
        async with browser.stream("GET", path) as one, browser.stream("GET", path) as two:
            readers = [events(one), events(two)]  # kept: dropping one closes its stream
            for response, reader in zip((one, two), readers, strict=True):
                assert response.status_code == 200
                await asyncio.wait_for(anext(reader), TIMEOUT_S)
            async with browser.stream("GET", path) as refused:
                assert refused.status_code == 503
                assert "too many live streams" in (await refused.aread()).decode()
        # Both left: the server notices, and a new stream is served again.
        deadline = asyncio.get_running_loop().time() + TIMEOUT_S
        while True:
            async with browser.stream("GET", path) as again:
                if again.status_code == 200:
                    break
            assert asyncio.get_running_loop().time() < deadline, "the streams were not freed"
            await asyncio.sleep(0.05)
    missing = await live.client.get("/console/executions/nope/stream")
    assert missing.status_code == 404


async def cut_connections(database_url: str) -> int:
    """End every other session on the test's database, as a failover or a restart of
    PostgreSQL would; how many there were."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_stream_whose_feed_fails_ends_and_the_log_says_why(
    live: WebRig, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="statifier_web")
    await live.client.post("/api/executions", json={"chart": "card", "id": "s4"})
    async with (
        httpx.AsyncClient(base_url=live.url, timeout=TIMEOUT_S) as browser,
        browser.stream("GET", "/console/executions/s4/stream") as response,
    ):
        stream = events(response)
        assert (await asyncio.wait_for(anext(stream), TIMEOUT_S))[0] == "change"
        # A change heard after the first: the feed is past its first read, and listening.
        await live.client.post("/api/executions/s4/events", json={"name": "capture.requested"})
        assert (await asyncio.wait_for(anext(stream), TIMEOUT_S))[0] == "change"
        assert await cut_connections(database_url) > 0
        # The stream ends (the browser connects again) instead of keeping a dead feed open.
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(anext(stream), TIMEOUT_S)
    said = [r for r in caplog.records if "change feed failed" in r.getMessage()]
    assert len(said) == 1
    assert said[0].levelno == logging.WARNING
    assert "'s4'" in said[0].getMessage()
    assert "StoreError" in said[0].getMessage()


def hold_reads(monkeypatch: pytest.MonkeyPatch, executions: Executions, count: int) -> None:
    """Hold each of the next ``count`` reads of an execution until all of them were made,
    then let them go together: ``count`` stream requests reach the bound's check in the
    same turn of the event loop, however the database spaced their reads."""
    read = executions.get
    arrived = 0
    everyone = asyncio.Event()

    async def held(execution_id: str, **options: Any) -> Execution:
        nonlocal arrived
        row = await read(execution_id, **options)
        if not everyone.is_set():
            arrived += 1
            if arrived == count:
                everyone.set()
            await everyone.wait()
        return row

    monkeypatch.setattr(executions, "get", held)


async def open_streams(
    browser: httpx.AsyncClient, execution_id: str, count: int
) -> list[httpx.Response]:
    """``count`` streams of the execution asked for at once (their bodies left unread)."""
    path = f"/console/executions/{execution_id}/stream"
    asked = (browser.send(browser.build_request("GET", path), stream=True) for _ in range(count))
    return list(await asyncio.gather(*asked))


async def names_until_the_end(stream: AsyncIterator[tuple[str, dict[str, Any]]]) -> list[str]:
    """The names of a stream's remaining events, once it ended."""
    return [name async for name, _ in stream]


async def test_streams_asked_for_at_once_are_bounded_and_give_their_slots_back(
    pool: AsyncConnectionPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit, more = 2, 3
    async with (
        web_rig(pool, tokens=(), open=True, max_streams=limit) as rig,
        httpx.AsyncClient(base_url=rig.url, timeout=TIMEOUT_S) as browser,
    ):
        for execution_id in ("b1", "b2"):
            await rig.client.post("/api/executions", json={"chart": "card", "id": execution_id})
        hold_reads(monkeypatch, rig.executions, limit + more)
        answers = await open_streams(browser, "b1", limit + more)
        try:
            served = [answer for answer in answers if answer.status_code == 200]
            assert len(served) == limit, [answer.status_code for answer in answers]
            for answer in answers:
                if answer.status_code != 200:
                    assert answer.status_code == 503
                    assert "too many live streams" in (await answer.aread()).decode()
            readers = [events(answer) for answer in served]
            for reader in readers:
                assert (await asyncio.wait_for(anext(reader), TIMEOUT_S))[0] == "change"
            # The execution ends: each stream says so and ends, having given its slot back
            # before its last chunk.
            await rig.client.post("/api/executions/b1/cancel")
            for reader in readers:
                names = await asyncio.wait_for(names_until_the_end(reader), TIMEOUT_S)
                assert names[-1] == "ended"
        finally:
            for answer in answers:
                await answer.aclose()
        again = await open_streams(browser, "b2", limit)
        try:
            assert [answer.status_code for answer in again] == [200] * limit
        finally:
            for answer in again:
                await answer.aclose()


class LeftEarly:
    """Serves the first request for ``path`` to ``app`` as an ASGI 2.4 server would once
    the client had left: only after the client closed its connection, with a ``send`` that
    raises ``OSError`` (ASGI 2.4; uvicorn speaks 2.3 and returns quietly), so the stream's
    answer never starts. ``arrived`` is set when the request came, ``answered`` once the
    app was done with it. Other requests pass straight on."""

    def __init__(self, app: ASGIApp, path: str) -> None:
        self.app = app
        self.path = path
        self.arrived = asyncio.Event()
        self.answered = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Hold the request for ``path`` until its client left, then pass it on."""
        if scope["type"] != "http" or scope["path"] != self.path or self.arrived.is_set():
            await self.app(scope, receive, send)
            return
        self.arrived.set()
        request = await receive()
        gone = await receive()  # returns once the client closed its connection
        assert gone["type"] == "http.disconnect"
        messages = [request]

        async def replay() -> Message:
            return messages.pop() if messages else gone

        async def closed(message: Message) -> None:
            raise OSError("the client closed its connection")

        asgi = {**scope.get("asgi", {}), "spec_version": "2.4"}
        try:
            await self.app({**scope, "asgi": asgi}, replay, closed)
        except ClientDisconnect:
            pass  # how Starlette says the client left: a server drops the request
        finally:
            self.answered.set()


async def test_a_client_that_left_before_its_stream_began_gives_its_slot_back(
    pool: AsyncConnectionPool,
) -> None:
    async with web_rig(pool, tokens=(), open=True) as rig:
        await rig.client.post("/api/executions", json={"chart": "card", "id": "l1"})
        path = "/console/executions/l1/stream"
        left = LeftEarly(create_app(rig.executions, WebSettings(open=True, max_streams=1)), path)
        async with serving(left) as url, httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S) as http:
            host = urlsplit(url).netloc
            reader, writer = await asyncio.open_connection(*host.split(":"))
            writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            await writer.drain()
            await asyncio.wait_for(left.arrived.wait(), TIMEOUT_S)
            writer.close()
            await writer.wait_closed()
            await asyncio.wait_for(left.answered.wait(), TIMEOUT_S)
            assert await reader.read() == b""  # nothing was sent to the client that left
            async with http.stream("GET", path) as again:
                assert again.status_code == 200
