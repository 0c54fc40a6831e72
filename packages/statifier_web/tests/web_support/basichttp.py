"""``basichttp_rig``: the app serving BasicHTTP locations of its own address, over
executions whose POST jobs (and timers) a server-mode Oban in this process runs.

The socket is bound first, so the locations' base URL is the address the app then serves
on; the executions' allow-list lets them reach loopback (that address), as the W3C tests of
the processor need, and nothing else unless a test says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.basichttp import Locations, OutboundPolicy
from statifier_oban import executions as execution_jobs
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions
from statifier_web import WebSettings, create_app

from web_support.rig import TOKEN
from web_support.server import base_url, loopback_socket, serving

KEY = b"basichttp-test-key-0123456789"
"""The key of the rig's locations."""

LOOPBACK = OutboundPolicy(hosts=("127.0.0.1",), networks=("127.0.0.0/8",), ports=None)
"""An allow-list that lets charts POST to loopback (to the app itself)."""


@dataclasses.dataclass
class BasicHTTPRig:
    """A served app (``url``), its ``executions`` (locations under ``url``), the
    ``locations``, and ``client``: an HTTP client with no token (a location needs none)."""

    url: str
    executions: Executions
    locations: Locations
    client: httpx.AsyncClient
    oban: Oban


@contextlib.asynccontextmanager
async def basichttp_rig(
    pool: AsyncConnectionPool,
    *,
    policy: OutboundPolicy = LOOPBACK,
    **settings: Any,
) -> AsyncIterator[BasicHTTPRig]:
    """Serve the app over ``pool`` with BasicHTTP locations under its own address; a
    server-mode Oban runs queues ``timers`` and ``invokes`` (the POST jobs) meanwhile."""
    sock = loopback_socket()
    url = base_url(sock)
    locations = Locations(url, KEY)
    name = f"basichttp_{uuid.uuid4().hex[:12]}"
    oban = Oban(
        pool=pool,
        name=name,
        node=f"{name}.node",
        queues={"timers": 10, "invokes": 10},
        stager={"interval": 0.1},
        shutdown_grace_period=1.0,
    )
    config = execution_config(oban, timers_queue="timers", invoke_queue="invokes")
    executor = ObanExecutor(config, basichttp=policy)
    executions = Executions(pool, executor=executor, basichttp=locations)
    execution_jobs.use(executions)
    app = create_app(executions, WebSettings(tokens=(TOKEN,), **settings))
    await oban.start()
    try:
        async with serving(app, sock), httpx.AsyncClient(base_url=url, timeout=20) as client:
            yield BasicHTTPRig(url, executions, locations, client, oban)
    finally:
        await oban.stop()
        execution_jobs.use(None)
        await executor.close()
