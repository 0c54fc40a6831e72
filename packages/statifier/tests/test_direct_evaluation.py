"""The Python datamodel's ``DirectEvaluation`` hook (ADR 20) keeps its contract: its code
for an expression, run against its context with an allowance, gives what
``Expression.evaluate`` gives (value or error message) and leaves the charge evaluate
makes; its ``key`` of a location describes what ``Location.write`` does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statifier.budget import Budget, MacrostepLimits
from statifier.datamodel import (
    PYTHON,
    DirectEvaluation,
    EvaluationError,
    compile_expression,
    compile_location,
    datamodel_for,
)

_SOURCES = [
    "count + 1",
    "total + _event.data.amount * 2",
    "(recent + [_event.data['amount']])[-10:]",
    "_event.data['amount'] > 50 and count >= 0",
    "_event.data['amount'] <= 50",
    "total",
    "missing + 1",
    "count + 'x'",
    "len(recent) * 1000 + sum(recent)",
    "In('open') or count",
    "recent[count]",
    "'x' * count",
    "{'a': recent, 'b': [recent, recent]}",
]

_VALUES = st.one_of(
    st.integers(-5, 120),
    st.just(2**70),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(-3, 3), max_size=12),
)


def _in_open(state_id: str) -> bool:
    return state_id == "open"


def _variables(count: Any, total: Any, recent: Any, amount: Any) -> dict[str, Any]:
    return {
        "count": count,
        "total": total,
        "recent": recent,
        "_event": {"name": "charge", "data": {"amount": amount}},
    }


def _general(source: str, variables: dict[str, Any], steps: int) -> tuple[Any, ...]:
    budget = Budget(MacrostepLimits())
    budget.steps = steps
    try:
        value = compile_expression(source).evaluate(variables, _in_open, budget)
    except EvaluationError as exc:
        return ("error", str(exc), budget.steps, budget.exhausted)
    return ("value", value, budget.steps, budget.exhausted)


def _direct(source: str, variables: dict[str, Any], steps: int) -> tuple[Any, ...]:
    """What the core does with the hook (``ContentExecutor.run_direct``)."""
    direct: Any = PYTHON
    evaluator = direct.evaluator(compile_expression(source))
    assert evaluator is not None
    context = direct.context(variables, _in_open)
    allowance = min(steps, direct.step_limit)
    context.steps = allowance
    exhausted = None
    try:
        value = evaluator(context)
    except Exception as exc:
        left = steps - allowance + context.steps
        return ("error", str(direct.failure(exc)), left, "steps" if left < 0 else exhausted)
    left = steps - allowance + context.steps
    return ("value", value, left, "steps" if left < 0 else exhausted)


@given(
    source=st.sampled_from(_SOURCES),
    count=_VALUES,
    total=_VALUES,
    recent=_VALUES,
    amount=_VALUES,
    steps=st.sampled_from([0, 1, 3, 10, 40, 1_000, 10_000_000]),
)
def test_direct_code_gives_what_evaluate_gives(
    source: str, count: Any, total: Any, recent: Any, amount: Any, steps: int
) -> None:
    variables = _variables(count, total, recent, amount)
    assert _direct(source, variables, steps) == _general(source, variables, steps)


def test_only_the_python_datamodels_offer_the_hook() -> None:
    assert isinstance(PYTHON, DirectEvaluation)
    assert isinstance(datamodel_for("null"), DirectEvaluation)
    try:
        ecmascript = datamodel_for("ecmascript")
    except Exception:  # the extra is not installed: nothing to check
        return
    assert not isinstance(ecmascript, DirectEvaluation)


def test_expressions_with_comprehensions_go_through_evaluate() -> None:
    assert PYTHON.evaluator(compile_expression("[n for n in recent]")) is None
    assert PYTHON.evaluator(compile_expression("recent")) is not None


@pytest.mark.parametrize(
    ("source", "key"),
    [
        ("account.last", "last"),
        ("account['last']", "last"),
        ("account", None),
        ("account.deep.er", None),
        ("account['la' + 'st']", None),
        ("account[0]", None),
    ],
)
def test_the_key_of_a_location(source: str, key: str | None) -> None:
    assert PYTHON.key(compile_location(source)) == key


@given(
    account=st.dictionaries(st.sampled_from(["id", "last", "x"]), _VALUES, max_size=3),
    value=_VALUES,
    spare=st.integers(0, 3),
)
def test_a_keyed_write_is_a_copy_with_the_key_set(
    account: dict[str, Any], value: Any, spare: int
) -> None:
    location = compile_location("account.last")
    units = len(account) + 1
    budget = Budget(MacrostepLimits())
    budget.steps = units + spare  # the budget can pay: the case the hook describes
    result = location.write({"account": account}, value, _in_open, budget)
    assert result.root_value == {**account, "last": value}
    assert result.root_value is not account
    assert result.path == ("last",)
    assert result.prior == account.get("last")
    assert budget.steps == spare
