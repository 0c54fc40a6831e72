"""Decoding what a store returns: the execution as stored keeps every column the store
did not change (no database: the rows are built here)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from statifier_persistence import CorruptExecution, Execution, Limits
from statifier_persistence._records import ParentLink
from statifier_persistence._rows import decode_stored

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
