"""Bounded conversion of values to text, shared by ``str()``, ``repr()`` and f-strings."""

from __future__ import annotations

from statifier.datamodel.python.context import EvalContext
from statifier.datamodel.python.limits import MAX_SEQUENCE_LENGTH
from statifier.datamodel.python.sizing import check_length, text_length_bound
from statifier.datamodel.python.values import Value


def render(context: EvalContext, value: Value, use_repr: bool = False) -> str:
    """Return ``repr(value)`` or ``str(value)``, refusing results beyond the length limit."""
    if type(value) is str:
        if not use_repr:
            return value
        check_length(len(value), "repr() result")
    elif isinstance(value, list | dict | tuple):
        text_length_bound(value, MAX_SEQUENCE_LENGTH)
    text = repr(value) if use_repr else str(value)
    check_length(len(text), "text")
    context.charge(len(text))
    return text
