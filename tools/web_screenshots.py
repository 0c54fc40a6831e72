"""Capture the console's screenshots in ``docs/img/`` from the real pages.

Run from the repository root (needs Debian's chromium and Graphviz)::

    uv run python -m tools.web_screenshots

It starts a throwaway PostgreSQL, registers the card-authorization and subscription
charts, starts a few executions in every status, serves the app on loopback and has
headless chromium log in and photograph the list and an execution.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import statifier
import uvicorn
from oban import Oban
from playwright.async_api import async_playwright
from psycopg_pool import AsyncConnectionPool
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_oban.schema import install
from statifier_persistence import Executions
from statifier_web import WebSettings, create_app

from tools.chromium import CHROMIUM, FLAGS

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "img"


async def populate(executions: Executions) -> None:
    """A few executions of two charts, in every status."""
    card = statifier.compile((ROOT / "examples" / "card_authorization.scxml").read_bytes())
    subscription = statifier.compile((ROOT / "examples" / "subscription.scxml").read_bytes())
    capture = statifier.Event(name="capture.requested")
    for n, customer in enumerate(("acme", "globex", "initech", "umbrella", "hooli")):
        execution_id = f"card_{n + 1:04d}"
        await executions.create(card, execution_id=execution_id, metadata={"customer": customer})
        if n in (1, 3):
            await executions.step(execution_id, capture)
        if n == 3:
            await executions.step(execution_id, statifier.Event(name="capture.succeeded"))
        if n == 4:
            await executions.cancel(execution_id)
    for n in range(3):
        execution_id = f"sub_{n + 1:04d}"
        await executions.create(subscription, execution_id=execution_id)
        await executions.step(execution_id, statifier.Event(name="trial.ended"))
    await executions.step("sub_0001", statifier.Event(name="quota.exceeded"))
    await executions.step("sub_0001", statifier.Event(name="renewal.due"))
    await executions.step("sub_0001", statifier.Event(name="charge.failed"))
    await executions.park("sub_0003")


async def photograph(url: str, token: str) -> None:
    """Log in and capture the list and one execution."""
    IMAGES.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(FLAGS))
        page = await browser.new_page(viewport={"width": 1280, "height": 760})
        await page.goto(f"{url}/console/")
        await page.fill("input[name=token]", token)
        await page.click("button[type=submit]")
        await page.wait_for_selector("table.executions")
        await page.screenshot(path=str(IMAGES / "console-executions.png"), full_page=True)
        await page.goto(f"{url}/console/executions/sub_0001")
        await page.wait_for_function("document.getElementById('diagram').naturalWidth > 0")
        await page.screenshot(path=str(IMAGES / "console-execution.png"), full_page=True)
        await page.click("button[data-dialog=send-dialog]")
        await page.fill("#send-dialog input[name=name]", "charge.succeeded")
        await page.fill("#send-dialog textarea[name=data]", '{"amount": 1200}')
        await page.screenshot(path=str(IMAGES / "console-send.png"))
        await browser.close()


async def run(database_url: str) -> None:
    """Populate the database, serve the app, take the pictures."""
    await install(database_url)
    async with AsyncConnectionPool(database_url, open=False) as pool:
        oban = Oban(pool=pool, name="screenshots")
        executions = Executions(
            pool, executor=ObanExecutor(execution_config(oban, timers_queue="timers"))
        )
        await populate(executions)
        token = secrets.token_urlsafe(32)
        app = create_app(executions, WebSettings(tokens=(token,)))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        try:
            await photograph(f"http://{host}:{port}", token)
        finally:
            server.should_exit = True
            await task


def main() -> None:
    """Capture the screenshots into ``docs/img``."""
    with EmbeddedPostgres.start() as embedded:
        asyncio.run(run(embedded.url))
    for image in sorted(IMAGES.glob("console-*.png")):
        print(image.relative_to(ROOT))


if __name__ == "__main__":
    main()
