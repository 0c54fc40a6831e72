"""The allow-listed methods callable as ``value.name(...)``, by receiver type.

Only non-mutating methods are listed, and each returns a JSON-like value (lists instead of
views). Methods are looked up by the receiver's exact type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from types import MappingProxyType
from typing import Final

from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.sizing import (
    CHARS_PER_UNIT,
    charge_key,
    charge_search,
    charge_text_search,
    check_length,
    search_cost,
    text_cost,
)
from statifier.datamodel.python.values import Value, type_name

MethodImpl = Callable[[EvalContext, Value, list[Value]], Value]
"""Implementation of an allow-listed method: ``(context, receiver, arguments) -> result``."""


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """Positional-argument limits and implementation of one allow-listed method."""

    min_args: int
    max_args: int
    impl: MethodImpl


def _require_str(value: Value, method: str) -> str:
    if not isinstance(value, str):
        raise EvaluationError(f"{method}() argument must be a str, not {type_name(value)}")
    return value


def _bounds(args: list[Value], method: str) -> list[Value]:
    for bound in args:
        if bound is not None and not isinstance(bound, int):
            raise EvaluationError(f"{method}() indices must be int or None")
    return args


def _window(text: str, bounds: list[Value]) -> int:
    """Length of ``text[start:end]``, the part a method with these bounds reads."""
    if not bounds:
        return len(text)
    start = bounds[0]
    end = bounds[1] if len(bounds) > 1 else None
    first, stop, _ = slice(start, end).indices(len(text))
    return max(stop - first, 0)


def _affix(name: str, method: Callable[..., bool]) -> MethodImpl:
    def impl(context: EvalContext, text: Value, args: list[Value]) -> Value:
        affix = args[0]
        if isinstance(affix, list):
            context.charge(len(affix) + 1)
            # Python wants a tuple of alternatives; lists are this language's only sequence.
            affix = tuple(_require_str(item, name) for item in affix)
            bounds = _bounds(args[1:], name)
            # Each alternative is compared with the text over at most its length.
            window = _window(text, bounds)
            compared = sum(map(min, map(len, affix), repeat(window)))
        else:
            _require_str(affix, name)
            bounds = _bounds(args[1:], name)
            compared = min(len(affix), _window(text, bounds) if bounds else len(text))
        context.charge(text_cost(compared))
        return method(text, affix, *bounds)

    return impl


def _transform(method: Callable[[str], Value]) -> MethodImpl:
    def impl(context: EvalContext, text: Value, args: list[Value]) -> Value:
        context.charge(len(text) + 1)
        return method(text)

    return impl


_STRIP_CHARS_FLOOR: Final = 8
"""Least ``chars`` length charged by a strip: finding each character of the text in
``chars`` costs a call per character, about what comparing eight characters costs."""


def _strip(name: str, method: Callable[[str, str | None], str]) -> MethodImpl:
    def impl(context: EvalContext, text: Value, args: list[Value]) -> Value:
        chars = args[0] if args else None
        if chars is None:
            context.charge(text_cost(len(text)))
        else:
            # Each character stripped is looked for in ``chars``: up to the whole text,
            # each time reading up to all of ``chars``.
            factor = max(len(_require_str(chars, name)), _STRIP_CHARS_FLOOR)
            context.charge(len(text) * factor // CHARS_PER_UNIT + 1)
        return method(text, chars)

    return impl


def _split(context: EvalContext, text: Value, args: list[Value]) -> Value:
    separator = args[0] if args else None
    if separator is not None:
        _require_str(separator, "split")
    limit = args[1] if len(args) > 1 else -1
    if not isinstance(limit, int):
        raise EvaluationError("split() maxsplit must be an int")
    charge_text_search(context, len(text), 1 if separator is None else len(separator))
    parts: list[str] = text.split(separator, limit)
    # Each part is a new string: charged like ``join`` (its characters and itself).
    context.charge(len(parts) + sum(map(len, parts)))
    return parts


def _join(context: EvalContext, separator: Value, args: list[Value]) -> Value:
    parts = args[0]
    if not isinstance(parts, list | tuple) or not set(map(type, parts)) <= {str}:
        raise EvaluationError("join() argument must be a list of str")
    length = sum(map(len, parts)) + len(separator) * max(len(parts) - 1, 0)
    check_length(length, "join() result")
    context.charge(length + len(parts))
    result: str = separator.join(parts)
    return result


def _replace(context: EvalContext, text: Value, args: list[Value]) -> Value:
    old = _require_str(args[0], "replace")
    new = _require_str(args[1], "replace")
    count = args[2] if len(args) > 2 else -1
    if not isinstance(count, int):
        raise EvaluationError("replace() count must be an int")
    # Two searches (counting, then replacing) and the result's characters.
    search = search_cost(len(text), len(old))
    context.charge(search)
    occurrences = text.count(old)
    if count >= 0:
        occurrences = min(occurrences, count)
    length = len(text) + occurrences * (len(new) - len(old))
    check_length(length, "replace() result")
    context.charge(search + length)
    result: str = text.replace(old, new, count)
    return result


def _search(name: str, method: Callable[..., int]) -> MethodImpl:
    def impl(context: EvalContext, text: Value, args: list[Value]) -> Value:
        needle = _require_str(args[0], name)
        bounds = _bounds(args[1:], name)
        charge_text_search(context, _window(text, bounds) if bounds else len(text), len(needle))
        return method(text, needle, *bounds)

    return impl


def _dict_get(context: EvalContext, mapping: Value, args: list[Value]) -> Value:
    default = args[1] if len(args) > 1 else None
    key = args[0]
    if not isinstance(key, str):
        return default
    charge_key(context, key)
    return mapping.get(key, default)


def _dict_keys(context: EvalContext, mapping: Value, args: list[Value]) -> Value:
    context.charge(len(mapping) + 1)
    return list(mapping)


def _dict_values(context: EvalContext, mapping: Value, args: list[Value]) -> Value:
    context.charge(len(mapping) + 1)
    return list(mapping.values())


def _dict_items(context: EvalContext, mapping: Value, args: list[Value]) -> Value:
    context.charge(2 * len(mapping) + 1)
    return [[key, value] for key, value in mapping.items()]


def _list_index(context: EvalContext, items: Value, args: list[Value]) -> Value:
    charge_search(context, args[0], items)
    result: int = items.index(args[0], *_bounds(args[1:], "index"))
    return result


def _list_count(context: EvalContext, items: Value, args: list[Value]) -> Value:
    charge_search(context, args[0], items)
    result: int = items.count(args[0])
    return result


def _str_methods() -> dict[str, MethodSpec]:
    methods = {
        "startswith": MethodSpec(1, 3, _affix("startswith", str.startswith)),
        "endswith": MethodSpec(1, 3, _affix("endswith", str.endswith)),
        "split": MethodSpec(0, 2, _split),
        "join": MethodSpec(1, 1, _join),
        "replace": MethodSpec(2, 3, _replace),
        "find": MethodSpec(1, 3, _search("find", str.find)),
        "count": MethodSpec(1, 3, _search("count", str.count)),
        "strip": MethodSpec(0, 1, _strip("strip", str.strip)),
        "lstrip": MethodSpec(0, 1, _strip("lstrip", str.lstrip)),
        "rstrip": MethodSpec(0, 1, _strip("rstrip", str.rstrip)),
    }
    transforms: dict[str, Callable[[str], Value]] = {
        "lower": str.lower,
        "upper": str.upper,
        "title": str.title,
        "capitalize": str.capitalize,
        "isdigit": str.isdigit,
        "isalpha": str.isalpha,
    }
    for name, method in transforms.items():
        methods[name] = MethodSpec(0, 0, _transform(method))
    return methods


METHODS: Final[Mapping[type, Mapping[str, MethodSpec]]] = MappingProxyType(
    {
        str: MappingProxyType(_str_methods()),
        dict: MappingProxyType(
            {
                "get": MethodSpec(1, 2, _dict_get),
                "keys": MethodSpec(0, 0, _dict_keys),
                "values": MethodSpec(0, 0, _dict_values),
                "items": MethodSpec(0, 0, _dict_items),
            }
        ),
        list: MappingProxyType(
            {
                "index": MethodSpec(1, 3, _list_index),
                "count": MethodSpec(1, 1, _list_count),
            }
        ),
    }
)
"""Allow-listed methods: receiver type -> method name -> spec."""

METHOD_NAMES: Final[frozenset[str]] = frozenset(
    name for methods in METHODS.values() for name in methods
)
"""Every method name allowed on some receiver type (checked at compile time)."""


def lookup_method(receiver: Value, name: str) -> MethodSpec:
    """Return the spec of method ``name`` on ``receiver`` or raise :class:`EvaluationError`."""
    methods = METHODS.get(type(receiver))
    spec = methods.get(name) if methods is not None else None
    if spec is None:
        raise EvaluationError(f"'{type_name(receiver)}' object has no allowed method {name!r}")
    return spec
