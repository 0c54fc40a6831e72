"""Helpers of the tests that run ``statifier-oban`` in-process on the package's database."""

from __future__ import annotations

import asyncio

from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.cli import _main as cli
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_persistence import Executions


async def executions_on(pool: AsyncConnectionPool, oban_client: Oban) -> Executions:
    """``Executions`` whose timers go to the ``timers`` queue (a command's default)."""
    config = execution_config(oban_client, timers_queue="timers")
    return Executions(pool, executor=ObanExecutor(config))


async def run_cli(*argv: str) -> int:
    """``statifier-oban ARGV`` in a thread (it runs its own event loop)."""
    return await asyncio.to_thread(cli.main, list(argv))
