"""The console in a real headless chromium, against a real server, database and worker.

One browser, one server (in a thread) and one ``statifier-oban worker`` process for the
module; each test logs in with a fresh browser context. The tests start executions from
the page, watch one change live when its timer fires (no reload), send events, take the
confirmed actions, and check that markup put into an execution shows as text.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from web_support.browser import chromium
from web_support.charts import XSS, XSS_CHART
from web_support.rig import TOKEN, console_server
from web_support.server import ServerThread

LIVE_TIMEOUT_MS = 20_000
"""How long a page may take to show a change (a timer's firing goes through the worker)."""


@pytest.fixture(scope="module")
def server(module_database_url: str) -> Iterator[ServerThread]:
    """The app over the module's database, in a thread."""
    running = console_server(module_database_url).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def worker(module_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A plain ``statifier-oban worker`` firing the executions' timers."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with log.open("w") as out:
        process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
            [sys.executable, "-m", "statifier_oban.cli", "worker", "--database-url",
             module_database_url, "--queue", "timers=5"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        yield
        assert process.poll() is None, log.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """The module's headless chromium."""
    with chromium() as running:
        yield running


@pytest.fixture(scope="module")
def api(server: ServerThread) -> Iterator[httpx.Client]:
    """An API client with the token, for setting executions up."""
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
    ) as client:
        yield client


@pytest.fixture
def page(browser: Browser, server: ServerThread) -> Iterator[Page]:
    """A logged-in page in a fresh context; fails the test on any script error."""
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto("/console/")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Executions")
    try:
        yield page
        assert errors == []
    finally:
        context.close()


def start(api: httpx.Client, **body: Any) -> dict[str, Any]:
    """Start an execution through the API; its detail."""
    response = api.post("/api/executions", json={"chart": "card", **body})
    assert response.status_code == 201, response.text
    execution: dict[str, Any] = response.json()["execution"]
    return execution


def test_the_console_asks_for_a_token_first(browser: Browser, server: ServerThread) -> None:
    context = browser.new_context(base_url=server.url)
    page = context.new_page()
    try:
        page.goto("/console/executions/anything")
        assert "/console/login" in page.url
        page.fill("input[name=token]", "not-the-token-0123456789")
        page.click("button[type=submit]")
        expect(page.locator(".flash-error")).to_have_text("That token is not valid.")
        page.fill("input[name=token]", TOKEN)
        page.click("button[type=submit]")
        # Back where it was going: an execution that does not exist, as a typed page.
        expect(page.locator("h1")).to_have_text("404 · execution_not_found")
        stream = page.request.get(f"{server.url}/console/executions/anything/stream")
        assert stream.status == 404
        context.clear_cookies()
        refused = page.request.post(f"{server.url}/console/executions/x/do/cancel", form={})
        assert refused.status == 401
    finally:
        context.close()


def test_an_execution_started_from_the_page_changes_live_when_its_timer_fires(
    page: Page, worker: None
) -> None:
    page.click("text=Start an execution")
    dialog = page.locator("#start-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("select[name=chart]").select_option("card")
    dialog.locator("input[name=id]").fill("live-1")
    dialog.locator("textarea[name=datamodel]").fill('{"hold": "1500ms"}')
    dialog.locator("button[type=submit]").click()
    expect(page.locator(".flash-ok")).to_have_text("Started live-1.")
    expect(page.locator("#configuration")).to_have_text("authorized")
    expect(page.locator("table.timers")).to_contain_text("authorization.expired")
    expect(page.locator("#live-indicator")).to_have_class("live-indicator on")
    page.evaluate("window.stayed = true")
    expect(page.locator("#status")).to_have_text("completed", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#configuration")).to_have_text("none (the execution has ended)")
    expect(page.locator(".row-details")).to_contain_text('"expired"')
    expect(page.locator("#diagram")).to_be_visible()
    newest = page.locator("table.history tbody tr").first
    expect(newest).to_contain_text("fired")
    expect(newest).to_contain_text("authorization.expired")
    expect(newest).to_contain_text("timer (job ")
    assert page.evaluate("window.stayed") is True  # updated in place: no reload


def test_events_are_sent_from_the_page(page: Page, api: httpx.Client) -> None:
    start(api, id="send-1")
    page.goto("/console/executions/send-1")
    page.click("button[data-dialog=send-dialog]")
    dialog = page.locator("#send-dialog")
    dialog.locator("input[name=name]").fill("capture.requested")
    dialog.locator("button[type=submit]").click()
    expect(page.locator(".flash-ok")).to_have_text(
        "Sent capture.requested: now active in capturing."
    )
    expect(page.locator("#configuration")).to_have_text("capturing")
    sent = page.locator("table.history tbody tr").first
    expect(sent).to_contain_text("capture.requested")
    expect(sent).to_contain_text("operator")
    expect(sent).to_contain_text("web console send")
    expect(sent).to_contain_text("authorized → capturing")
    expect(sent).to_contain_text("cancelled hold")
    page.click("button[data-dialog=send-dialog]")
    dialog.locator("input[name=name]").fill("note")
    dialog.locator("textarea[name=data]").fill('{"amount": 12')
    dialog.locator("button[type=submit]").click()
    expect(page.locator(".flash-error")).to_contain_text("note was not sent: data is not JSON")
    page.click("button[data-dialog=send-dialog]")
    dialog.locator("input[name=name]").fill("note")
    dialog.locator("textarea[name=data]").fill('{"amount": 12}')
    dialog.locator("button[type=submit]").click()
    expect(page.locator(".datamodel")).to_contain_text('"amount": 12')
    detail = api.get("/api/executions/send-1").json()
    assert detail["datamodel"]["note"] == {"amount": 12}
    assert detail["step_count"] == 3


def test_actions_are_confirmed_and_need_the_csrf_token(page: Page, api: httpx.Client) -> None:
    start(api, id="act-1")
    page.goto("/console/executions/act-1")
    page.click("button[data-dialog=cancel-dialog]")
    dialog = page.locator("#cancel-dialog")
    expect(dialog).to_be_visible()
    dialog.locator("button[data-close]").click()
    expect(dialog).to_be_hidden()
    forged = page.request.post(f"{page.url}/do/cancel", form={"csrf_token": "forged"})
    assert forged.status == 403
    assert api.get("/api/executions/act-1").json()["status"] == "active"

    page.click("button[data-dialog=park-dialog]")
    page.locator("#park-dialog button[type=submit]").click()
    expect(page.locator(".flash-ok")).to_have_text("Parked: act-1 is needs_migration.")
    expect(page.locator("button[data-dialog=send-dialog]")).to_be_disabled()
    page.click("button[data-dialog=unpark-dialog]")
    page.locator("#unpark-dialog button[type=submit]").click()
    expect(page.locator(".flash-ok")).to_have_text("Unparked: act-1 is active.")
    page.click("button[data-dialog=cancel-dialog]")
    page.locator("#cancel-dialog button[type=submit]").click()
    expect(page.locator(".flash-ok")).to_have_text("Cancelled: act-1 is cancelled.")
    expect(page.locator("#status")).to_have_text("cancelled")
    assert api.get("/api/executions/act-1").json()["status"] == "cancelled"


DRAWING_SETTLED = """image => image.complete || new Promise(settled => {
    image.addEventListener("load", settled);
    image.addEventListener("error", settled);
})"""
"""A script that ends once an ``<img>`` has loaded or failed (at once if it has)."""


def test_markup_in_an_execution_is_shown_as_text(
    page: Page, api: httpx.Client, server: ServerThread
) -> None:
    execution_id = "<i>xss</i>"
    response = api.post(
        "/api/executions",
        json={
            "chart": XSS_CHART.name,
            "id": execution_id,
            "datamodel": {"payload": XSS},
            "metadata": {"who": XSS},
        },
    )
    assert response.status_code == 201, response.text
    sent = api.post("/api/executions/%3Ci%3Exss%3C/i%3E/events", json={"name": "<b>ev</b>"})
    assert sent.status_code == 200, sent.text
    page.goto(f"/console/?chart={XSS_CHART.name}")
    row = page.locator("table.executions tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td.id")).to_have_text(execution_id)
    expect(row).to_contain_text("<b>xss</b>")
    row.locator("td.id a").click()
    expect(page.locator("h1.id")).to_have_text(execution_id)
    expect(page.locator(".datamodel pre")).to_have_text(
        f'"{XSS.replace(chr(34), chr(92) + chr(34))}"'
    )
    expect(page.locator(".row-details")).to_contain_text("<script>")
    assert page.locator("main i, main b, main script, img[src=x]").count() == 0
    assert page.title() == f"{execution_id} · statifier console"  # not 'pwned'
    # The drawing is its own request (Graphviz renders it): wait until the browser is done
    # with it, loaded or failed, then require that it loaded. (Not ``wait_for_function``:
    # when its first try finds the drawing still loading it polls by evaluating a string in
    # the page, which the console's policy, rightly, refuses.)
    page.locator("#diagram").evaluate(DRAWING_SETTLED)
    assert page.evaluate("document.getElementById('diagram').naturalWidth") > 0
    drawing = page.request.get(page.locator("#diagram").get_attribute("src") or "")
    assert drawing.headers["content-type"] == "image/svg+xml"
    assert "sandbox" in drawing.headers["content-security-policy"]
    svg = drawing.text()
    assert "&lt;script&gt;" in svg
    assert "<script" not in svg


def _logged_in(browser: Browser, server: ServerThread) -> tuple[Page, list[str]]:
    """A page logged in to ``server`` in a context of its own, and the script errors it
    raises (a refused stream's console message is the browser's, not one of these)."""
    page = browser.new_context(base_url=server.url).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/console/")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Executions")
    return page, errors


def test_a_page_whose_stream_was_refused_listens_again_once_a_slot_is_free(
    browser: Browser, api: httpx.Client, module_database_url: str
) -> None:
    # A browser does not reconnect an EventSource whose answer was not 200 (here 503, too
    # many streams): the page stayed still until reloaded.
    start(api, id="slot-holder")
    start(api, id="slot-waiter")
    narrow = console_server(module_database_url, max_streams=1).start()
    holder, holder_errors = _logged_in(browser, narrow)
    waiter, waiter_errors = _logged_in(browser, narrow)
    try:
        holder.goto("/console/executions/slot-holder")
        expect(holder.locator("#live-indicator")).to_have_class("live-indicator on")
        with waiter.expect_response(lambda r: r.url.endswith("/stream") and r.status == 503):
            waiter.goto("/console/executions/slot-waiter")
        expect(waiter.locator("#live-indicator")).to_have_class("live-indicator")
        holder.context.close()  # its stream ends and gives its slot back
        expect(waiter.locator("#live-indicator")).to_have_class(
            "live-indicator on", timeout=LIVE_TIMEOUT_MS
        )
        sent = api.post("/api/executions/slot-waiter/events", json={"name": "capture.requested"})
        assert sent.status_code == 200, sent.text
        expect(waiter.locator("#configuration")).to_have_text("capturing")
        assert holder_errors == waiter_errors == []
    finally:
        waiter.context.close()
        narrow.stop()
