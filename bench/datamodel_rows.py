"""The datamodel-heavy chart, Python vs ECMAScript datamodel, on its own.

``bench/interpreter.py`` runs the same rows (``statifier`` and ``statifier (ecmascript)``
on its ``datamodel`` shape) beside the peers; this script is the quick look at the two
datamodels alone: ``uv run python bench/datamodel_rows.py [--events N] [--rounds N]``.

The chart (``shapes.DATAMODEL_CHARTS``) keeps a counter, a running total, a bounded list
of recent amounts and an account object in its datamodel; every ``charge`` event evaluates
its guards on ``_event.data``, runs four assignments (one into a nested object) and a log.
Both run on the same core in the same process, in turn over ``--rounds`` rounds; the best
round of each counts, and every run is verified (the counter equals the events sent).

Goal (verdict printed, issue 19): the ECMAScript datamodel keeps at least half the Python
datamodel's events/s on this chart (its extra cost is one QuickJS call per evaluation and
the write-out of the variables each event changed, ADR 22).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from typing import Any

import statifier
from shapes import DATAMODEL_CHARTS as CHARTS


def _run(machine: statifier.Machine, events: int) -> float:
    state, _ = statifier.initialize(machine, session_id="sess_bench")
    gc.collect()
    started = time.perf_counter()
    for i in range(events):
        event = statifier.Event(name="charge", data={"amount": i % 100})
        state, _ = statifier.handle_event(state, event)
    elapsed = time.perf_counter() - started
    if state.datamodel["count"] != events:
        raise RuntimeError(f"verification failed: count {state.datamodel['count']} != {events}")
    return elapsed


def measure(events: int, rounds: int) -> dict[str, float]:
    """Best seconds per datamodel for ``events`` events, in rotating order over ``rounds``."""
    machines = {name: statifier.compile(text) for name, text in CHARTS.items()}
    for machine in machines.values():
        _run(machine, 200)
    best: dict[str, float] = {}
    names = list(machines)
    for round_ in range(rounds):
        for name in names[round_ % 2 :] + names[: round_ % 2]:
            seconds = _run(machines[name], events)
            best[name] = min(best.get(name, seconds), seconds)
    return best


def print_datamodel_rows(events: int = 5000, rounds: int = 3) -> dict[str, Any]:
    """Measure and print the two rows and the verdict; return the figures."""
    best = measure(events, rounds)
    print(f"\n## Datamodel-heavy chart ({events} events, best of {rounds} rounds)\n")
    print(f"  {'datamodel':<12} {'events/s':>10} {'us/event':>10}")
    for name, seconds in best.items():
        print(f"  {name:<12} {events / seconds:10.0f} {seconds / events * 1e6:10.1f}")
    ratio = best["python"] / best["ecmascript"]
    verdict = "PASS" if ratio >= 0.5 else "BELOW"
    print(f"\n  ecmascript / python events/s: {ratio:.2f} -> {verdict} (goal >= 0.5, issue 19)")
    return {"best_seconds": best, "ratio": ratio}


def main() -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print_datamodel_rows(args.events, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
