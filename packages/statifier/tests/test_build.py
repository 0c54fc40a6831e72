"""The fast builders of frozen dataclasses (``statifier._slots``) make ordinary instances."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from statifier.core import _build, planner
from statifier.core import effects as fx
from statifier.datamodel.base import WriteResult, write_result


def _same(built: Any, expected: Any) -> None:
    assert type(built) is type(expected)
    assert built == expected
    for field in dataclasses.fields(expected):
        assert getattr(built, field.name) is getattr(expected, field.name)
    assert pickle.loads(pickle.dumps(built)) == expected  # noqa: S301 - our own bytes
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.__setattr__(dataclasses.fields(expected)[0].name, None)


def test_datamodel_change_builder_sets_every_field() -> None:
    path, owner, value, prior = ("a", 0), ("transition", 3), {"v": 1}, [2]
    _same(
        _build.datamodel_change("a[0]", path, value, prior, 7, owner, 1, 2, 3),
        fx.DatamodelChange(
            location="a[0]",
            path=path,
            new_value=value,
            prior_value=prior,
            c_index=7,
            owner=owner,
            macrostep=1,
            microstep=2,
            round=3,
        ),
    )


def test_log_builder_sets_every_field() -> None:
    owner, value = ("onentry", 1, 0), [1, "x"]
    _same(
        _build.log("label", value, 4, owner, 5, 6, 7),
        fx.Log(
            label="label", value=value, c_index=4, owner=owner, macrostep=5, microstep=6, round=7
        ),
    )


def test_cancel_builder_sets_every_field() -> None:
    owner, context = ("onexit", 2, 0), {"host": [1]}
    _same(
        _build.cancel("hold", 3, owner, 9, context, 4, 5, 6),
        fx.Cancel(
            send_id="hold",
            c_index=3,
            owner=owner,
            ordinal=9,
            caller_context=context,
            macrostep=4,
            microstep=5,
            round=6,
        ),
    )


def test_send_delayed_builder_sets_every_field() -> None:
    owner, data, context = ("onentry", 1, 0), {"amount": 5}, ["c"]
    _same(
        _build.send_delayed(
            "tick", "#_parent", "scxml", data, "send_3", 7000, 2, owner, 11, False, context, 1, 2, 3
        ),
        fx.SendDelayed(
            event="tick",
            target="#_parent",
            type="scxml",
            data=data,
            send_id="send_3",
            delay_ms=7000,
            c_index=2,
            owner=owner,
            ordinal=11,
            id_from_author=False,
            caller_context=context,
            macrostep=1,
            microstep=2,
            round=3,
        ),
    )


def test_write_result_builder_sets_every_field() -> None:
    root_value, prior = {"k": 1}, None
    built = write_result("a", root_value, ("k",), prior, 1)
    expected = WriteResult("a", root_value, ("k",), prior, 1)
    assert built == expected
    for field in dataclasses.fields(expected):
        assert getattr(built, field.name) is getattr(expected, field.name)


def test_a_fired_send_is_an_ordinary_deliver() -> None:
    effect = _build.send_delayed(
        "tick", None, None, None, "tick", 1000, 0, ("transition", 2), 3, True, None, 1, 1, 1
    )
    fired = planner.fire("sess_1", effect)
    assert isinstance(fired, planner.Deliver)
    expected = planner.Deliver(fired.event, fired.target, "tick")
    _same(fired, expected)
    assert hash(fired) == hash(expected)
    assert fired.event.name == "tick"
    assert fired.event.sendid == "tick"
