"""Reading parts of values: subscripts, slices, attribute-style dict access and iteration."""

from __future__ import annotations

from collections.abc import Sequence

from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.methods import METHODS
from statifier.datamodel.python.values import Value, type_name
from statifier.values import brief


def subscript(container: Value, key: Value) -> Value:
    """Return ``container[key]`` for a dict (str key) or a list or str (int index)."""
    if isinstance(container, dict):
        if not isinstance(key, str):
            raise EvaluationError(f"dict keys are strings, not {type_name(key)}")
        try:
            return container[key]
        except KeyError:
            raise EvaluationError(f"key {brief(key)} not found") from None
    if isinstance(container, list | str | tuple):
        if not isinstance(key, int):
            raise EvaluationError(
                f"{type_name(container)} indices must be integers, not {type_name(key)}"
            )
        try:
            return container[key]
        except IndexError:
            raise EvaluationError(
                f"{type_name(container)} index {key} out of range (length {len(container)})"
            ) from None
    raise EvaluationError(f"'{type_name(container)}' object is not subscriptable")


def slice_of(
    context: EvalContext, container: Value, lower: Value, upper: Value, step: Value
) -> Value:
    """Return ``container[lower:upper:step]`` for a list or str."""
    for bound in (lower, upper, step):
        if bound is not None and not isinstance(bound, int):
            raise EvaluationError(f"slice indices must be integers or None, not {type_name(bound)}")
    if not isinstance(container, list | str | tuple):
        raise EvaluationError(f"'{type_name(container)}' object cannot be sliced")
    if step == 0:
        raise EvaluationError("slice step cannot be zero")
    result = container[lower:upper:step]
    context.charge(len(result) + 1)
    return list(result) if isinstance(result, tuple) else result


def attribute(container: Value, name: str) -> Value:
    """Return ``container.name``: the ``name`` key of a dict; anything else is an error."""
    if isinstance(container, dict):
        try:
            return container[name]
        except KeyError:
            raise EvaluationError(f"dict has no key {name!r}") from None
    methods = METHODS.get(type(container))
    if methods is not None and name in methods:
        raise EvaluationError(f"method {name!r} must be called, not referenced")
    raise EvaluationError(f"'{type_name(container)}' object has no attribute {name!r}")


def iterable_items(value: Value, what: str) -> Sequence[Value]:
    """Return the elements iterating ``value`` yields (dicts yield their keys)."""
    if isinstance(value, list | str | tuple):
        return value
    if isinstance(value, dict):
        return list(value)
    raise EvaluationError(f"{what}: '{type_name(value)}' object is not iterable")
