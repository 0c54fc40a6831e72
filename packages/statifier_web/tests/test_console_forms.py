"""The console's forms over plain HTTP (an open app: no login, the CSRF check still on):
what an action tells the operator stays small enough for the session cookie."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from statifier_web._console import FLASH_CHARS

from web_support.rig import WebRig, web_rig

LIMIT = 2000


@pytest.fixture
async def console(pool: AsyncConnectionPool) -> AsyncIterator[WebRig]:
    """An open app taking bodies of at most ``LIMIT`` bytes."""
    async with web_rig(pool, tokens=(), open=True, max_body_bytes=LIMIT) as rig:
        yield rig


def csrf_of(page: str) -> str:
    """The CSRF token a rendered page's forms carry."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def test_a_long_message_is_clipped_to_fit_the_session_cookie(console: WebRig) -> None:
    await console.client.post("/api/executions", json={"chart": "card", "id": "f1"})
    await console.client.post("/api/executions/f1/cancel")
    async with httpx.AsyncClient(base_url=console.url, follow_redirects=True) as browser:
        token = csrf_of((await browser.get("/console/executions/f1")).text)
        name = "n" * (LIMIT - 100)
        answer = await browser.post(
            "/console/executions/f1/events", data={"csrf_token": token, "name": name}
        )
        assert answer.status_code == 200
        assert "was not sent: execution &#39;f1&#39; is cancelled" not in answer.text  # clipped
        flash = re.search(r'<p class="flash flash-error" role="status">([^<]*)</p>', answer.text)
        assert flash is not None
        assert flash.group(1).startswith("n" * 100)
        assert flash.group(1).endswith("more characters)")
        assert len(flash.group(1)) < FLASH_CHARS + 40
        assert all(len(cookie.value or "") < 4000 for cookie in browser.cookies.jar)
        # The session survived: the same CSRF token still works.
        again = await browser.post(
            "/console/executions/f1/events", data={"csrf_token": token, "name": "note"}
        )
        assert "note was not sent: execution &#39;f1&#39; is cancelled" in again.text


async def test_a_form_without_the_session_s_csrf_token_is_refused(console: WebRig) -> None:
    await console.client.post("/api/executions", json={"chart": "card", "id": "f2"})
    async with httpx.AsyncClient(base_url=console.url) as browser:
        await browser.get("/console/executions/f2")
        for data in ({}, {"csrf_token": "forged"}):
            refused = await browser.post("/console/executions/f2/do/cancel", data=data)
            assert refused.status_code == 403
            assert "csrf_failed" in refused.text
        garbled = await browser.post(
            "/console/executions/f2/do/cancel",
            content=b"--x\r\nnot a part",
            headers={"Content-Type": "multipart/form-data; boundary=x"},
        )
        assert garbled.status_code in (400, 403)
    assert (await console.executions.get("f2")).status == "active"


async def test_a_form_over_the_body_limit_is_413(console: WebRig) -> None:
    await console.client.post("/api/executions", json={"chart": "card", "id": "f3"})
    async with httpx.AsyncClient(base_url=console.url) as browser:
        token = csrf_of((await browser.get("/console/executions/f3")).text)
        answer = await browser.post(
            "/console/executions/f3/events",
            data={"csrf_token": token, "name": "note", "data": '"' + "x" * LIMIT + '"'},
        )
        assert answer.status_code == 413
        assert "request_too_large" in answer.text
    assert (await console.executions.get("f3")).step_count == 1


async def test_the_history_shows_the_newest_entries_and_pages_back(console: WebRig) -> None:
    await console.client.post("/api/executions", json={"chart": "card", "id": "f4"})
    for n in range(29):
        await console.client.post("/api/executions/f4/events", json={"name": "note", "data": n})
    async with httpx.AsyncClient(base_url=console.url) as browser:
        page = (await browser.get("/console/executions/f4")).text
        seqs = [int(seq) for seq in re.findall(r'<td class="num">(\d+)</td>', page)]
        assert seqs == list(range(30, 5, -1))  # the 25 newest, newest first
        older = re.search(r'href="([^"]+/history\?before=6)"', page)
        assert older is not None
        rest = (await browser.get(older.group(1))).text
        assert [int(seq) for seq in re.findall(r'<td class="num">(\d+)</td>', rest)] == [
            5, 4, 3, 2, 1
        ]  # fmt: skip
        assert "Older entries" not in rest
        bad = await browser.get("/console/executions/f4/history", params={"before": "x"})
        assert bad.status_code == 422
