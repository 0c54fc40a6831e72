"""Lone steps, ours against today: ``bench/executions.py``'s section 3 (with ``--baseline``).

A step that comes alone (a quiet system, any ``Executions.step`` called directly) runs its
own transaction: the locked read, the timer insert and the store, the commit. Its cost is
what a user of a lightly loaded system waits for, and it is where PostgreSQL's planning of
a statement shows (ADR 32 and ADR 18 amendments): the server spends it on every call of a
statement it keeps planning. Each side runs in a process of its own (``today`` with the
baseline's packages on ``PYTHONPATH``), on the bench's database and its thousands of
executions, with a pool of one connection (so that the server CPU read is that one
backend's, ``cpu_meter.process_cpu``): 20 executions of its own, a warm-up, then keyed
steps round robin, each arming its next timer. The sides take turns over the rounds; each
figure is the median of the rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

WARM_UP = 200
"""Steps before the measured ones: every statement prepared, the plans settled."""

EXECUTIONS = 20
"""Executions each side steps in turn (each step locks a row another step just left)."""


@dataclass(frozen=True)
class LoneRound:
    """One side's round: microseconds per step."""

    wall_us: float
    cpu_us: float
    """The stepping process's CPU."""
    server_us: float
    """Its PostgreSQL backend's CPU."""


async def run_side(
    url: str,
    steps: int,
    make: Callable[[Any], Any],
    chart: Any,
    process_cpu: Callable[[int], float],
) -> LoneRound:
    """One side's round in this process: ``make(pool)`` builds its ``Executions``;
    ``process_cpu(pid)`` reads a process's CPU seconds (``cpu_meter.process_cpu``)."""
    from psycopg_pool import AsyncConnectionPool
    from statifier.core.events import Event
    from statifier_persistence import Stepped

    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(url, open=False, min_size=1, max_size=1)
    await pool.open(wait=True)
    try:
        executions = make(pool)
        ids = [(await executions.create(chart)).execution.id for _ in range(EXECUTIONS)]
        async with pool.connection() as conn:
            row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        assert row is not None  # noqa: S101 - one row, always
        backend = int(row[0])
        tag = uuid.uuid4().hex[:8]
        for n in range(WARM_UP):
            await executions.step(ids[n % EXECUTIONS], Event(name="tick"), key=f"w{tag}{n}")
        wall, cpu, server = time.perf_counter(), time.process_time(), process_cpu(backend)
        for n in range(steps):
            result = await executions.step(
                ids[n % EXECUTIONS], Event(name="tick"), key=f"m{tag}{n}"
            )
            if not isinstance(result, Stepped):
                raise RuntimeError(f"a lone step answered {result!r}")
        return LoneRound(
            (time.perf_counter() - wall) / steps * 1e6,
            (time.process_time() - cpu) / steps * 1e6,
            (process_cpu(backend) - server) / steps * 1e6,
        )
    finally:
        await pool.close()


def measure(
    script: str, url: str, baseline_path: str, steps: int, rounds: int
) -> dict[str, list[LoneRound]]:
    """Every round of both sides, taking turns: ``script --lone-side`` in a process of its
    own per side and round (``today`` with ``baseline_path`` as its ``PYTHONPATH``)."""
    sides = ("ours", "today")
    envs = {"ours": dict(os.environ), "today": dict(os.environ, PYTHONPATH=baseline_path)}
    found: dict[str, list[LoneRound]] = {side: [] for side in sides}
    for number in range(rounds):
        for side in sides[number % 2 :] + sides[: number % 2]:
            command = [sys.executable, script, "--lone-side", "--url", url, "--steps", str(steps)]
            # Our own script and arguments; the environment differs only in PYTHONPATH.
            done = subprocess.run(  # noqa: S603
                command, env=envs[side], check=True, capture_output=True, text=True
            )
            wall, cpu, server = (float(value) for value in done.stdout.split()[-3:])
            found[side].append(LoneRound(wall, cpu, server))
    return found


def report(found: dict[str, list[LoneRound]], steps: int) -> None:
    """The medians of each side and ours/today of each figure."""
    rounds = len(found["ours"])
    print(f"\n3. lone steps: ours against today ({steps} steps a round, {rounds} rounds each)\n")
    print(f"  {'side':<6} {'wall us/step':>13} {'CPU us/step':>12} {'PostgreSQL us/step':>19}")
    medians: dict[str, Sequence[float]] = {}
    for side, each in found.items():
        medians[side] = [
            statistics.median(getattr(one, field) for one in each)
            for field in ("wall_us", "cpu_us", "server_us")
        ]
        wall, cpu, server = medians[side]
        print(f"  {side:<6} {wall:13.0f} {cpu:12.0f} {server:19.0f}")
    ratios = [
        _ratio(ours, today) for ours, today in zip(medians["ours"], medians["today"], strict=True)
    ]
    print("  ours/today: wall {}, CPU {}, PostgreSQL {} (below 1: ours cheaper)".format(*ratios))


def _ratio(ours: float, today: float) -> str:
    """``ours / today`` to three places; ``n/a`` when today's median is 0 (a few steps
    may take less than the clock tick the server's CPU is read in)."""
    return f"{ours / today:.3f}" if today > 0 else "n/a"
