"""The specialised closures of ``statifier.datamodel.python.specialised`` agree with the
general operators they stand in for: same results, same errors, same step charges."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statifier.budget import Budget, MacrostepLimits
from statifier.datamodel import EvaluationError, compile_expression, compile_location
from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.errors import evaluation_error
from statifier.datamodel.python.limits import MAX_INT_BITS
from statifier.datamodel.python.literals import constant
from statifier.datamodel.python.operators import add, multiply, subtract
from statifier.datamodel.python.specialised import (
    constant_slice,
    int_arithmetic,
    path_read,
)

_EDGE_INTS = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), 2**MAX_INT_BITS - 1, -(2**MAX_INT_BITS) + 1]
_OPERANDS = st.one_of(
    st.sampled_from(_EDGE_INTS),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=3),
    st.none(),
)


def _nowhere(state_id: str) -> bool:
    return False


def _context(steps: int = 1_000_000, variables: dict[str, Any] | None = None) -> EvalContext:
    context = EvalContext(variables or {}, _nowhere, 0)
    context.steps = steps
    return context


def _outcome(call: Any, variables: dict[str, Any] | None = None) -> tuple[str, Any, int]:
    context = _context(variables=variables)
    try:
        return ("value", call(context), context.steps)
    except EvaluationError as exc:
        return ("error", str(exc), context.steps)
    except Exception as exc:  # what ``Expression.evaluate`` turns into an EvaluationError
        return ("error", str(evaluation_error(exc)), context.steps)


@pytest.mark.parametrize("operator", [add, subtract, multiply])
@given(left=_OPERANDS, right=_OPERANDS, literal=st.booleans())
def test_int_arithmetic_agrees_with_the_operator(
    operator: Any, left: Any, right: Any, literal: bool
) -> None:
    shortcut = int_arithmetic(operator, constant(left), constant(right), right if literal else None)
    assert shortcut is not None
    general = _outcome(lambda context: operator(context, left, right))
    assert _outcome(shortcut) == general
    if general[0] == "value":
        assert type(_outcome(shortcut)[1]) is type(general[1])


def test_results_past_the_int_limit_are_refused_as_before() -> None:
    big = 2**MAX_INT_BITS - 1
    for apply, left, right in ((add, big, 1), (subtract, -big, 1), (multiply, big, 2)):
        shortcut = int_arithmetic(apply, constant(left), constant(right), right)
        assert shortcut is not None
        with pytest.raises(EvaluationError, match="too large"):
            shortcut(_context())


def test_path_read_falls_back_to_the_general_closure() -> None:
    def general(context: EvalContext) -> Any:
        return "general"

    read = path_read("_event", ("data", "amount"), general)
    context = _context()
    for variables, expected in (
        ({"_event": {"data": {"amount": 3}}}, 3),
        ({"_event": {"data": {"amount": None}}}, None),
        ({"_event": {"data": {}}}, "general"),
        ({"_event": {"data": [1]}}, "general"),
        ({"_event": None}, "general"),
        ({}, "general"),
    ):
        context.variables = variables
        assert read(context) == expected
    for keys in (("a",), ("a", "b", "c")):
        deep = path_read("v", keys, general)
        context.variables = {"v": {"a": {"b": {"c": 1}}}}
        assert deep(context) == ({"b": {"c": 1}} if len(keys) == 1 else 1)
        context.variables = {"v": {"a": 5}}
        assert deep(context) == (5 if len(keys) == 1 else "general")


def test_reads_through_constant_keys_keep_their_errors() -> None:
    event = {"data": {"amount": 3}, "name": "e"}
    assert compile_expression("_event.data.amount").evaluate({"_event": event}, _nowhere) == 3
    assert compile_expression("_event['data']['amount']").evaluate({"_event": event}, _nowhere) == 3
    for source, variables, message in (
        ("_event.data.missing", {"_event": event}, "dict has no key 'missing'"),
        ("_event['data']['x']", {"_event": event}, "key 'x' not found"),
        ("_event.name.upper", {"_event": event}, "method 'upper' must be called"),
        ("_event.data", {}, "name '_event' is not defined"),
        ("v.a", {"v": [1]}, "'list' object has no attribute 'a'"),
    ):
        with pytest.raises(EvaluationError, match=message):
            compile_expression(source).evaluate(variables, _nowhere)


@given(
    value=st.one_of(st.lists(st.integers(), max_size=30), st.text(max_size=30)),
    lower=st.one_of(st.none(), st.integers(-40, 40)),
    upper=st.one_of(st.none(), st.integers(-40, 40)),
    step=st.one_of(st.none(), st.integers(-5, 5).filter(bool)),
)
def test_constant_slices_charge_what_slice_of_charges(
    value: Any, lower: Any, upper: Any, step: Any
) -> None:
    shortcut = constant_slice(constant(value), lower, upper, step)
    source = f"v[{'' if lower is None else lower}:{'' if upper is None else upper}"
    source += "]" if step is None else f":{step}]"
    assert _outcome(shortcut) == (
        "value",
        value[lower:upper:step],
        1_000_000 - len(value[lower:upper:step]) - 1,
    )
    assert compile_expression(source).evaluate({"v": value}, _nowhere) == value[lower:upper:step]


def test_a_constant_slice_of_anything_else_is_the_general_error() -> None:
    with pytest.raises(EvaluationError, match="'dict' object cannot be sliced"):
        compile_expression("v[-10:]").evaluate({"v": {}}, _nowhere)
    short = constant_slice(constant([1, 2, 3]), None, None, None)
    with pytest.raises(EvaluationError, match="step budget exceeded"):
        short(_context(steps=3))


def test_two_operand_boolean_operators_return_the_deciding_operand() -> None:
    for source, expected in (
        ("a and b", 0),
        ("b and a", 0),
        ("a or b", 2),
        ("b or a", 2),
        ("c and a", []),
        ("b or c", []),
    ):
        assert compile_expression(source).evaluate({"a": 2, "b": 0, "c": []}, _nowhere) == expected


def _write_outcome(source: str, variables: dict[str, Any], steps: int | None) -> Any:
    budget = None if steps is None else Budget(MacrostepLimits(steps=steps))
    try:
        result = compile_location(source).write(variables, 9, _nowhere, budget)
        outcome: Any = (result.root, result.root_value, result.path, result.prior, result.value)
    except EvaluationError as exc:
        outcome = str(exc)
    return outcome, None if budget is None else (budget.steps, budget.exhausted)


@pytest.mark.parametrize("steps", [None, 1, 2, 3, 4, 100])
@pytest.mark.parametrize(
    "variables",
    [{"a": {"k": 1, "j": 2}}, {"a": {}}, {"a": [1]}, {"a": None}, {"b": 1}, {"a": {"k": {}}}],
)
def test_a_spelled_out_key_writes_as_a_computed_one(steps: int | None, variables: Any) -> None:
    general = _write_outcome("a[key]", {**variables, "key": "k"}, steps)
    assert _write_outcome("a['k']", variables, steps) == general
    if type(variables.get("a")) is dict:  # else ``a.k`` fails as an attribute, as it did
        assert _write_outcome("a.k", variables, steps) == general


@pytest.mark.parametrize("symbol", [">", ">=", "<", "<="])
@pytest.mark.parametrize("value", [4, 5, 6, 5.0, True, -1])
def test_ordering_against_a_literal(symbol: str, value: Any) -> None:
    compiled = compile_expression(f"x {symbol} 5")
    expected = {">": value > 5, ">=": value >= 5, "<": value < 5, "<=": value <= 5}[symbol]
    assert compiled.evaluate({"x": value}, _nowhere) is expected
    with pytest.raises(EvaluationError, match="not supported between"):
        compiled.evaluate({"x": "text"}, _nowhere)


_READ = compile_expression("v")._evaluator
"""The general closure of a bare variable read (it reports a missing name)."""


@pytest.mark.parametrize("operator", [add, subtract, multiply])
@given(left=_OPERANDS, right=_OPERANDS, literal=st.booleans(), present=st.booleans())
def test_int_arithmetic_reading_a_variable_agrees_with_the_operator(
    operator: Any, left: Any, right: Any, literal: bool, present: bool
) -> None:
    variables = {"v": left} if present else {"w": left}
    shortcut = int_arithmetic(operator, _READ, constant(right), right if literal else None, "v")
    assert shortcut is not None
    general = _outcome(lambda context: operator(context, _READ(context), right), variables)
    assert _outcome(shortcut, variables) == general
    if general[0] == "value":
        assert type(_outcome(shortcut, variables)[1]) is type(general[1])


@pytest.mark.parametrize("symbol", ["==", "!=", "<", "<=", ">", ">="])
@given(
    value=_OPERANDS | st.dictionaries(st.sampled_from(["a", "b"]), _OPERANDS, max_size=2),
    literal=st.sampled_from([0, 50, -1.5, "m", None, True]),
    shape=st.sampled_from(["name", "path", "missing", "not a dict", "missing key"]),
)
def test_comparisons_reading_a_variable_or_a_path_agree_with_the_general_ones(
    symbol: str, value: Any, literal: Any, shape: str
) -> None:
    variables: dict[str, Any] = {
        "name": {"v": value},
        "path": {"v": {"d": {"a": value}}},
        "missing": {},
        "not a dict": {"v": {"d": [value]}},
        "missing key": {"v": {"d": {"b": value}}},
    }[shape]
    source = "v" if shape == "name" else "v.d['a']"
    compiled = compile_expression(f"{source} {symbol} {literal!r}")
    reference = compile_expression(f"({source},)[0] {symbol} {literal!r}")  # no shortcut

    def outcome(expression: Any) -> tuple[str, Any]:
        try:
            return ("value", expression.evaluate(variables, _nowhere))
        except EvaluationError as exc:
            return ("error", str(exc))

    assert outcome(compiled) == outcome(reference)
