"""The JSON-like value domain shared by every part of the datamodel.

Values are ``str``, ``int``, ``float``, ``bool``, ``None``, ``list`` and ``dict`` with ``str``
keys. They are treated as immutable: nothing in the datamodel changes a container in place, so
containers may be shared freely between variables.
"""

from __future__ import annotations

import json

from statifier.datamodel.base import InState, Value, Variables
from statifier.values import is_value

__all__ = ["InState", "Value", "Variables", "is_value", "parse_inline_content", "type_name"]


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
