"""A first durable execution: the chart's position lives in PostgreSQL, not in a process.

Run from the repository root::

    uv run python examples/durable_execution.py

Two card authorizations are created as executions of the card-authorization chart, its
seven-day hold unchanged. Card A is captured by a request that arrives twice: the step key
applies it once. Card B's hold is a job; this process runs the timers queue, so it is also
the worker that fires the hold and steps card B (lock, drive, store: one transaction).
Any process running the queue would do, such as a plain ``statifier-oban worker``. The
week passes on the test clock of ``statifier_oban.testing``, which moves the job's due
time; the queue fires it as it would a week later. It starts a throwaway PostgreSQL of its
own and removes it at the end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import statifier
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config, use
from statifier_oban.schema import install
from statifier_oban.testing import Clock
from statifier_persistence import Executions

machine = statifier.compile(Path(__file__).with_name("card_authorization.scxml").read_text())


async def main(url: str) -> None:
    """The story, on the PostgreSQL database at ``url``."""
    await install(url)  # oban's tables, our indexes and the execution tables
    async with AsyncConnectionPool(url, open=False) as pool:
        oban = Oban(pool=pool, queues={"timers": 10})  # this process runs the queue too
        config = execution_config(oban, timers_queue="timers")
        executions = Executions(pool, executor=ObanExecutor(config))
        use(executions)  # the timer jobs this process runs step these executions
        await oban.start()

        await executions.create(machine, execution_id="card_a", metadata={"customer": "c1"})
        await executions.create(machine, execution_id="card_b", metadata={"customer": "c2"})
        capture = statifier.Event(name="capture.requested")
        first = await executions.step("card_a", capture, key="req-88")
        again = await executions.step("card_a", capture, key="req-88")  # a retried request
        print(type(first).__name__, type(again).__name__)  # Stepped AlreadyApplied

        await Clock(oban, ["timers"]).advance("7d")  # a week passes (a test clock)
        while (await executions.get("card_b")).status == "active":
            await asyncio.sleep(0.1)  # the queue fires card_b's hold: one step
        for execution in (await executions.list()).executions:
            print(execution.id, execution.status)  # card_a active, card_b completed
        await oban.stop()


if __name__ == "__main__":
    server = EmbeddedPostgres.start()  # a throwaway PostgreSQL; or the URL of your own
    try:
        asyncio.run(main(server.url))
    finally:
        server.stop()
