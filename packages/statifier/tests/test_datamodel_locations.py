"""Tests of assignable locations and copy-on-write writes."""

from __future__ import annotations

from typing import Any

import pytest
from statifier.datamodel import (
    EvaluationError,
    ExpressionSyntaxError,
    WriteResult,
    compile_location,
)


def _never_in(state: str) -> bool:
    return False


def write(source: str, variables: dict[str, Any], value: Any) -> WriteResult:
    return compile_location(source).write(variables, value, _never_in)


def test_plain_name() -> None:
    location = compile_location("a")
    assert location.root == "a"
    assert location.source == "a"
    result = write("a", {"a": 1}, 2)
    assert result == WriteResult(root="a", root_value=2, path=(), prior=1)


def test_attribute_on_dict() -> None:
    result = write("a.b", {"a": {"b": 1, "c": 2}}, 5)
    assert result.root == "a"
    assert result.root_value == {"b": 5, "c": 2}
    assert result.path == ("b",)
    assert result.prior == 1


def test_string_key() -> None:
    result = write("a['k']", {"a": {}}, [1])
    assert result.root_value == {"k": [1]}
    assert result.path == ("k",)
    assert result.prior is None


def test_list_index() -> None:
    result = write("a[0]", {"a": [1, 2]}, 9)
    assert result.root_value == [9, 2]
    assert result.path == (0,)
    assert result.prior == 1


def test_negative_list_index_is_normalised() -> None:
    result = write("a[-1]", {"a": [1, 2]}, 9)
    assert result.root_value == [1, 9]
    assert result.path == (1,)


def test_mixed_path() -> None:
    variables = {"a": {"b": [0, {"c": "old"}]}}
    result = write("a.b[1]['c']", variables, "new")
    assert result.root_value == {"b": [0, {"c": "new"}]}
    assert result.path == ("b", 1, "c")
    assert result.prior == "old"


def test_computed_keys() -> None:
    variables = {"a": {"x": [0, 0]}, "k": "x", "i": 1}
    result = write("a[k][i + 0]", variables, 3)
    assert result.root_value == {"x": [0, 3]}


def test_intermediate_dicts_are_created() -> None:
    result = write("a['x']['y']", {"a": {}}, 1)
    assert result.root_value == {"x": {"y": 1}}
    assert result.prior is None
    result = write("a.p.q.r", {"a": {"p": {}}}, True)
    assert result.root_value == {"p": {"q": {"r": True}}}


def test_path_copying_leaves_the_original_untouched() -> None:
    inner = [0, {"c": 1}]
    sibling = {"s": 1}
    original = {"b": inner, "other": sibling}
    variables = {"a": original}
    result = write("a.b[1].c", variables, 2)
    assert variables["a"] is original
    assert original == {"b": [0, {"c": 1}], "other": {"s": 1}}
    assert inner == [0, {"c": 1}]
    assert result.root_value is not original
    assert result.root_value["b"] is not inner
    # Untouched branches are shared, not copied.
    assert result.root_value["other"] is sibling


def test_out_of_range_index_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="out of range"):
        write("a[2]", {"a": [1, 2]}, 0)
    with pytest.raises(EvaluationError, match="out of range"):
        write("a[-3]", {"a": [1, 2]}, 0)


def test_non_integer_list_index_is_an_error() -> None:
    with pytest.raises(EvaluationError):
        write("a['x']", {"a": [1]}, 0)
    with pytest.raises(EvaluationError):
        write("a.x", {"a": [1]}, 0)


def test_missing_root_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="not defined"):
        write("missing", {}, 1)
    with pytest.raises(EvaluationError, match="not defined"):
        write("missing.b", {}, 1)


def test_indexing_a_scalar_is_an_error() -> None:
    with pytest.raises(EvaluationError):
        write("a.b", {"a": 1}, 0)
    with pytest.raises(EvaluationError):
        write("a.b.c", {"a": {"b": "text"}}, 0)


def test_non_string_dict_key_is_an_error() -> None:
    with pytest.raises(EvaluationError):
        write("a[1]", {"a": {}}, 0)


def test_read() -> None:
    location = compile_location("a.b[1]")
    assert location.read({"a": {"b": [5, 6]}}, _never_in) == 6
    with pytest.raises(EvaluationError):
        location.read({"a": {"b": []}}, _never_in)
    with pytest.raises(EvaluationError):
        location.read({}, _never_in)


def test_not_a_location() -> None:
    for source in ["1", "a + b", "f(x)", "a[1:2]", "a.__class__", "__x", "[a]", "a.b()"]:
        with pytest.raises(ExpressionSyntaxError):
            compile_location(source)
