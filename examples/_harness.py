"""What every example shares: a database, a running Oban, the host's config, and a story.

Not part of the package. The pieces a real host has too are marked as such:

* ``statifier_oban_config()`` is the host's one place for its ``Config``, the function
  every handler's ``config()`` returns (``MyApp.statifier_oban_config()`` in the docs);
* ``running_host`` owns the host's Oban instance (statifier_oban never starts one).

Everything else makes the examples runnable and self-checking: each example prints a
short story, checks its own outcome with ``Story.check`` and exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import statifier_oban.workers  # noqa: F401  (registers the timer and invoke workers)
from oban import Oban
from oban import telemetry as oban_telemetry
from psycopg_pool import AsyncConnectionPool
from statifier.runtime.session import Session
from statifier_oban import Config
from statifier_oban import telemetry as events
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.schema import install
from statifier_oban.workers import CHILD_START_WORKER, INVOKE_WORKER, TIMER_WORKER

WORKER_NAMES = {
    TIMER_WORKER: "TimerWorker",
    INVOKE_WORKER: "InvokeWorker",
    CHILD_START_WORKER: "ChildStartWorker",
}

HOST_QUEUES: dict[str, int | dict[str, Any]] = {"invokes": 5, "timers": 5}
"""The queues the host runs: invocation jobs and fired timers, five at a time each."""

_config: Config | None = None


def statifier_oban_config() -> Config:
    """The host's ``Config``: what every handler's ``config()`` answers."""
    if _config is None:
        raise RuntimeError("no host is running (see running_host)")
    return _config


# --- the command line -------------------------------------------------------------------------


def parse_args(description: str, argv: Sequence[str] | None) -> argparse.Namespace:
    """``--database-url CONNINFO`` (optional: else an embedded server of the example's own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--database-url",
        help="a PostgreSQL database to use (the schema is installed if missing); "
        "default: start an embedded server in a temporary data directory",
    )
    return parser.parse_args(argv)


# --- the story ----------------------------------------------------------------------------------


class Story:
    """Prints what happens, with the time since the story began, and keeps the checks."""

    def __init__(self, title: str) -> None:
        self.started = time.monotonic()
        self.failures: list[str] = []
        print(title)

    def begin(self, text: str) -> None:
        """Say ``text`` and start the clock again (once the host is up)."""
        self.started = time.monotonic()
        print(f"  {text}")

    def say(self, text: str) -> None:
        """One line of the story."""
        print(f"  {time.monotonic() - self.started:6.2f}s  {text}")

    def part(self, title: str) -> None:
        """A heading inside the story."""
        print(f"\n{title}")

    def check(self, ok: bool, what: str) -> bool:
        """Record (and print) one verified fact of the outcome."""
        print(f"  {'ok  ' if ok else 'FAIL'}     {what}")
        if not ok:
            self.failures.append(what)
        return ok

    def verdict(self) -> int:
        """Print the summary line; the exit code (0: every check held)."""
        if self.failures:
            print(f"\nFAILED: {len(self.failures)} check(s) did not hold")
            return 1
        print("\nverified: every check held")
        return 0


def run_story(story: Callable[[Story], Coroutine[Any, Any, None]], title: str) -> int:
    """Run an example's story under ``asyncio.run``; an exception is a failure (exit 1)."""
    told = Story(title)
    try:
        asyncio.run(story(told))
    except Exception:
        traceback.print_exc()
        told.failures.append("the example raised")
    return told.verdict()


@contextmanager
def narrate(story: Story, *names: str) -> Iterator[list[tuple[str, dict[str, Any]]]]:
    """Tell the telemetry events ``names`` (short names, e.g. ``"invoke.failed"``) as they
    happen; yields the list of every statifier_oban event seen, as ``(short name, meta)``."""
    seen: list[tuple[str, dict[str, Any]]] = []
    handler_id = f"example-{id(story)}-{len(names)}"
    shown = ("send_id", "invoke_id", "delay_ms", "count", "attempt", "attempts", "reason")

    def tell(name: str, meta: dict[str, Any]) -> None:
        short = name.removeprefix(events.PREFIX + ".")
        seen.append((short, dict(meta)))
        if short in names:
            facts = " ".join(f"{key}={meta[key]!r}" for key in shown if key in meta)
            story.say(f"[telemetry] {short} {facts}")

    oban_telemetry.attach(handler_id, events.events(), tell)
    try:
        yield seen
    finally:
        oban_telemetry.detach(handler_id)


# --- the host -----------------------------------------------------------------------------------


@dataclass
class Host:
    """The running host: its database, its Oban instance and its config."""

    url: str
    pool: AsyncConnectionPool
    oban: Oban
    config: Config

    async def jobs(self, scope: str) -> list[JobRow]:
        """The scope's job rows (timers and invocations), oldest first."""
        async with self.pool.connection() as conn:
            cursor = await conn.execute(
                "SELECT id, worker, state::text, attempt, max_attempts, queue, args->>'send_id', "
                "args->>'invoke_id' FROM oban_jobs WHERE args->>'scope' = %s ORDER BY id",
                [scope],
            )
            rows = await cursor.fetchall()
        return [JobRow(*row) for row in rows]

    async def settled_jobs(self, scope: str, timeout: float = 5.0) -> list[JobRow]:
        """The scope's job rows once none is ``available`` or ``executing`` any more.

        A job delivers its answer *before* oban records how the job ended, so a chart can
        move on while its job row still says ``executing``: wait for the row too.
        """
        rows: list[JobRow] = []

        async def settled() -> bool:
            rows[:] = await self.jobs(scope)
            return all(row.state not in ("available", "executing") for row in rows)

        await wait_for(settled, timeout)
        return rows


@dataclass(frozen=True)
class JobRow:
    """One ``oban_jobs`` row, as an operator would look at it."""

    id: int
    worker: str
    state: str
    attempt: int
    max_attempts: int
    queue: str
    send_id: str | None
    invoke_id: str | None

    @property
    def kind(self) -> str:
        """The worker's short name (``InvokeWorker``, ``TimerWorker``...) or its full name."""
        return WORKER_NAMES.get(self.worker, self.worker)

    def __str__(self) -> str:
        kind = self.kind
        what = f"send_id={self.send_id}" if self.send_id else f"invoke_id={self.invoke_id}"
        return (
            f"job {self.id} {kind} {what} queue={self.queue} state={self.state} "
            f"attempt={self.attempt}/{self.max_attempts}"
        )


@asynccontextmanager
async def database(database_url: str | None) -> AsyncIterator[str]:
    """The given database, or an embedded server's (started here, stopped at exit)."""
    if database_url is not None:
        yield database_url
        return
    server = await asyncio.to_thread(EmbeddedPostgres.start)
    try:
        yield server.url
    finally:
        await asyncio.to_thread(server.stop)


@asynccontextmanager
async def running_host(
    database_url: str | None, name: str, told: Story, **config: Any
) -> AsyncIterator[Host]:
    """Install the schema, start the host's Oban (``HOST_QUEUES``), publish its config.

    The config names ``timers`` and ``invokes`` as the host's queues; ``config`` adds
    options (``Config(...)`` keywords). The story's clock starts once all of it is up.
    """
    global _config
    async with database(database_url) as url:
        await install(url)  # idempotent: oban's tables plus statifier_oban's indexes
        pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=10)
        await pool.open(wait=True)
        try:
            oban = Oban(pool=pool, name=name, queues=HOST_QUEUES, shutdown_grace_period=1.0)
            async with oban:
                options: dict[str, Any] = {"timers_queue": "timers", "invoke_queue": "invokes"}
                _config = Config(oban=oban, **{**options, **config})
                where = "the given database" if database_url else "an embedded PostgreSQL"
                told.begin(f"host up: Oban {name!r} running {sorted(HOST_QUEUES)} on {where}")
                try:
                    yield Host(url, pool, oban, _config)
                finally:
                    _config = None
        finally:
            await pool.close()


@asynccontextmanager
async def running_release(url: str, queue: str, name: str) -> AsyncIterator[Oban]:
    """Another release's Oban instance on the same database, running a queue of its own."""
    pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=5)
    await pool.open(wait=True)
    try:
        queues: dict[str, int | dict[str, Any]] = {queue: 5}
        async with Oban(pool=pool, name=name, queues=queues, shutdown_grace_period=1.0) as oban:
            yield oban
    finally:
        await pool.close()


# --- waiting ------------------------------------------------------------------------------------


async def wait_for(
    condition: Callable[[], bool | Awaitable[bool]], timeout: float = 5.0, interval: float = 0.02
) -> bool:
    """Poll ``condition`` (plain or async) until it holds (True) or ``timeout`` passes (False)."""
    deadline = time.monotonic() + timeout
    while True:
        held = condition()
        if not isinstance(held, bool):
            held = await held
        if held:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)


async def wait_for_state(session: Session, state_id: str, timeout: float = 5.0) -> bool:
    """Wait until ``state_id`` is active in the session's configuration."""
    return await wait_for(lambda: state_id in session.status().configuration, timeout)
