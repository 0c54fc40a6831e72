"""``WebRig``: the app served on loopback over a database, with what a test needs."""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from starlette.types import ASGIApp
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions
from statifier_web import ChangeFeed, WebSettings, create_app

from web_support.charts import CARD, XSS_CHART
from web_support.server import ServerThread, serving

TOKEN = "test-token-0123456789abcdef"  # noqa: S105 - a test token
"""The bearer token of the apps the tests serve."""

OTHER_TOKEN = "other-token-0123456789abcdef"  # noqa: S105 - a test token
"""A second configured token."""


@dataclasses.dataclass
class WebRig:
    """A served app: its ``url``, the ``executions`` it serves (timers on queue
    ``timers``; ``CARD`` registered) and ``client``, an HTTP client with the token."""

    url: str
    executions: Executions
    client: httpx.AsyncClient
    oban: Oban


def executions_on(pool: AsyncConnectionPool, oban: Oban) -> Executions:
    """``Executions`` whose timers go to the ``timers`` queue, through ``oban``."""
    return Executions(pool, executor=ObanExecutor(execution_config(oban, timers_queue="timers")))


@contextlib.asynccontextmanager
async def web_rig(
    pool: AsyncConnectionPool,
    feed: Callable[[Executions], ChangeFeed] | None = None,
    **settings: Any,
) -> AsyncIterator[WebRig]:
    """Serve an app over ``pool`` with ``TOKEN`` and ``OTHER_TOKEN`` (or ``settings``);
    ``feed`` makes its change feed (default: the app's)."""
    oban = Oban(pool=pool, name=f"web_{uuid.uuid4().hex[:12]}")  # a client: never started
    executions = executions_on(pool, oban)
    await executions.register(CARD)
    options: dict[str, Any] = {"tokens": (TOKEN, OTHER_TOKEN), **settings}
    app = create_app(
        executions, WebSettings(**options), feed=feed(executions) if feed is not None else None
    )
    async with (
        serving(app) as url,
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=20
        ) as client,
    ):
        yield WebRig(url, executions, client, oban)


def console_server(database_url: str, **settings: Any) -> ServerThread:
    """The app over ``database_url`` (CARD and XSS_CHART registered, ``TOKEN``, live
    streams polling every 0.1 s) served in a thread of its own; not started yet."""
    state: dict[str, Any] = {}

    async def build() -> ASGIApp:
        pool = AsyncConnectionPool(database_url, open=False, min_size=1, max_size=8)
        await pool.open(wait=True)
        state["pool"] = pool
        oban = Oban(pool=pool, name=f"console_{uuid.uuid4().hex[:12]}")
        executions = executions_on(pool, oban)
        for chart in (CARD, XSS_CHART):
            await executions.register(chart)
        options: dict[str, Any] = {"tokens": (TOKEN,), "poll_interval_s": 0.1, **settings}
        return create_app(executions, WebSettings(**options))

    async def close() -> None:
        if "pool" in state:
            await state["pool"].close()

    return ServerThread(build, close)
