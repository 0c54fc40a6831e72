"""The JSON-like value domain shared by every part of the datamodel.

Values are ``str``, ``int``, ``float``, ``bool``, ``None``, ``list`` and ``dict`` with ``str``
keys. They are treated as immutable: nothing in the datamodel changes a container in place, so
containers may be shared freely between variables.
"""

from __future__ import annotations

import json

from statifier.datamodel.base import InState, Value, Variables

__all__ = ["InState", "Value", "Variables", "is_value", "parse_inline_content", "type_name"]

_SCALARS = (str, int, float, type(None))


def is_value(obj: object) -> bool:
    """Return whether ``obj`` is a JSON-like value, checking containers deeply.

    Shared sub-containers are fine; cyclic structures are not values.
    """
    on_path: set[int] = set()
    finished: set[int] = set()
    # Each stack entry is (object, leaving); ``leaving`` marks the post-order visit that takes a
    # container off the current path, which is how cycles are told apart from sharing.
    stack: list[tuple[object, bool]] = [(obj, False)]
    while stack:
        item, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            finished.add(id(item))
            continue
        if isinstance(item, _SCALARS):
            continue
        if not isinstance(item, list | dict):
            return False
        key = id(item)
        if key in on_path:
            return False
        if key in finished:
            continue
        on_path.add(key)
        stack.append((item, True))
        if isinstance(item, dict):
            for name, child in item.items():
                if not isinstance(name, str):
                    return False
                stack.append((child, False))
        else:
            stack.extend((child, False) for child in item)
    return True


def parse_inline_content(text: str) -> Value:
    """Turn the inline content of a data-bearing element into a value.

    Surrounding whitespace is dropped; empty content is ``None``; content that parses as JSON
    is that JSON value; anything else is the text with each whitespace run collapsed to a single
    space.
    """
    stripped = text.strip()
    if not stripped:
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return " ".join(stripped.split())


def type_name(value: object) -> str:
    """Return the Python type name of ``value`` for use in error messages."""
    return type(value).__name__
