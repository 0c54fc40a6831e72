"""The one mapping of psycopg's errors in the timers' store calls (``_store_errors``):
a value PostgreSQL refuses becomes ``ValueRefused`` with the scope and send id, any other
database error ``StoreUnavailable``, and the timers being scheduled are announced as
rejected (``timer.schedule_rejected``) with the reason of each case. Real refusals by
PostgreSQL are in ``test_timer_schedule`` (a NaN delay); this pins each branch and its
words."""

from __future__ import annotations

import psycopg
import pytest
from statifier_oban._errors import StoreUnavailable, ValueRefused
from statifier_oban.timers._schedule import _OneTimer, _store_errors

from oban_support.effects_factory import recording, send_delayed

REJECTED = "statifier_oban.timer.schedule_rejected"
TIMERS = (_OneTimer("s1", send_delayed(ordinal=1)), _OneTimer("s2", send_delayed(ordinal=2)))


def test_a_refused_value_is_value_refused_with_its_scope_and_send_id() -> None:
    with (
        recording([REJECTED]) as recorder,
        pytest.raises(ValueRefused) as raised,
        _store_errors("cancelling", "the cancel", scope="s1", send_id="hold", rejected=TIMERS),
    ):
        raise psycopg.DataError("invalid byte sequence")
    error = raised.value
    assert str(error) == "PostgreSQL refused the cancel: invalid byte sequence"
    assert (error.scope, error.send_id) == ("s1", "hold")
    assert isinstance(error.__cause__, psycopg.DataError)
    told = [(m["scope"], m["ordinal"], m["reason"]) for m in recorder.named(REJECTED)]
    assert told == [("s1", 1, "value_refused"), ("s2", 2, "value_refused")]


def test_any_other_database_error_is_store_unavailable() -> None:
    with (
        recording([REJECTED]) as recorder,
        pytest.raises(StoreUnavailable) as raised,
        _store_errors("inserting timer jobs", "a timer", rejected=TIMERS),
    ):
        raise psycopg.OperationalError("the server closed the connection")
    assert str(raised.value) == "inserting timer jobs failed: the server closed the connection"
    assert not isinstance(raised.value, ValueRefused)
    assert [m["reason"] for m in recorder.named(REJECTED)] == ["insert_failed"] * 2


def test_a_store_unavailable_from_within_is_announced_and_kept() -> None:
    inner = StoreUnavailable("no connection")
    with (
        recording([REJECTED]) as recorder,
        pytest.raises(StoreUnavailable) as raised,
        _store_errors("x", "y", rejected=TIMERS[:1]),
    ):
        raise inner
    assert raised.value is inner
    assert [m["reason"] for m in recorder.named(REJECTED)] == ["store_unavailable"]


def test_without_timers_nothing_is_announced_and_other_errors_pass() -> None:
    with recording([REJECTED]) as recorder:
        with pytest.raises(StoreUnavailable), _store_errors("marking", "the mark"):
            raise psycopg.InterfaceError("closed")
        with pytest.raises(KeyError), _store_errors("x", "y", rejected=TIMERS):
            raise KeyError("not a database error")
        with _store_errors("x", "y", rejected=TIMERS):
            pass
    assert recorder.named(REJECTED) == []
