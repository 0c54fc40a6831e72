"""The one mapping of psycopg's errors in the timers' store calls (``_store_errors``):
a value PostgreSQL refuses becomes ``ValueRefused`` with the scope and send id, any other
database error ``StoreUnavailable``, and the timers being scheduled are announced as
rejected with the reason of each case. Real refusals by PostgreSQL are in
``test_timer_schedule`` (a NaN delay); this pins each branch and its words."""

from __future__ import annotations

import psycopg
import pytest
from statifier_oban._errors import StoreUnavailable, ValueRefused
from statifier_oban.timers._schedule import _store_errors

REASONS: list[str] = []


def refused_reasons() -> list[str]:
    """What the block's ``rejected`` was told, in order (and forget it)."""
    told = list(REASONS)
    REASONS.clear()
    return told


def test_a_refused_value_is_value_refused_with_its_scope_and_send_id() -> None:
    with (
        pytest.raises(ValueRefused) as raised,
        _store_errors(
            "cancelling", "the cancel", scope="s1", send_id="hold", rejected=REASONS.append
        ),
    ):
        raise psycopg.DataError("invalid byte sequence")
    error = raised.value
    assert str(error) == "PostgreSQL refused the cancel: invalid byte sequence"
    assert (error.scope, error.send_id) == ("s1", "hold")
    assert isinstance(error.__cause__, psycopg.DataError)
    assert refused_reasons() == ["value_refused"]


def test_any_other_database_error_is_store_unavailable() -> None:
    with (
        pytest.raises(StoreUnavailable) as raised,
        _store_errors("inserting timer jobs", "a timer", rejected=REASONS.append),
    ):
        raise psycopg.OperationalError("the server closed the connection")
    assert str(raised.value) == "inserting timer jobs failed: the server closed the connection"
    assert not isinstance(raised.value, ValueRefused)
    assert refused_reasons() == ["insert_failed"]


def test_a_store_unavailable_from_within_is_announced_and_kept() -> None:
    inner = StoreUnavailable("no connection")
    with (
        pytest.raises(StoreUnavailable) as raised,
        _store_errors("x", "y", rejected=REASONS.append),
    ):
        raise inner
    assert raised.value is inner
    assert refused_reasons() == ["store_unavailable"]


def test_without_timers_nothing_is_announced_and_other_errors_pass() -> None:
    with pytest.raises(StoreUnavailable), _store_errors("marking", "the mark"):
        raise psycopg.InterfaceError("closed")
    with pytest.raises(KeyError), _store_errors("x", "y", rejected=REASONS.append):
        raise KeyError("not a database error")
    with _store_errors("x", "y", rejected=REASONS.append):
        pass
    assert refused_reasons() == []
