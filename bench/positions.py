"""Position and session measurements for ``bench/interpreter.py``.

Two figures, both on the card-authorization example (``examples/card_authorization.scxml``):

* ``position_costs``: the time of ``position.dumps`` and of ``position.loads`` against the
  time of one macrostep of the same chart (``capture.requested`` from ``authorized``: exit
  with a ``<cancel>``, enter with an ``<assign>``), and the position's size in bytes. The
  position written is the state that macrostep returns, what a durable host stores after it.
* ``session_memory``: the Python memory (``tracemalloc``) that ``count`` idle live sessions
  (``statifier.runtime.Session``, each waiting for its next event with its hold timer
  armed) take, per session, and the sessions one GiB holds at that rate.

One more, on the datamodel-heavy chart (``shapes.DATAMODEL_CHARTS``), each datamodel's
rendering after the same 100 events: ``datamodel_position_costs``, the time of
``position.dumps`` and ``position.loads`` of that state and its size in bytes (issue 19:
ECMAScript positions cost no more than Python ones of the same data).

statifier is imported inside the functions, so a child process whose ``PYTHONPATH`` names
another copy of the engine measures that one (``bench/interpreter.py --baseline``).
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from pathlib import Path
from typing import Any

CARD_CHART = Path(__file__).resolve().parent.parent / "examples" / "card_authorization.scxml"

GIB = 1024**3


def _per_call(call: Any, calls: int, rounds: int) -> float:
    """Median seconds per call of ``call()`` over ``rounds`` loops of ``calls`` calls."""
    samples: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - started) / calls)
    return statistics.median(samples)


def position_costs(calls: int = 2000, rounds: int = 5) -> dict[str, float]:
    """Seconds per macrostep, per ``dumps`` and per ``loads`` (medians), and the bytes."""
    import statifier
    from statifier.core import position

    machine = statifier.compile(CARD_CHART.read_bytes())
    authorized, _ = statifier.initialize(machine, session_id="sess_bench")

    def macrostep() -> Any:
        return statifier.handle_event(authorized, statifier.Event(name="capture.requested"))[0]

    capturing = macrostep()
    if capturing.configuration_ids() != ("capturing",) or capturing.datamodel["captures"] != 1:
        raise RuntimeError(f"card chart: unexpected state {capturing.configuration_ids()}")
    blob = position.dumps(capturing)
    loaded = position.loads(blob, machine)
    if loaded != capturing or position.dumps(loaded) != blob:
        raise RuntimeError("card chart: the position does not round-trip")
    gc.collect()
    step = _per_call(macrostep, calls, rounds)
    dump = _per_call(lambda: position.dumps(capturing), calls, rounds)
    load = _per_call(lambda: position.loads(blob, machine), calls, rounds)
    return {"macrostep": step, "dumps": dump, "loads": load, "bytes": float(len(blob))}


def datamodel_position_costs(calls: int = 2000, rounds: int = 5) -> dict[str, dict[str, float]]:
    """Per datamodel (``python``, ``ecmascript``): seconds per ``dumps`` and per ``loads``
    (medians) of the datamodel chart after 100 events, and the bytes."""
    import statifier
    from shapes import DATAMODEL_CHARTS
    from statifier.core import position

    found: dict[str, dict[str, float]] = {}
    for name, text in DATAMODEL_CHARTS.items():
        machine = statifier.compile(text)
        state, _ = statifier.initialize(machine, session_id="sess_bench")
        for i in range(100):
            event = statifier.Event(name="charge", data={"amount": i % 100})
            state, _ = statifier.handle_event(state, event)
        if state.datamodel["count"] != 100:
            raise RuntimeError(f"datamodel chart ({name}): count {state.datamodel['count']}")
        blob = position.dumps(state)
        if position.loads(blob, machine).datamodel != state.datamodel:
            raise RuntimeError(f"datamodel chart ({name}): the position does not round-trip")
        gc.collect()
        dump = _per_call(lambda s=state: position.dumps(s), calls, rounds)
        load = _per_call(lambda b=blob, m=machine: position.loads(b, m), calls, rounds)
        found[name] = {"dumps": dump, "loads": load, "bytes": float(len(blob))}
    return found


def session_memory(count: int = 2000) -> dict[str, float]:
    """Bytes of Python memory per idle live session of the card chart (tracemalloc)."""
    return asyncio.run(_session_memory(count))


async def _session_memory(count: int) -> dict[str, float]:
    import statifier
    from statifier.core import position
    from statifier.runtime.session import Session

    machine = statifier.compile(CARD_CHART.read_bytes())
    # One session first, so that every lazily built cache and module is in place.
    first = await Session.start(machine, session_id="sess_warm")
    await asyncio.sleep(0)
    await first.stop()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        sessions = [await Session.start(machine, session_id=f"sess_{i:08d}") for i in range(count)]
        for _ in range(3):
            await asyncio.sleep(0)  # every session's task reaches its idle wait
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    idle = [s for s in sessions if s.status().configuration == ("authorized",)]
    blob = position.dumps(sessions[0].snapshot())
    for session in sessions:
        await session.stop()
    if len(idle) != count:
        raise RuntimeError(f"only {len(idle)} of {count} sessions are idle in 'authorized'")
    per_session = (after - before) / count
    return {
        "bytes_per_session": per_session,
        "sessions_per_gib": GIB / per_session,
        "position_bytes": float(len(blob)),
    }
