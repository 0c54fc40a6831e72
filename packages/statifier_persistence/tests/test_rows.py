"""Decoding what a store returns: the execution as stored keeps every column the store
did not change (no database: the rows are built here); the records a step builds fast are
ordinary frozen records."""

from __future__ import annotations

import dataclasses
import pickle
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from statifier_persistence import CorruptExecution, Execution, Limits, _journal, _stepping
from statifier_persistence._records import ParentLink
from statifier_persistence._rows import (
    COLUMN_COUNT,
    StoredPosition,
    decode_position,
    decode_stored,
    execution_record,
)

_READ = Execution(
    id="e-1",
    chart_identity="scxml-c1:sha256:" + "0" * 64,
    chart_name="card",
    chart_version="7",
    status="active",
    metadata={"tenant": "t"},
    parent=ParentLink("p-1", "inv", 3),
    failure=None,
    outcome=None,
    step_count=4,
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
    updated_at=datetime(2026, 1, 2, tzinfo=UTC),
    history_seq=9,
)
_LATER = datetime(2026, 1, 3, tzinfo=UTC)


def test_a_store_changes_only_what_it_returned() -> None:
    stored = decode_stored(
        _READ, ("e-1", "failed", 5, _LATER, 10), '{"reason": "x"}', None, Limits()
    )
    changed = {"status", "failure", "step_count", "updated_at", "history_seq"}
    for field in dataclasses.fields(Execution):  # every field, those added later too
        if field.name not in changed:
            assert getattr(stored, field.name) == getattr(_READ, field.name), field.name
    assert stored.status == "failed"
    assert stored.failure == {"reason": "x"}
    assert stored.outcome is None
    assert stored.step_count == 5
    assert stored.updated_at == _LATER
    assert stored.history_seq == 10


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (("e-2", "active", 5, _LATER, 10), "answers to"),
        (("e-1", "bogus", 5, _LATER, 10), "unknown status"),
        (("e-1", "active", -1, _LATER, 10), "step_count"),
        (("e-1", "active", True, _LATER, 10), "step_count"),
        (("e-1", "active", 5, _LATER, 1.5), "history_seq"),
        (("e-1", "active", 5, _LATER - timedelta(0), None), "history_seq"),
        (("e-1", "active", 5, "2026-01-03", 10), "timestamp"),
    ],
)
def test_a_stored_row_that_is_not_what_a_store_returns_is_corrupt(
    row: tuple[object, ...], message: str
) -> None:
    with pytest.raises(CorruptExecution, match=message):
        decode_stored(_READ, row, None, None, Limits())


# -- the fast builders (``statifier._slots``) make ordinary records --------------------------


def _same_record(built: Any, expected: Any) -> None:
    """``built`` is an instance of ``expected``'s class, equal to it field by field (the
    very objects), frozen, and pickles as one."""
    assert type(built) is type(expected)
    assert built == expected
    for field in dataclasses.fields(expected):
        assert getattr(built, field.name) is getattr(expected, field.name), field.name
    assert pickle.loads(pickle.dumps(built)) == expected  # noqa: S301 - our own bytes
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.__setattr__(dataclasses.fields(expected)[0].name, None)


def test_execution_record_sets_every_field() -> None:
    values = [getattr(_READ, field.name) for field in dataclasses.fields(Execution)]
    _same_record(execution_record(*values), _READ)


def test_the_stored_row_is_an_ordinary_execution() -> None:
    stored = decode_stored(_READ, ("e-1", "completed", 5, _LATER, 10), None, '{"a": 1}', Limits())
    _same_record(
        stored,
        dataclasses.replace(
            _READ,
            status="completed",
            outcome=stored.outcome,
            step_count=5,
            updated_at=_LATER,
            history_seq=10,
        ),
    )


def test_decode_position_builds_an_ordinary_stored_position() -> None:
    blob = bytearray(b"statifier-position\n4\n")
    row = (None,) * COLUMN_COUNT + (len(blob), blob, 3, 1, 12, '{"since":2}')
    decoded = decode_position(row, "e-1", Limits())
    _same_record(decoded, StoredPosition(decoded.blob, decoded.counters, '{"since":2}'))
    assert decoded.blob == bytes(blob)
    assert decoded.counters == (3, 1)


def test_the_step_parts_and_the_history_records_are_built_whole() -> None:
    draft = _journal.draft(_READ, "event", key="k-1", status="active")
    _same_record(draft, _journal.Draft("event", draft.body, "e-1"))
    entry = _journal.stored(draft, _READ)
    _same_record(entry, _journal.StoredEntry(draft, 9, _READ.updated_at))
    assert entry is not None
    assert entry.read().key == "k-1"
    position = StoredPosition(b"blob", None, None)
    state: Any = "a state"  # stand-ins that pickle and compare
    drive: Any = "a drive"
    _same_record(
        _stepping.begun_record(_READ, position, state, ("route",)),
        _stepping.Begun(_READ, position, state, ("route",)),
    )
    row = ("e-1", b"blob")
    _same_record(_stepping.ready_record(drive, draft, row), _stepping.Ready(drive, draft, row))
