"""Position and session measurements for ``bench/interpreter.py``.

Two figures, both on the card-authorization example (``examples/card_authorization.scxml``):

* ``position_costs``: the time of ``position.dumps`` and of ``position.loads`` against the
  time of one macrostep of the same chart (``capture.requested`` from ``authorized``: exit
  with a ``<cancel>``, enter with an ``<assign>``), and the position's size in bytes. The
  macrostep starts from a loaded position, as a durable host's step does (it loads the
  execution's position, steps it and stores the state it returns); the position written
  is the state that macrostep returns, what the host stores after it.
  For a format 3 position, also what its digest and its JSON cost on their own (see
  ``floor_costs``).
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
import time
import tracemalloc
from pathlib import Path
from typing import Any

CARD_CHART = Path(__file__).resolve().parent.parent / "examples" / "card_authorization.scxml"

GIB = 1024**3


_SLICE = 100
"""Calls per timed slice: the slices of the measured operations take turns."""


def _best_per_call(calls: dict[str, Any], total: int) -> dict[str, float]:
    """Seconds per call of each ``calls[name]()``: ``total`` calls of each, in slices of
    ``_SLICE`` that take turns (so a busy spell of the machine falls on all of them), the
    best slice of each. On a shared machine noise only adds time: the best slice is the
    steadiest figure of what an operation costs (what ``timeit`` advises)."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(max(total // _SLICE, 1)):
        for name, call in calls.items():
            started = time.perf_counter()
            for _ in range(_SLICE):
                call()
            best[name] = min(best[name], (time.perf_counter() - started) / _SLICE)
    return best


def position_costs(calls: int = 2000, rounds: int = 5) -> dict[str, float]:
    """Seconds per macrostep, per ``dumps`` and per ``loads`` (``calls`` times ``rounds``
    calls of each, taking turns, the best slice), and the blob's bytes."""
    import statifier
    from statifier.core import position

    machine = statifier.compile(CARD_CHART.read_bytes())
    started, _ = statifier.initialize(machine, session_id="sess_bench")
    authorized = position.loads(position.dumps(started), machine)

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
    measured = {
        "macrostep": macrostep,
        "dumps": lambda: position.dumps(capturing),
        "loads": lambda: position.loads(blob, machine),
        **floor_costs(blob),
    }
    figures = _best_per_call(measured, calls * rounds)
    figures["bytes"] = float(len(blob))
    return figures


def floor_costs(blob: bytes) -> dict[str, Any]:
    """What a ``dumps`` and a ``loads`` of a format 4 (or 3) ``blob`` do that no check can
    skip, to be timed: ``digest``, the plain digest of the payload (once each way: CRC-32
    in format 4, continued from the shape line's remembered one over the values line;
    SHA-256 in format 3), and ``json``, the JSON of the values line (orjson writes it;
    reading it, orjson parses it and writes it back to see it is canonical). The shape
    line costs neither way: it is remembered. Empty for a blob of another format (a
    baseline's)."""
    import hashlib
    import zlib
    from binascii import hexlify

    import orjson

    header = blob.split(b"\n", 4)
    if len(header) < 5 or header[1] not in (b"3", b"4"):
        return {}
    payload = header[4]
    shape_line, values_line = payload.split(b"\n")
    values = orjson.loads(values_line)
    sorted_keys = orjson.OPT_SORT_KEYS
    # Format 4 remembers a shape line's CRC with it: the payload's continues it.
    shape_check = zlib.crc32(shape_line + b"\n")

    def checks() -> tuple[bytes, bytes]:
        return (
            hexlify(zlib.crc32(values_line, shape_check).to_bytes(4)),
            hexlify(zlib.crc32(values_line, shape_check).to_bytes(4)),
        )

    def digests() -> tuple[str, str]:
        return hashlib.sha256(payload).hexdigest(), hashlib.sha256(payload).hexdigest()

    def json_both_ways() -> None:
        orjson.dumps(values, option=sorted_keys)
        orjson.dumps(orjson.loads(values_line), option=sorted_keys)

    return {"digest": checks if header[1] == b"4" else digests, "json": json_both_ways}


def datamodel_position_costs(calls: int = 2000, rounds: int = 5) -> dict[str, dict[str, float]]:
    """Per datamodel (``python``, ``ecmascript``): seconds per ``dumps`` and per ``loads``
    of the datamodel chart after 100 events, and the bytes. The four operations take turns
    slice by slice (``calls`` times ``rounds`` calls of each, the best slice), so the two
    datamodels are timed in the same spells of the machine, not one after the other."""
    import statifier
    from shapes import DATAMODEL_CHARTS
    from statifier.core import position

    operations: dict[str, Any] = {}
    sizes: dict[str, float] = {}
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
        operations[f"{name} dumps"] = lambda s=state: position.dumps(s)
        operations[f"{name} loads"] = lambda b=blob, m=machine: position.loads(b, m)
        sizes[name] = float(len(blob))
    gc.collect()
    figures = _best_per_call(operations, calls * rounds)
    return {
        name: {
            "dumps": figures[f"{name} dumps"],
            "loads": figures[f"{name} loads"],
            "bytes": size,
        }
        for name, size in sizes.items()
    }


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
