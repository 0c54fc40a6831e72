"""``statifier-oban demo --web``: once the demo ends, its executions in the web console.

The console (``statifier_web``, the extra ``statifier-demo[web]``) serves the demo's
database on loopback with a fresh token, printed with the URL, until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import secrets

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.cli import kit
from statifier.errors import install_hint
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions

from ._timeline import Timeline

WEB_MODULE = "statifier_web"
"""The web console's import package, imported only by ``--web``."""


def check_web() -> None:
    """``CommandError`` saying what to install when the web console is not installed."""
    try:
        importlib.import_module(WEB_MODULE)
    except ImportError:
        hint = install_hint("statifier-demo", "web")
        raise kit.CommandError(f"--web needs the web console: {hint}") from None


def serve_console(url: str, timeline: Timeline) -> None:
    """Serve the console over the demo's database at ``url`` until stopped."""
    web = importlib.import_module(WEB_MODULE)
    token = secrets.token_urlsafe(32)

    def ready(site: str) -> None:
        timeline.note("web", f"the console at {site}/console/ (token {token}); Ctrl-C stops it")

    async def run() -> None:
        async with AsyncConnectionPool(url, open=False, min_size=1, max_size=10) as pool:
            oban = Oban(pool=pool, name=f"statifier-demo-web-{os.getpid()}")
            config = execution_config(oban, timers_queue="timers")
            executions = Executions(pool, executor=ObanExecutor(config))
            app = web.create_app(executions, web.WebSettings(tokens=(token,)))
            await web.serve(app, port=0, on_ready=ready)

    asyncio.run(run())
    timeline.note("web", "the console stopped")
