"""Datamodel rows for ``bench/interpreter.py``: one datamodel-heavy chart, Python vs ECMAScript.

Run alone (``uv run python bench/datamodel_rows.py [--events N] [--rounds N]``) or through
``bench/interpreter.py``, which calls :func:`print_datamodel_rows`.

The chart keeps a counter, a running total, a bounded list of recent amounts and a
per-event flag in its datamodel; every ``charge`` event evaluates three conditions, runs a
foreach-free block of four assignments (one into a nested object) and a log. The same
chart is written once per datamodel (the expressions differ only in spelling). Both run on
the same core in the same process, in slices taken in turn over ``--rounds`` rounds; the
best round of each counts, and every run is verified (the counter equals the events sent).

Goal (verdict printed): the ECMAScript datamodel keeps at least a third of the Python
datamodel's events/s on this chart (its extra cost is one QuickJS call per evaluation plus
JSON for the values that changed).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from typing import Any

import statifier

_CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="{dm}">
  <datamodel>
    <data id="count" expr="0"/>
    <data id="total" expr="0"/>
    <data id="recent" expr="[]"/>
    <data id="account" expr="{account}"/>
  </datamodel>
  <state id="open">
    <transition event="charge" cond="{big}" target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="total" expr="total + _event.data.amount * 2"/>
      <assign location="recent" expr="{recent}"/>
      <assign location="account.last" expr="_event.data.amount"/>
      <log label="big" expr="total"/>
    </transition>
    <transition event="charge" cond="{small}" target="open">
      <assign location="count" expr="count + 1"/>
      <assign location="total" expr="total + _event.data.amount"/>
      <assign location="recent" expr="{recent}"/>
      <assign location="account.last" expr="_event.data.amount"/>
    </transition>
    <transition event="close" cond="{closable}" target="closed"/>
  </state>
  <final id="closed"/>
</scxml>
"""

CHARTS = {
    "python": _CHART.format(
        dm="python",
        account="{'id': 'acc_1', 'last': 0}",
        big="_event.data['amount'] &gt; 50 and count &gt;= 0",
        small="_event.data['amount'] &lt;= 50",
        recent="(recent + [_event.data['amount']])[-10:]",
        closable="count &gt; 1000000",
    ),
    "ecmascript": _CHART.format(
        dm="ecmascript",
        account="({id: 'acc_1', last: 0})",
        big="_event.data.amount &gt; 50 &amp;&amp; count &gt;= 0",
        small="_event.data.amount &lt;= 50",
        recent="recent.concat([_event.data.amount]).slice(-10)",
        closable="count &gt; 1000000",
    ),
}


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
    verdict = "PASS" if ratio >= 1 / 3 else "BELOW"
    print(f"\n  ecmascript / python events/s: {ratio:.2f} -> {verdict} (goal >= 0.33)")
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
