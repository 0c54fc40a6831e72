"""A first durable timer: a card's hold outlives the session that armed it.

Run from the repository root::

    uv run python examples/durable_timer.py

The card-authorization chart arms a seven-day hold when a card is authorized. With
``DurableTimers`` the hold is a job row in PostgreSQL, not an event-loop timer: the
session stops (as a process does in a deploy), the position it stored is resumed, and the
job fires into the resumed session, which expires the card. The chart is the production
chart, seven days and all: the test clock of ``statifier_oban.testing`` moves the job's
due time a week earlier, and this process's queue fires it as it would a week later. It
starts a throwaway PostgreSQL of its own (``statifier_oban.embedded``) and removes it at
the end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import statifier
import statifier_oban  # import it before building an Oban: timers then fire within ms
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier.core.position import dumps
from statifier.runtime.session import Session
from statifier_oban import Config, DurableTimers
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import install
from statifier_oban.testing import Clock

machine = statifier.compile(Path(__file__).with_name("card_authorization.scxml").read_text())

positions: dict[str, bytes] = {}  # your store: a table, a key-value store...


async def save(session: Session) -> None:  # after every step: keep the position
    positions[session.session_id] = dumps(session.snapshot())


async def main(url: str) -> None:
    """The story, on the PostgreSQL database at ``url``."""
    await install(url)  # what `statifier-oban install` does: oban's tables and our indexes
    async with AsyncConnectionPool(url, open=False) as pool:
        oban = Oban(pool=pool, queues={"timers": 10})
        await oban.start()
        config = Config(oban=oban, timers_queue="timers")

        session = await Session.start(
            machine, session_id="card_1", delayed_sends=DurableTimers(config), on_step=save
        )
        print(await statifier_oban.pending_for(config, ["card_1"]))  # {'card_1': 1}
        await session.stop()  # the process goes away (a deploy): the hold's job row stays

        # after a restart, in any process: resume first, then run the queue
        blob = positions["card_1"]
        session = await Session.start(machine, resume=blob, delayed_sends=DurableTimers(config))
        await Clock(oban, ["timers"]).advance("7d")  # a week passes (a test clock)
        await session.wait_halted()  # the queue fires the hold's job into the session
        print(session.status().configuration)  # ('expired',)
        await session.stop()  # a halted session stays registered until its owner stops it
        await oban.stop()


if __name__ == "__main__":
    server = EmbeddedPostgres.start()  # a throwaway PostgreSQL; or the URL of your own
    try:
        asyncio.run(main(server.url))
    finally:
        server.stop()
