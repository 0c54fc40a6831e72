"""Serving: under a base path, with templates of the operator's, on loopback only when
open, and the headers every page carries (over real HTTP)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_web import WebConfigError, WebSettings, create_app, is_loopback, serve
from statifier_web._server import check_base_path, mounted

from web_support.rig import TOKEN, executions_on, web_rig
from web_support.server import serving


async def test_the_app_mounted_under_a_base_path_links_under_it(pool: AsyncConnectionPool) -> None:
    async with web_rig(pool) as rig:
        app = create_app(rig.executions, WebSettings(tokens=(TOKEN,)))
        async with serving(mounted(app, "/ops")) as url, httpx.AsyncClient(base_url=url) as client:
            root = await client.get("/")
            assert (root.status_code, root.headers["location"]) == (303, "/ops/")
            start = await client.get("/ops/")
            assert start.headers["location"] == f"{url}/ops/console/"
            login = await client.get("/ops/console/login")
            assert login.status_code == 200
            links = set(re.findall(r'(?:href|src|action)="([^"]+)"', login.text))
            assert links == {
                f"{url}/ops/console/static/statifier_web/console.css",
                f"{url}/ops/console/static/statifier_web/console.js",
                f"{url}/ops/console/static/statifier_web/favicon.svg",
                f"{url}/ops/console/",
                f"{url}/ops/console/login",
            }
            script = await client.get("/ops/console/static/statifier_web/console.js")
            assert script.status_code == 200
            assert "EventSource" in script.text
            # The page names its icon: a browser asks no /favicon.ico outside the mount.
            icon = await client.get("/ops/console/static/statifier_web/favicon.svg")
            assert (icon.status_code, icon.headers["content-type"]) == (200, "image/svg+xml")
            health = await client.get("/ops/health")
            assert health.json()["status"] == "ok"


async def test_console_pages_carry_a_strict_policy(pool: AsyncConnectionPool) -> None:
    async with web_rig(pool) as rig, httpx.AsyncClient(base_url=rig.url) as client:
        page = await client.get("/console/login")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self'" in policy
        assert "default-src 'none'" in policy
        assert "'unsafe-inline'" not in policy
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["referrer-policy"] == "no-referrer"
        cookie = page.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        assert "secure" not in cookie
        api = await rig.client.get("/api/counts")
        assert api.headers["x-content-type-options"] == "nosniff"
        assert api.headers["cache-control"] == "no-store"


async def test_secure_cookies_are_sent_over_https_only(pool: AsyncConnectionPool) -> None:
    async with (
        web_rig(pool, secure_cookies=True) as rig,
        httpx.AsyncClient(base_url=rig.url) as client,
    ):
        page = await client.get("/console/login")
        assert "secure" in page.headers["set-cookie"].lower()


async def test_templates_of_the_operator_override_the_console_s(
    pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    folder = tmp_path / "statifier_web"
    folder.mkdir()
    (folder / "login.html").write_text(
        '{% extends "statifier_web/base.html" %}{% block content %}'
        "<p id=own>Ask the on-call engineer for a token.</p>{% endblock %}"
    )
    async with (
        web_rig(pool, templates=tmp_path) as rig,
        httpx.AsyncClient(base_url=rig.url) as client,
    ):
        page = await client.get("/console/login")
        assert "<p id=own>Ask the on-call engineer for a token.</p>" in page.text
        assert "console.css" in page.text  # the package's base template still serves it


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),  # noqa: S104 - the address under test, nothing binds it
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_an_open_app_is_served_on_loopback_only(pool: AsyncConnectionPool) -> None:

    app = create_app(
        executions_on(pool, Oban(pool=pool, name="open_check")), WebSettings(open=True)
    )
    with pytest.raises(WebConfigError, match="loopback only"):
        await serve(app, host="0.0.0.0", port=0)  # noqa: S104 - refused before it binds


@pytest.mark.parametrize("path", ["ops", "/ops/", "//ops", "/a//b"])
def test_base_paths_are_checked(path: str) -> None:
    with pytest.raises(WebConfigError):
        check_base_path(path)
    assert check_base_path("/") == ""
    assert check_base_path("/a/b") == "/a/b"


async def test_health_is_503_when_the_database_does_not_answer(pool: AsyncConnectionPool) -> None:
    closed = AsyncConnectionPool(pool.conninfo, open=False)  # never opened: it cannot connect
    app = create_app(executions_on(closed, Oban(pool=closed, name="health_check")),
                     WebSettings(tokens=(TOKEN,)))  # fmt: skip
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        health = await client.get("/health")
    assert health.status_code == 503
    assert health.json() == {"status": "unavailable", "database": "unreachable"}
