"""The HTTP API and the web console, mounted in an ASGI app of your own.

Run from the repository root::

    uv run python examples/web_console.py

It starts a throwaway PostgreSQL (or uses ``--database-url URL``), registers the
card-authorization chart, starts two executions, and serves your app on
http://127.0.0.1:8000 with the console under ``/ops``: open the URL it prints and log in
with the token it prints. This process also runs the timers queue, so card B's hold
(a minute here) fires while you watch. Ctrl-C stops it. ``--check`` instead calls the API
once over HTTP, prints what it answered and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import statifier
import uvicorn
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config, use
from statifier_oban.schema import install
from statifier_persistence import Executions
from statifier_web import WebSettings, create_app

SOURCE = Path(__file__).with_name("card_authorization.scxml").read_text()
machine = statifier.compile(SOURCE.replace('delay="7d"', 'delay="1min"'), name="card")


async def home(request: Request) -> PlainTextResponse:
    """Your own app's page."""
    return PlainTextResponse("my service; the statifier console is at /ops/console/\n")


def my_app(executions: Executions, token: str) -> Starlette:
    """Your ASGI app, with statifier's API and console mounted under /ops."""
    statifier_app = create_app(executions, WebSettings(tokens=(token,)))
    return Starlette(routes=[Route("/", home), Mount("/ops", statifier_app)])


@contextlib.asynccontextmanager
async def executions_on(url: str) -> AsyncIterator[Executions]:
    """Executions on ``url`` whose timers this process runs (two cards started)."""
    await install(url)
    async with AsyncConnectionPool(url, open=False) as pool:
        oban = Oban(pool=pool, queues={"timers": 10})
        executions = Executions(
            pool, executor=ObanExecutor(execution_config(oban, timers_queue="timers"))
        )
        use(executions)
        await oban.start()
        try:
            for card in ("card_a", "card_b"):
                await executions.create(machine, execution_id=card, metadata={"demo": True})
            await executions.step("card_a", statifier.Event(name="capture.requested"))
            yield executions
        finally:
            use(None)
            await oban.stop()


async def serve(url: str, port: int, check: bool) -> None:
    """Serve the app on loopback (``check``: call the API once, then stop)."""
    token = secrets.token_urlsafe(32)
    async with executions_on(url) as executions:
        server = uvicorn.Server(
            uvicorn.Config(
                my_app(executions, token), host="127.0.0.1", port=port, log_level="warning"
            )
        )
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        host, bound = server.servers[0].sockets[0].getsockname()[:2]
        base = f"http://{host}:{bound}"
        if not check:
            print(f"console: {base}/ops/console/  token: {token}", flush=True)
            await task
            return
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, headers=headers) as client:
            card = (await client.get("/ops/api/executions/card_b")).json()
            print("card_b is", card["status"], "in", card["active_states"])
            print("its hold fires", card["timers"][0]["event"])
            counts = (await client.get("/ops/api/counts")).json()
            print("executions:", counts["total"])
        server.should_exit = True
        await task


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; ``--database-url`` uses your server, else a throwaway one."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--check", action="store_true", help="call the API once and exit")
    args = parser.parse_args(argv)
    port = 0 if args.check else args.port
    with contextlib.suppress(KeyboardInterrupt):
        if args.database_url is not None:
            asyncio.run(serve(args.database_url, port, args.check))
        else:
            with EmbeddedPostgres.start() as embedded:
                asyncio.run(serve(embedded.url, port, args.check))
    return 0


if __name__ == "__main__":
    sys.exit(main())
