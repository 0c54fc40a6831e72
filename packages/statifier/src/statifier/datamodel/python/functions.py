"""The allow-listed functions callable by name from expressions.

Every function takes and returns JSON-like values: where Python would return a tuple, iterator
or view, these return lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from statifier.datamodel.python.access import iterable_items
from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.limits import MAX_ROUND_DIGITS
from statifier.datamodel.python.operators import check_int
from statifier.datamodel.python.rendering import render
from statifier.datamodel.python.sizing import charge_deep, check_length, text_cost
from statifier.datamodel.python.values import Value, type_name

Arguments = list[Value]
"""Positional arguments of a call, already evaluated."""

Keywords = Mapping[str, Value]
"""Keyword arguments of a call, already evaluated."""

FunctionImpl = Callable[[EvalContext, Arguments, Keywords], Value]
"""Implementation of an allow-listed function."""

_NUMBER_TYPES: Final = frozenset({int, float, bool})

NO_KEYWORDS: Final[Keywords] = MappingProxyType({})
"""Shared empty keyword mapping, so calls without keywords allocate nothing."""


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """Signature limits and implementation of one allow-listed function."""

    min_args: int
    max_args: int
    keywords: frozenset[str]
    impl: FunctionImpl


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise EvaluationError(message)


def _require_int(value: Value, function: str, what: str) -> int:
    _require(isinstance(value, int), f"{function}() {what} must be an int, not {type_name(value)}")
    result: int = value
    return result


def _optional(
    args: Arguments, kwargs: Keywords, index: int, keyword: str, default: Value, function: str
) -> Value:
    """Return the argument that may be passed positionally at ``index`` or as ``keyword``."""
    if len(args) > index:
        _require(keyword not in kwargs, f"{function}() got multiple values for {keyword!r}")
        return args[index]
    return kwargs.get(keyword, default)


def _in(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    state = args[0]
    _require(isinstance(state, str), f"In() argument must be a str, not {type_name(state)}")
    return bool(context.in_state(state))


def _len(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    value = args[0]
    _require(isinstance(value, str | list | dict), f"'{type_name(value)}' has no len()")
    return len(value)


def _str(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    return render(context, args[0]) if args else ""


def _repr(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    return render(context, args[0], use_repr=True)


_DIGITS_SQUARED_PER_UNIT: Final = 8192
"""Parsing decimal digits takes time quadratic in their count (4,300 digits, Python's
default limit, take about 0.12 ms), so ``int()`` of a string of ``n`` characters is charged
``n * n`` / this units besides reading it (2,325 units for 4,300 digits)."""


def _int(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    if not args:
        _require("base" not in kwargs, "int() missing string argument")
        return 0
    value = args[0]
    if isinstance(value, str):
        context.charge(text_cost(len(value)) + len(value) * len(value) // _DIGITS_SQUARED_PER_UNIT)
    base = _optional(args, kwargs, 1, "base", None, "int")
    if base is not None:
        _require(isinstance(value, str), "int() can't convert non-string with explicit base")
        return check_int(int(value, _require_int(base, "int", "base")))
    _require(
        isinstance(value, str | int | float),
        f"int() argument must be a string or a number, not {type_name(value)}",
    )
    return check_int(int(value))


def _float(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    if not args:
        return 0.0
    value = args[0]
    _require(
        isinstance(value, str | int | float),
        f"float() argument must be a string or a number, not {type_name(value)}",
    )
    if isinstance(value, str):
        context.charge(text_cost(len(value)))
    return float(value)


def _bool(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    return bool(args[0]) if args else False


def _abs(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    value = args[0]
    _require(isinstance(value, int | float), f"bad operand type for abs(): {type_name(value)}")
    return abs(value)


def _extremum(name: str, pick: Callable[[Sequence[Value]], Value]) -> FunctionImpl:
    def impl(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
        if len(args) == 1:
            items = iterable_items(args[0], f"{name}()")
            if not items:
                _require("default" in kwargs, f"{name}() arg is an empty sequence")
                return kwargs["default"]
        else:
            _require(
                "default" not in kwargs,
                f"cannot specify a default for {name}() with multiple positional arguments",
            )
            items = args
        charge_deep(context, items)
        return pick(items)

    return impl


def _round(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    value = args[0]
    _require(isinstance(value, int | float), f"type {type_name(value)} doesn't define round()")
    digits = _optional(args, kwargs, 1, "ndigits", None, "round")
    if digits is None:
        return check_int(round(value))
    digits = _require_int(digits, "round", "ndigits")
    if isinstance(value, int) and abs(digits) > MAX_ROUND_DIGITS:
        raise EvaluationError(f"round() ndigits is too large (limit {MAX_ROUND_DIGITS})")
    return check_int(round(value, digits))


def _sum(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    items = iterable_items(args[0], "sum()")
    start = _optional(args, kwargs, 1, "start", 0, "sum")
    context.charge(len(items) + 1)
    _require(isinstance(start, int | float), "sum() can only add numbers")
    _require(set(map(type, items)) <= _NUMBER_TYPES, "sum() can only add numbers")
    return check_int(sum(items, start))


def _any(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    items = iterable_items(args[0], "any()")
    context.charge(len(items) + 1)
    return any(items)


def _all(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    items = iterable_items(args[0], "all()")
    context.charge(len(items) + 1)
    return all(items)


def _sorted(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    items = iterable_items(args[0], "sorted()")
    reverse = kwargs.get("reverse", False)
    _require(isinstance(reverse, int), "sorted() reverse must be a bool")
    charge_deep(context, items, factor=max(len(items).bit_length(), 1))
    return sorted(items, reverse=bool(reverse))


def _list(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    if not args:
        return []
    items = iterable_items(args[0], "list()")
    context.charge(len(items) + 1)
    return list(items)


def _dict(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    result: dict[str, Value] = {}
    if args:
        source = args[0]
        if isinstance(source, dict):
            context.charge(len(source) + 1)
            result.update(source)
        elif isinstance(source, list | tuple):
            context.charge(len(source) + 1)
            for pair in source:
                _require(
                    isinstance(pair, list | tuple) and len(pair) == 2,
                    "dict() sequence elements must be [key, value] pairs",
                )
                key, value = pair
                _require(isinstance(key, str), f"dict keys must be str, not {type_name(key)}")
                result[key] = value
        else:
            raise EvaluationError(f"cannot convert '{type_name(source)}' to a dict")
    result.update(kwargs)
    return result


def _range(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    bounds = [_require_int(arg, "range", "argument") for arg in args]
    numbers = range(*bounds)
    try:
        length = len(numbers)
    except OverflowError:
        raise EvaluationError("range() is too long") from None
    check_length(length, "range()")
    context.charge(length + 1)
    return list(numbers)


def _enumerate(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    items = iterable_items(args[0], "enumerate()")
    start = _require_int(_optional(args, kwargs, 1, "start", 0, "enumerate"), "enumerate", "start")
    context.charge(2 * len(items) + 1)
    check_int(start)
    check_int(start + len(items))
    return [[index, item] for index, item in enumerate(items, start)]


def _zip(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    sequences = [iterable_items(arg, "zip()") for arg in args]
    length = min((len(sequence) for sequence in sequences), default=0)
    context.charge(length * (len(sequences) + 1) + 1)
    return [list(group) for group in zip(*sequences, strict=False)]


def _reversed(context: EvalContext, args: Arguments, kwargs: Keywords) -> Value:
    items = iterable_items(args[0], "reversed()")
    context.charge(len(items) + 1)
    return list(reversed(items))


def _spec(
    impl: FunctionImpl, min_args: int, max_args: int, keywords: tuple[str, ...] = ()
) -> FunctionSpec:
    return FunctionSpec(min_args, max_args, frozenset(keywords), impl)


FUNCTIONS: Final[Mapping[str, FunctionSpec]] = MappingProxyType(
    {
        "In": _spec(_in, 1, 1),
        "len": _spec(_len, 1, 1),
        "str": _spec(_str, 0, 1),
        "repr": _spec(_repr, 1, 1),
        "int": _spec(_int, 0, 2, ("base",)),
        "float": _spec(_float, 0, 1),
        "bool": _spec(_bool, 0, 1),
        "abs": _spec(_abs, 1, 1),
        "min": _spec(_extremum("min", min), 1, 255, ("default",)),
        "max": _spec(_extremum("max", max), 1, 255, ("default",)),
        "round": _spec(_round, 1, 2, ("ndigits",)),
        "sum": _spec(_sum, 1, 2, ("start",)),
        "any": _spec(_any, 1, 1),
        "all": _spec(_all, 1, 1),
        "sorted": _spec(_sorted, 1, 1, ("reverse",)),
        "list": _spec(_list, 0, 1),
        "dict": _spec(_dict, 0, 1, ("*",)),
        "range": _spec(_range, 1, 3),
        "enumerate": _spec(_enumerate, 1, 2, ("start",)),
        "zip": _spec(_zip, 0, 255),
        "reversed": _spec(_reversed, 1, 1),
    }
)
"""Allow-listed functions by name. A keyword set containing ``"*"`` accepts any keyword."""
