"""Worker process for ``bench/timers.py``: one server-mode Oban running the timers queue.

Started by ``bench/timers.py`` (not meant to be run by hand)::

    python bench/timers_worker.py --url CONNINFO --node w1 --stager prompt|stock \\
        [--limit 20] [--recorders 10]

It imports ``statifier_oban`` (which installs the prompt stager) and, with
``--stager stock``, removes that extension again so the ``Oban`` built afterwards uses
oban's stock ``Stager`` with its default 1 s interval. With ``--stager prompt`` no stager
option is passed either: that is the default configuration a host gets.

Each fired timer is delivered to :class:`RecordFire` (import path
``timers_worker:RecordFire``, named on the job rows by the benchmark's ``Config``), which
inserts ``(scope, ordinal, node, database clock)`` into ``bench_fires`` in one autocommit
statement (a single round trip). The process prints one line
``ready <stager class> <interval>`` once Oban has started, and stops Oban gracefully
when its stdin is closed.

With ``STATIFIER_BENCH_WORKER_PROFILE=DIR`` in the environment (it is inherited from
``bench/timers.py``), the whole process runs under ``cProfile`` and writes
``DIR/<node>.prof`` when it stops (read it with ``python -m pstats``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import sys
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

_recorder: AsyncConnectionPool | None = None
"""The pool :class:`RecordFire` writes through (set by :func:`run`)."""

_node = "?"
"""This process's node label, recorded with every fire."""


class RecordFire:
    """A trivial timer delivery: record the fire time (database clock) and say delivered."""

    async def deliver(self, scope: str, effect: Any) -> Any:
        """Insert one ``bench_fires`` row for ``(scope, effect.ordinal)``."""
        from statifier_oban import Delivered

        if _recorder is None:
            raise RuntimeError("timers_worker: the recorder pool is not open")
        async with _recorder.connection() as conn:
            await conn.execute(RECORD_SQL, (scope, effect.ordinal, _node))
        return Delivered()


async def _stdin_closed() -> None:
    """Return once the parent closes our stdin (or exits)."""
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)


async def run(url: str, node: str, stager: str, limit: int, recorders: int) -> None:
    """Start Oban on the ``timers`` queue, report readiness, run until stdin closes."""
    global _recorder, _node
    # The delivery path names this module "timers_worker"; as a script it is __main__.
    sys.modules.setdefault("timers_worker", sys.modules[__name__])
    import statifier_oban

    statifier_oban.register_plugin(RecordFire, path=DELIVERY_PATH)  # rows may name it
    import statifier_oban.workers  # registers TimerWorker
    from oban import Oban
    from statifier_oban import _oban_compat

    if stager == "stock":
        statifier_oban.latency.uninstall()
    elif not statifier_oban.latency.installed():
        raise RuntimeError("importing statifier_oban did not install the prompt stager")

    _node = node
    _recorder = AsyncConnectionPool(
        url, min_size=recorders, max_size=recorders, open=False, kwargs={"autocommit": True}
    )
    pool = AsyncConnectionPool(url, min_size=2, max_size=5, open=False)
    await _recorder.open(wait=True)
    await pool.open(wait=True)
    oban = Oban(pool=pool, name=f"bench_{node}", node=node, queues={"timers": limit})
    try:
        await oban.start()
        built = _oban_compat.stager_of(oban)
        print(f"ready {type(built).__name__} {_oban_compat.interval_of(built)}", flush=True)
        await _stdin_closed()
    finally:
        await oban.stop()
        await pool.close()
        await _recorder.close()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="conninfo of the benchmark database")
    parser.add_argument("--node", required=True, help="node name (unique per process)")
    parser.add_argument("--stager", choices=("prompt", "stock"), required=True)
    parser.add_argument("--limit", type=int, default=20, help="timers queue limit")
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
        asyncio.run(run(args.url, args.node, args.stager, args.limit, args.recorders))
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
