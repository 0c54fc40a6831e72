"""Where a request comes from, over real HTTP: an open app answers requests for loopback
names only (a DNS-rebinding page sends its own name), and a change sent by a browser from
another origin is refused wherever the browser would send the credential by itself (an
open app: everything but BasicHTTP; an app with tokens: the console). Last, the attacks
made by a real chromium: a cross-site form and a rebound name."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, expect
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from starlette.types import ASGIApp
from statifier_web import WebSettings, create_app
from statifier_web._server import mounted

from web_support.browser import chromium
from web_support.rig import TOKEN, WebRig, console_server, web_rig
from web_support.server import ServerThread, serving

ATTACKER = "attacker.test"
"""A name of another site; the browser test resolves it to 127.0.0.1."""


@pytest.fixture
async def open_app(pool: AsyncConnectionPool) -> AsyncIterator[WebRig]:
    """An open app (no token), with an active execution ``x``."""
    async with web_rig(pool, tokens=(), open=True) as rig:
        started = await rig.client.post("/api/executions", json={"chart": "card", "id": "x"})
        assert started.status_code == 201, started.text
        yield rig


def port_of(url: str) -> int:
    """The port of a ``http://host:port`` URL."""
    port = urlsplit(url).port
    assert port is not None
    return port


async def status_of(rig: WebRig, execution_id: str = "x") -> str:
    """The execution's status, read from the store (not through the app)."""
    return (await rig.executions.get(execution_id)).status


FOREIGN_HOSTS = [
    "attacker.example",
    "attacker.example:{port}",
    "localhost.attacker.example:{port}",
    "127.0.0.1.attacker.example:{port}",
    "192.168.1.5:{port}",
    "[::2]:{port}",
    "[127.0.0.1]:{port}",
    "localhost:{port}:1",
    "localhost:",
]

LOOPBACK_HOSTS = ["localhost:{port}", "LocalHost:{port}", "127.0.0.1", "127.8.9.10:{port}"]


async def test_an_open_app_answers_loopback_names_only(open_app: WebRig) -> None:
    port = port_of(open_app.url)
    for host in FOREIGN_HOSTS:
        forged = {"Host": host.format(port=port)}
        for method, path in [
            ("GET", "/api/executions/x"),
            ("GET", "/console/executions/x"),
            ("GET", "/health"),
            ("POST", "/api/executions/x/cancel"),
        ]:
            answer = await open_app.client.request(method, path, headers=forged)
            assert answer.status_code == 400, (host, method, path, answer.text)
            assert answer.json()["error"]["code"] == "host_not_allowed"
            assert answer.headers["cache-control"] == "no-store"
    assert await status_of(open_app) == "active"
    for host in [*LOOPBACK_HOSTS, "[::1]:{port}"]:
        named = {"Host": host.format(port=port)}
        answer = await open_app.client.get("/api/executions/x", headers=named)
        assert answer.status_code == 200, (host, answer.text)


CROSS_ORIGIN = [
    {"Origin": "http://attacker.example"},
    {"Origin": "http://localhost:1"},  # the same site on another port is another origin
    {"Origin": "null"},  # a sandboxed frame, a page after a cross-site redirect
    {"Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "same-site", "Origin": "http://localhost:1"},
    {"Sec-Fetch-Site": "cross-site", "Origin": "http://{authority}"},
]


@pytest.mark.parametrize(
    "headers",
    CROSS_ORIGIN,
    ids=["other-site", "other-port", "null", "fetch-cross", "fetch-same-site", "fetch-wins"],
)
async def test_an_open_app_refuses_changes_from_another_origin(
    open_app: WebRig, headers: dict[str, str]
) -> None:
    authority = urlsplit(open_app.url).netloc
    sent = {name: value.format(authority=authority) for name, value in headers.items()}
    form = {**sent, "Content-Type": "application/x-www-form-urlencoded"}
    async with httpx.AsyncClient(base_url=open_app.url) as browser:
        for action in ("cancel", "park", "unpark"):
            answer = await browser.post(f"/api/executions/x/{action}", headers=form)
            assert answer.status_code == 403, (action, answer.text)
            assert answer.json()["error"]["code"] == "cross_origin"
        started = await browser.post(
            "/api/executions",
            content=b'{"chart": "card", "id": "y"}',
            headers={**sent, "Content-Type": "text/plain"},
        )
        assert started.status_code == 403
        # Refused even with the session's own CSRF token: the check does not lean on it.
        page = await browser.get("/console/executions/x")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        console = await browser.post(
            "/console/executions/x/do/cancel", data={"csrf_token": token.group(1)}, headers=sent
        )
        assert console.status_code == 403
        assert console.json()["error"]["code"] == "cross_origin"
        # Reading is not changing: a page of another origin cannot read the answer anyway.
        assert (await browser.get("/api/executions/x", headers=sent)).status_code == 200
    assert await status_of(open_app) == "active"
    assert (await open_app.client.get("/api/executions/y")).status_code == 404


SAME_ORIGIN = [
    {},  # curl, a script: no browser, so nothing a browser adds by itself to abuse
    {"Origin": "http://{authority}"},
    {"Sec-Fetch-Site": "same-origin", "Origin": "http://{authority}"},
    {"Sec-Fetch-Site": "none"},  # asked for by the user
]


async def test_an_open_app_takes_changes_from_its_own_pages_and_from_no_browser_only(
    open_app: WebRig,
) -> None:
    async with httpx.AsyncClient(base_url=open_app.url) as browser:
        page = await browser.get("/console/executions/x")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        for authority in (urlsplit(open_app.url).netloc, f"localhost:{port_of(open_app.url)}"):
            host = {"Host": authority}
            refused = await browser.post(
                "/api/executions/x/park", headers={**host, "Origin": "http://attacker.example"}
            )
            assert refused.status_code == 403
            for headers in SAME_ORIGIN:
                sent = {**host, **{k: v.format(authority=authority) for k, v in headers.items()}}
                parked = await browser.post("/api/executions/x/park", headers=sent)
                assert parked.status_code == 200, (sent, parked.text)
                unparked = await browser.post(
                    "/console/executions/x/do/unpark",
                    data={"csrf_token": token.group(1)},
                    headers=sent,
                )
                assert unparked.status_code == 303, (sent, unparked.text)
                assert await status_of(open_app) == "active"


async def test_with_tokens_the_console_refuses_changes_from_another_origin(web: WebRig) -> None:
    await web.client.post("/api/executions", json={"chart": "card", "id": "t"})
    cross = {"Sec-Fetch-Site": "cross-site", "Origin": "http://attacker.example"}
    async with httpx.AsyncClient(base_url=web.url) as browser:
        login = await browser.get("/console/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', login.text)
        assert token is not None
        fields = {"csrf_token": token.group(1), "token": TOKEN}
        refused = await browser.post("/console/login", data=fields, headers=cross)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "cross_origin"
        logged_in = await browser.post("/console/login", data=fields)
        assert logged_in.status_code == 303
        forged = await browser.post(
            "/console/executions/t/do/cancel", data={"csrf_token": token.group(1)}, headers=cross
        )
        assert forged.status_code == 403
        assert forged.json()["error"]["code"] == "cross_origin"
        assert (await web.executions.get("t")).status == "active"
        # A bearer token and a BasicHTTP capability are never sent by a browser on its
        # own: their routes take any origin, and their own credential decides.
        parked = await web.client.post("/api/executions/t/park", headers=cross)
        assert parked.status_code == 200, parked.text
        nowhere = await browser.post("/basichttp/t/not-a-capability", headers=cross)
        assert nowhere.status_code == 404
        assert nowhere.json()["error"]["code"] == "location_not_found"
        # Any host name: an app with tokens is served wherever its operator says.
        named = await web.client.get("/api/executions/t", headers={"Host": "ops.example.org"})
        assert named.status_code == 200


async def test_the_checks_hold_under_a_base_path(web: WebRig) -> None:
    await web.client.post("/api/executions", json={"chart": "card", "id": "m"})
    for settings in (WebSettings(tokens=(TOKEN,)), WebSettings(open=True)):
        app = mounted(create_app(web.executions, settings), "/ops")
        async with serving(app) as url, httpx.AsyncClient(base_url=url) as browser:
            bearer = {"Authorization": f"Bearer {TOKEN}"} if settings.tokens else {}
            cross = {"Origin": "http://attacker.example"}
            console = await browser.post("/ops/console/executions/m/do/park", headers=cross)
            assert console.status_code == 403
            assert console.json()["error"]["code"] == "cross_origin"
            elsewhere = await browser.post("/ops/basichttp/m/not-a-capability", headers=cross)
            assert elsewhere.status_code == 404
            api = await browser.post("/ops/api/executions/m/park", headers={**cross, **bearer})
            assert api.status_code == (403 if settings.open else 200), api.text
    assert (await web.executions.get("m")).status == "needs_migration"


# -- a real browser ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def open_server(module_database_url: str) -> Iterator[ServerThread]:
    """An open app over the module's database, in a thread."""
    running = console_server(module_database_url, tokens=(), open=True).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def attacker(open_server: ServerThread) -> Iterator[ServerThread]:
    """Another site: one page whose form posts a cancel to the open app."""
    target = f"{open_server.url}/api/executions/victim/cancel"

    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(
            f'<form method="post" action="{target}"><button id="go">win a prize</button></form>'
        )

    async def build() -> ASGIApp:
        return Starlette(routes=[Route("/", page)])

    running = ServerThread(build).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A chromium that resolves ``ATTACKER`` to 127.0.0.1, as a rebound name would."""
    with chromium(f"--host-resolver-rules=MAP {ATTACKER} 127.0.0.1") as running:
        yield running


def test_a_real_browser_s_cross_site_form_and_rebound_name_are_refused(
    browser: Browser, open_server: ServerThread, attacker: ServerThread
) -> None:
    with httpx.Client(base_url=open_server.url, timeout=20) as api:
        assert api.post("/api/executions", json={"chart": "card", "id": "victim"}).is_success
        context = browser.new_context()
        page = context.new_page()
        try:
            page.goto(f"http://{ATTACKER}:{port_of(attacker.url)}/")
            page.click("#go")
            expect(page.locator("body")).to_contain_text("cross_origin")
            assert api.get("/api/executions/victim").json()["status"] == "active"

            rebound = page.goto(f"http://{ATTACKER}:{port_of(open_server.url)}/console/")
            assert rebound is not None
            assert rebound.status == 400
            expect(page.locator("body")).to_contain_text("host_not_allowed")

            # The operator's own console still changes things, from its own pages.
            page.goto(f"{open_server.url}/console/executions/victim")
            page.click("button[data-dialog=cancel-dialog]")
            page.locator("#cancel-dialog button[type=submit]").click()
            expect(page.locator(".flash-ok")).to_have_text("Cancelled: victim is cancelled.")
        finally:
            context.close()
