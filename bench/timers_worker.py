"""Worker process for ``bench/timers.py``: one server-mode Oban running the timers queue.

Started by ``bench/timers.py`` (not meant to be run by hand)::

    python bench/timers_worker.py --url CONNINFO --node w1 --mode ours|today|stock \\
        [--limit 20] [--recorder memory|insert] [--recorders 10]

It imports ``statifier_oban``, which installs the prompt stager, the batched acks and the
lean fetch (``statifier_oban.latency``). The modes:

* ``ours``: that default configuration, no stager options;
* ``today``: main before issue 12: ``latency.uninstall()``, then ``timers_today.install()``
  (the old 0.1 s polling stager; oban's own fetch and acks);
* ``stock``: ``latency.uninstall()`` only: oban alone, its Stager polling every second.

Each fired timer is delivered to :class:`RecordFire` (import path
``timers_worker:RecordFire``, named on the job rows by the benchmark's ``Config``), which
records ``(scope, ordinal, node, fire time on the database clock)`` in ``bench_fires``:

* ``--recorder memory`` (default): in a list, on the database clock (the process measures
  the offset between its clock and the database's at start, from the fastest of 20
  ``SELECT clock_timestamp()`` round trips), written by a background task every 50 ms
  with one multi-row ``INSERT``: a delivery that costs no round trip, like the default
  ``SessionDelivery`` handing the event to a live session in the process;
* ``--recorder insert``: one autocommit ``INSERT`` per fire (a delivery with one round
  trip; the benchmark before issue 12 did this).

The process prints one line ``ready <stager class> <interval>`` once Oban has started,
and stops Oban gracefully when its stdin is closed (after a last flush of the records).

With ``STATIFIER_BENCH_WORKER_PROFILE=DIR`` in the environment (it is inherited from
``bench/timers.py``), the whole process runs under ``cProfile`` and writes
``DIR/<node>.prof`` when it stops (read it with ``python -m pstats``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool

PROFILE_ENV = "STATIFIER_BENCH_WORKER_PROFILE"
"""Environment variable naming a directory: profile the process, dump ``<node>.prof``."""

DELIVERY_PATH = "timers_worker:RecordFire"
"""How the benchmark's job rows name :class:`RecordFire`."""

RECORD_SQL = "INSERT INTO bench_fires (scope, ordinal, node) VALUES (%s, %s, %s)"
"""One fire; ``fired_at`` defaults to ``timezone('UTC', clock_timestamp())``."""

FLUSH_SQL = """
INSERT INTO bench_fires (scope, ordinal, node, fired_at)
SELECT s, o, %(node)s, to_timestamp(t) AT TIME ZONE 'UTC'
FROM unnest(%(scopes)s::text[], %(ordinals)s::int[], %(times)s::float8[]) AS r(s, o, t)
"""
"""Fires recorded in memory, written in one statement (``t``: database epoch seconds)."""

FLUSH_EVERY_S = 0.05

_recorder: AsyncConnectionPool | None = None
"""The pool :class:`RecordFire` writes through (set by :func:`run`)."""

_node = "?"
"""This process's node label, recorded with every fire."""

_in_memory = True
"""Record in memory and flush in batches (``--recorder memory``)."""

_offset = 0.0
"""Database epoch seconds minus ``time.perf_counter()``."""

_fires: list[tuple[str, int, float]] = []
"""Fires not yet written: ``(scope, ordinal, database epoch seconds)``."""


class RecordFire:
    """A trivial timer delivery: record the fire time (database clock) and say delivered."""

    async def deliver(self, scope: str, effect: Any) -> Any:
        """Record ``(scope, effect.ordinal)`` with the fire time (see the module docstring)."""
        from statifier_oban import Delivered

        if _in_memory:
            _fires.append((scope, effect.ordinal, time.perf_counter() + _offset))
            return Delivered()
        if _recorder is None:
            raise RuntimeError("timers_worker: the recorder pool is not open")
        async with _recorder.connection() as conn:
            await conn.execute(RECORD_SQL, (scope, effect.ordinal, _node))
        return Delivered()


async def measure_offset(pool: AsyncConnectionPool) -> float:
    """Database epoch seconds minus ``perf_counter``, from the fastest of 20 round trips."""
    best: tuple[float, float] | None = None
    async with pool.connection() as conn:
        for _ in range(20):
            sent = time.perf_counter()
            cursor = await conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
            row = await cursor.fetchone()
            received = time.perf_counter()
            if row is None:
                raise RuntimeError("SELECT clock_timestamp() returned no row")
            if best is None or received - sent < best[0]:
                best = (received - sent, float(row[0]) - (sent + received) / 2)
    if best is None:
        raise RuntimeError("no clock offset measured")
    return best[1]


async def flush(pool: AsyncConnectionPool) -> None:
    """Write the fires recorded so far in one statement."""
    global _fires
    if not _fires:
        return
    batch, _fires = _fires, []
    async with pool.connection() as conn:
        await conn.execute(
            FLUSH_SQL,
            {
                "node": _node,
                "scopes": [f[0] for f in batch],
                "ordinals": [f[1] for f in batch],
                "times": [f[2] for f in batch],
            },
        )


async def flush_until(pool: AsyncConnectionPool, stop: asyncio.Event) -> None:
    """Flush every ``FLUSH_EVERY_S`` until ``stop`` is set, then once more."""
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=FLUSH_EVERY_S)
        await flush(pool)


async def _stdin_closed() -> None:
    """Return once the parent closes our stdin (or exits)."""
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


async def run(url: str, node: str, mode: str, limit: int, recorder: str, recorders: int) -> None:
    """Start Oban on the ``timers`` queue, report readiness, run until stdin closes."""
    global _recorder, _node, _in_memory, _offset
    # The delivery path names this module "timers_worker"; as a script it is __main__.
    sys.modules.setdefault("timers_worker", sys.modules[__name__])
    import statifier_oban

    statifier_oban.register_plugin(RecordFire, path=DELIVERY_PATH)  # rows may name it
    import statifier_oban.workers  # registers TimerWorker
    from oban import Oban
    from statifier_oban.store import _oban_compat

    if not statifier_oban.latency.installed():
        raise RuntimeError("importing statifier_oban did not install prompt staging")
    if mode in ("today", "stock"):
        statifier_oban.latency.uninstall()
    if mode == "today":
        import timers_today  # beside this script, first on the path of a script run by path

        timers_today.install()

    _node = node
    _in_memory = recorder == "memory"
    _recorder = AsyncConnectionPool(
        url,
        min_size=1 if _in_memory else recorders,
        max_size=1 if _in_memory else recorders,
        open=False,
        kwargs={"autocommit": True},
    )
    pool = AsyncConnectionPool(url, min_size=2, max_size=5, open=False)
    await _recorder.open(wait=True)
    await pool.open(wait=True)
    _offset = await measure_offset(_recorder)
    stop_flushing = asyncio.Event()
    flusher = asyncio.create_task(flush_until(_recorder, stop_flushing)) if _in_memory else None
    oban = Oban(pool=pool, name=f"bench_{node}", node=node, queues={"timers": limit})
    try:
        await oban.start()
        built = _oban_compat.stager_of(oban)
        print(f"ready {type(built).__name__} {_oban_compat.interval_of(built)}", flush=True)
        await _stdin_closed()
    finally:
        await oban.stop()
        if flusher is not None:
            stop_flushing.set()
            await flusher
        await pool.close()
        await _recorder.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="conninfo of the benchmark database")
    parser.add_argument("--node", required=True, help="node name (unique per process)")
    parser.add_argument("--mode", choices=("ours", "today", "stock"), required=True)
    parser.add_argument("--limit", type=int, default=20, help="timers queue limit")
    parser.add_argument("--recorder", choices=("memory", "insert"), default="memory")
    parser.add_argument("--recorders", type=int, default=10, help="recorder pool connections")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the worker; exit status 1 on any error (the traceback goes to stderr)."""
    args = parse_args(argv)
    profile_dir = os.environ.get(PROFILE_ENV)
    profiler = cProfile.Profile() if profile_dir else None
    try:
        if profiler:
            profiler.enable()
        asyncio.run(run(args.url, args.node, args.mode, args.limit, args.recorder, args.recorders))
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        if profiler and profile_dir:
            profiler.disable()
            profiler.dump_stats(os.path.join(profile_dir, f"{args.node}.prof"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
