"""Issue 13, "Positions are checked for meaning, not only bytes".

A payload with a valid digest is not necessarily a position the interpreter can continue
from: it must describe a legal configuration, history records the algorithm could have
made, counters and budgets in range. Anything else raises ``CorruptPosition`` on load,
never a ``RecursionError`` or an endless loop at the next event. Hosts whose storage is
not trusted key their positions.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from typing import Any

import pytest
import statifier
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statifier import Machine, MachineState
from statifier.budget import UNBOUNDED, MacrostepLimits
from statifier.core.position import CorruptPosition, dumps, loads
from statifier.errors import StatifierError

from engine_support import blobs

CHART = """\
<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" initial="main">
  <datamodel><data id="n" expr="0"/></datamodel>
  <state id="main" initial="p">
    <parallel id="p">
      <state id="left" initial="l1">
        <history id="lh" type="deep"><transition target="l1"/></history>
        <state id="l1" initial="l1a">
          <state id="l1a"><transition event="go" target="l1b"/></state>
          <state id="l1b"/>
        </state>
        <state id="l2"/>
      </state>
      <state id="right">
        <history id="rh"><transition target="r1"/></history>
        <invoke type="worker" id="w"/>
        <state id="r1"><transition event="go" target="r2"/></state>
        <state id="r2"><transition event="tick" target="r2">
          <assign location="n" expr="n + 1"/></transition></state>
      </state>
      <transition event="leave" target="away"/>
    </parallel>
    <state id="away"><transition event="back" target="lh"/>
      <transition event="back2" target="rh"/></state>
  </state>
  <final id="end"/>
</scxml>
"""
WORKER = frozenset({"worker"})
EVENTS = ["go", "tick", "leave", "back", "back2", "nothing"]


@pytest.fixture(scope="module")
def machine() -> Machine:
    return statifier.compile(CHART)


def _state(machine: Machine, **kwargs: Any) -> MachineState:
    state, _ = statifier.initialize(machine, session_id="sess_m", invoke_types=WORKER, **kwargs)
    for event in ("go", "leave", "back"):
        state, _ = statifier.handle_event(state, event)
    return state


_payload = blobs.payload


def _ids(machine: Machine, *names: str) -> list[int]:
    return sorted(machine.state_ids[name] for name in names)


def _history(machine: Machine, name: str, *recorded: str) -> list[Any]:
    return [[machine.state_ids[name], _ids(machine, *recorded)]]


CRAFTED: dict[str, Callable[[Machine, dict[str, Any]], None]] = {
    "two children of a compound": lambda m, p: p.update(
        configuration=_ids(m, "main", "p", "left", "l1", "l1a", "l1b", "right", "r1")
    ),
    "parallel missing a region": lambda m, p: p.update(
        configuration=_ids(m, "main", "p", "left", "l1", "l1a")
    ),
    "child without its parent": lambda m, p: p.update(configuration=_ids(m, "main", "away", "r1")),
    "compound without a child": lambda m, p: p.update(configuration=_ids(m, "main")),
    "history active": lambda m, p: p.update(configuration=_ids(m, "main", "away", "lh")),
    "running with nothing active": lambda m, p: p.update(configuration=[]),
    "done but active": lambda m, p: p.update(running=False, status="done"),
    "running but done": lambda m, p: p.update(running=False),
    "history records its ancestor": lambda m, p: p.update(history=_history(m, "lh", "left")),
    "history records itself": lambda m, p: p.update(history=_history(m, "lh", "lh")),
    "history records outside its parent": lambda m, p: p.update(history=_history(m, "lh", "away")),
    "deep history records a compound": lambda m, p: p.update(history=_history(m, "lh", "l1")),
    "deep history records two siblings": lambda m, p: p.update(
        history=_history(m, "lh", "l1a", "l1b")
    ),
    "shallow history records a grandchild": lambda m, p: p.update(
        history=_history(m, "rh", "r1", "r2")
    ),
    "invocation of an inactive state": lambda m, p: p.update(
        configuration=_ids(m, "main", "away"),
        entered=_ids(m, "main", "away", "p", "left", "l1", "l1a", "l1b", "right", "r1", "r2"),
        invocations=[[m.state_ids["right"], 0, "w"]],
    ),
    "states_to_invoke not active": lambda m, p: p.update(states_to_invoke=[m.state_ids["away"]]),
    "active but never entered": lambda m, p: p.update(entered=[]),
    "empty invoke id": lambda m, p: p.update(invocations=[[m.state_ids["right"], 0, ""]]),
    "huge counter": lambda m, p: p.update(macrostep=2**70),
    "huge round budget": lambda m, p: p.update(max_macrostep_rounds=2**70),
    "limit of zero": lambda m, p: p["limits"].update(steps=0),
    "steps above the host's ceiling": lambda m, p: p["limits"].update(steps=10**12),
    "unbounded steps": lambda m, p: p["limits"].update(steps=None),
    "limits missing a field": lambda m, p: p["limits"].pop("effects"),
    "queue past its limit": lambda m, p: p.update(
        internal_queue=[_event("e")] * 20_000,
    ),
    "datamodel past its cap": lambda m, p: (
        p.update(datamodel={**p["datamodel"], "x": "y" * 200})
        or p["limits"].update(datamodel_bytes=100)
    ),
    "datamodel too deep": lambda m, p: p["datamodel"].update(x=_deep(300)),
    "long session id": lambda m, p: p.update(session_id="s" * 10_000),
    "empty session id": lambda m, p: p.update(session_id=""),
}


def _event(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "type": "internal",
        "data": None,
        "sendid": None,
        "origin": None,
        "origintype": None,
        "invokeid": None,
        "caller_context": None,
    }


def _deep(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("craft", sorted(CRAFTED))
def test_crafted_positions_with_a_valid_digest_are_refused(
    machine: Machine, craft: str, version: int
) -> None:
    blob = dumps(_state(machine))
    assert loads(blob, machine, invoke_types=WORKER).is_active("l1b")
    payload = _payload(blob)
    if version == 2:
        payload = blobs.format_2(payload, machine)
    CRAFTED[craft](machine, payload)
    crafted = blobs.reframe(blob, blobs.body(payload, version), version=version)
    with pytest.raises(CorruptPosition, match="invalid payload"):
        loads(crafted, machine, invoke_types=WORKER)


def test_a_host_may_allow_higher_or_unbounded_budgets(machine: Machine) -> None:
    state = _state(machine, limits=UNBOUNDED, max_macrostep_rounds=None)
    blob = dumps(state)
    with pytest.raises(CorruptPosition, match="unbounded"):
        loads(blob, machine, invoke_types=WORKER)
    assert loads(blob, machine, invoke_types=WORKER, max_limits=UNBOUNDED) == state
    tighter = _state(machine, limits=MacrostepLimits(steps=1_000))
    assert loads(dumps(tighter), machine, invoke_types=WORKER).limits.steps == 1_000


# -- keyed digests -----------------------------------------------------------------------

KEY = b"host-secret-key-0123456789"


def test_keyed_positions_round_trip_only_under_their_key(machine: Machine) -> None:
    state = _state(machine)
    blob = dumps(state, key=KEY)
    assert blob.split(b"\n")[3].startswith(b"hmac-sha256:")
    assert loads(blob, machine, invoke_types=WORKER, key=KEY) == state
    with pytest.raises(CorruptPosition, match="digest"):
        loads(blob, machine, invoke_types=WORKER, key=KEY[::-1])
    with pytest.raises(CorruptPosition, match="needs the host's key"):
        loads(blob, machine, invoke_types=WORKER)
    with pytest.raises(CorruptPosition, match="not keyed"):
        loads(dumps(state), machine, invoke_types=WORKER, key=KEY)


def test_a_forger_without_the_key_cannot_recompute_the_digest(machine: Machine) -> None:
    blob = dumps(_state(machine), key=KEY)
    payload = _payload(blob)
    payload["max_macrostep_rounds"] = None
    body = blobs.body(payload)
    for digest in (
        b"crc32:%08x" % zlib.crc32(body),
        b"sha256:" + hashlib.sha256(body).hexdigest().encode(),
        b"hmac-sha256:" + hashlib.sha256(body).hexdigest().encode(),
    ):
        forged = b"\n".join([*blob.split(b"\n", 4)[:3], digest, body])
        with pytest.raises(CorruptPosition):
            loads(forged, machine, invoke_types=WORKER, key=KEY)


@pytest.mark.parametrize("key", [b"", b"short", "a text key of enough length"])
def test_weak_or_mistyped_keys_are_refused(machine: Machine, key: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        dumps(_state(machine), key=key)


# -- fuzzing -----------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)
_INDEX_LISTS = st.lists(st.integers(-1, 18), max_size=8)


@st.composite
def _mutations(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A few fields of the payload replaced by values near (and far from) valid ones."""
    fields = {
        "configuration": _INDEX_LISTS.map(sorted) | _INDEX_LISTS,
        "entered": _INDEX_LISTS.map(sorted),
        "states_to_invoke": _INDEX_LISTS,
        "history": st.lists(
            st.tuples(st.integers(0, 18), _INDEX_LISTS.map(sorted)), max_size=3
        ).map(lambda pairs: [list(pair) for pair in pairs]),
        "invocations": st.lists(
            st.tuples(st.integers(0, 18), st.integers(-1, 2), st.text(max_size=3)), max_size=2
        ).map(lambda triples: [list(t) for t in triples]),
        "max_macrostep_rounds": st.none() | st.integers(-1, 2**63),
        "round": st.integers(-1, 2**63) | _JSON,
        "running": st.booleans() | _JSON,
        "status": st.sampled_from(["running", "done", "x"]),
        "datamodel": st.dictionaries(st.text(max_size=3), _JSON, max_size=3),
        "internal_queue": st.lists(st.builds(_event, st.sampled_from(EVENTS)), max_size=3),
        "limits": st.fixed_dictionaries(
            {
                name: st.none() | st.integers(0, 2**63)
                for name in (
                    "steps",
                    "effects",
                    "internal_events",
                    "output_bytes",
                    "datamodel_bytes",
                )
            }
        ),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=3, unique=True))
    return [(name, draw(fields[name])) for name in chosen]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=_mutations(), events=st.lists(st.sampled_from(EVENTS), max_size=4))
def test_fuzzed_positions_either_fail_to_load_or_run(
    machine: Machine, mutations: list[tuple[str, Any]], events: list[str]
) -> None:
    blob = dumps(_state(machine), key=KEY)
    payload = _payload(blob)
    for name, value in mutations:
        payload[name] = value
    forged = blobs.reframe(blob, blobs.body(payload), key=KEY)
    try:
        state = loads(forged, machine, invoke_types=WORKER, key=KEY)
    except CorruptPosition:
        return
    # It loaded: it must behave like a position, with no exception but the engine's own.
    try:
        for event in events:
            if not state.running:
                break
            state, _ = statifier.handle_event(state, event)
        dumps(state, key=KEY)
        statifier.cancel(state)
    except StatifierError:
        pass
