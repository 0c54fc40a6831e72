"""The console's live stream (server-sent events) over real HTTP: a change event now and
after every step, ``gone`` for an execution that disappears, and a bound on streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from statifier_web import PollingFeed

from web_support.rig import WebRig, web_rig

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
