"""Positions written by older releases still load (ADR 4, amended; ADR 16).

The fixtures in ``golden/legacy/`` are real blobs, written by the code of their time from
``pickup.scxml`` (after the events ``hold``, ``remind``, ``pause``):

* ``pickup.v1.position``: format 1 (no budgets), by the release before issue 13;
* ``pickup.v2.position``: format 2, under the identity of the source bytes (``sha256:``),
  by the release before canonical identities;
* ``pickup.v2c.position``: format 2 under the canonical identity, by the release before
  format 3 (issue 25);
* ``pickup.v3.position``: format 3 (a shape object and a values object, SHA-256), by the
  release before format 4.

The first two name the chart by the SHA-256 of its source bytes; ``loads`` accepts that
identity for a machine compiled from those very bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import statifier
from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.core.position import (
    FORMAT_VERSION,
    CorruptPosition,
    IdentityMismatch,
    UnsupportedVersion,
    dumps,
    loads,
)

from engine_support import blobs

LEGACY = Path(__file__).resolve().parent / "golden" / "legacy"
SOURCE = (LEGACY / "pickup.scxml").read_bytes()
BLOBS = {
    "format 1": "pickup.v1.position",
    "format 2, source identity": "pickup.v2.position",
    "format 2": "pickup.v2c.position",
    "format 3": "pickup.v3.position",
}


def blob(kind: str) -> bytes:
    """A legacy fixture's bytes."""
    return (LEGACY / BLOBS[kind]).read_bytes()


def header(data: bytes) -> list[bytes]:
    """The four header lines."""
    return data.split(b"\n", 4)[:4]


@pytest.fixture(scope="module")
def machine() -> statifier.Machine:
    """The fixtures' chart, compiled from the very bytes they were written for."""
    return statifier.compile(SOURCE)


def test_the_fixtures_name_the_source_bytes(machine: statifier.Machine) -> None:
    legacy = "sha256:" + hashlib.sha256(SOURCE).hexdigest()
    assert machine.source_identity == legacy != machine.identity
    for kind in ("format 1", "format 2, source identity"):
        assert json.loads(header(blob(kind))[2]) == legacy
    assert json.loads(header(blob("format 2"))[2]) == machine.identity
    assert header(blob("format 1"))[1] == b"1"
    assert header(blob("format 2, source identity"))[1] == b"2"
    assert header(blob("format 2"))[1] == b"2"
    assert json.loads(header(blob("format 3"))[2]) == machine.identity
    assert header(blob("format 3"))[1] == b"3"
    assert header(blob("format 3"))[3].startswith(b"sha256:")


@pytest.mark.parametrize("kind", sorted(BLOBS))
def test_a_legacy_position_loads_against_its_source(machine: statifier.Machine, kind: str) -> None:
    state = loads(blob(kind), machine)
    assert state.session_id == "loan_7"
    assert state.active_leaf_ids() == ("paused",)
    assert state.datamodel["reminders"] == 1
    last = machine.state_ids["last"]
    assert state.history == {last: (machine.state_ids["on_hold"],)}
    # it drives on: the history restores the hold
    resumed, _ = statifier.handle_event(state, statifier.Event(name="resume"))
    assert resumed.active_leaf_ids() == ("on_hold",)


@pytest.mark.parametrize("kind", sorted(BLOBS))
def test_dumping_a_legacy_position_writes_the_current_format(
    machine: statifier.Machine, kind: str
) -> None:
    upgraded = dumps(loads(blob(kind), machine))
    lines = header(upgraded)
    assert lines[1] == str(FORMAT_VERSION).encode()
    assert json.loads(lines[2]) == machine.identity
    # from now on a cosmetic edit of the chart is free
    edited = statifier.compile(SOURCE.replace(b"\n", b"\r\n").replace(b"<!--", b"<!-- edited"))
    assert edited.identity == machine.identity
    assert loads(upgraded, edited).active_leaf_ids() == ("paused",)


@pytest.mark.parametrize("kind", ["format 1", "format 2, source identity"])
def test_a_legacy_position_needs_the_very_source_bytes(kind: str) -> None:
    reformatted = statifier.compile(SOURCE.replace(b"\n", b"\r\n"))
    with pytest.raises(IdentityMismatch) as caught:
        loads(blob(kind), reformatted)
    assert caught.value.found == "sha256:" + hashlib.sha256(SOURCE).hexdigest()


def test_a_format_2_position_under_the_canonical_identity_survives_cosmetic_edits(
    machine: statifier.Machine,
) -> None:
    edited = statifier.compile(SOURCE.replace(b"\n", b"\r\n"))
    loaded = loads(blob("format 2"), edited)
    assert dataclasses.replace(loaded, machine=machine) == loads(blob("format 2"), machine)


def test_a_legacy_identity_with_a_name_needs_the_same_name(machine: statifier.Machine) -> None:
    named = statifier.compile(SOURCE, name="pickup")
    with pytest.raises(IdentityMismatch):
        loads(blob("format 2, source identity"), named)


def test_a_format_1_position_gets_the_hosts_budgets(machine: statifier.Machine) -> None:
    assert loads(blob("format 1"), machine).limits == DEFAULT_LIMITS
    tighter = MacrostepLimits(steps=1000, effects=50, internal_events=20)
    assert loads(blob("format 1"), machine, max_limits=tighter).limits == tighter


def test_a_format_1_position_is_never_keyed(machine: statifier.Machine) -> None:
    key = b"k" * 16
    with pytest.raises(CorruptPosition, match="not keyed"):
        loads(blob("format 1"), machine, key=key)
    lines = header(blob("format 1"))
    body = blob("format 1").split(b"\n", 4)[4]
    forged = b"\n".join([*lines[:3], b"hmac-" + lines[3], body])
    with pytest.raises(CorruptPosition, match="version 1"):
        loads(forged, machine, key=key)


def test_a_format_1_header_on_a_format_2_payload_is_refused(machine: statifier.Machine) -> None:
    format_2 = blob("format 2, source identity")
    lines = header(format_2)
    body = format_2.split(b"\n", 4)[4]
    relabelled = b"\n".join([lines[0], b"1", *lines[2:], body])
    with pytest.raises(CorruptPosition, match="version 1 payload has no limits"):
        loads(relabelled, machine)


def test_a_format_2_header_on_a_format_3_payload_is_refused(machine: statifier.Machine) -> None:
    format_3 = blob("format 3")
    relabelled = blobs.reframe(format_3, format_3.split(b"\n", 4)[4], version=2)
    with pytest.raises(CorruptPosition, match="not valid JSON"):
        loads(relabelled, machine)


def test_a_format_3_payload_under_a_format_4_header_is_refused(
    machine: statifier.Machine,
) -> None:
    format_3 = blob("format 3")
    relabelled = blobs.reframe(format_3, format_3.split(b"\n", 4)[4], version=4)
    with pytest.raises(CorruptPosition, match="the values line is a dict, not an array"):
        loads(relabelled, machine)


def test_a_format_4_payload_under_a_format_3_header_is_refused(
    machine: statifier.Machine,
) -> None:
    current = dumps(loads(blob("format 3"), machine))
    relabelled = blobs.reframe(current, current.split(b"\n", 4)[4], version=3)
    with pytest.raises(CorruptPosition, match="the values line is not an object"):
        loads(relabelled, machine)


def test_a_format_3_position_loads_as_its_format_4_rewrite(machine: statifier.Machine) -> None:
    old = loads(blob("format 3"), machine)
    rewritten = dumps(old)
    assert header(rewritten)[1] == b"4"
    assert header(rewritten)[3].startswith(b"crc32:")
    assert loads(rewritten, machine) == old
    assert len(rewritten) < len(blob("format 3"))


def test_formats_after_4_are_still_refused(machine: statifier.Machine) -> None:
    lines = header(blob("format 1"))
    body = blob("format 1").split(b"\n", 4)[4]
    with pytest.raises(UnsupportedVersion, match="reads versions 1, 2, 3, 4"):
        loads(b"\n".join([lines[0], b"5", *lines[2:], body]), machine)


def test_a_keyed_format_3_position_loads_under_its_key(machine: statifier.Machine) -> None:
    key = b"k" * 16
    format_3 = blob("format 3")
    keyed = blobs.reframe(format_3, format_3.split(b"\n", 4)[4], key=key)
    assert header(keyed)[1] == b"3"
    assert header(keyed)[3].startswith(b"hmac-sha256:")
    assert loads(keyed, machine, key=key) == loads(format_3, machine)
    with pytest.raises(CorruptPosition, match="keyed"):
        loads(keyed, machine)
    # Written again with the key, it is format 4 under the same HMAC.
    rewritten = dumps(loads(keyed, machine, key=key), key=key)
    assert header(rewritten)[1] == b"4"
    assert header(rewritten)[3].startswith(b"hmac-sha256:")
    assert loads(rewritten, machine, key=key) == loads(format_3, machine)
