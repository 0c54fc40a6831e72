"""Reading the plain fields of a job row's args and meta: one owner for every row decoder.

Rows are as untrusted as user input (anyone who can write the jobs table writes them),
so each field is type-checked, strings are bounded, numbers are bounded, and a refusal's
message names the field and quotes the value in a bounded rendering, never whole.
"""

from __future__ import annotations

from typing import Any, Final

from statifier.values import brief

from .._errors import UndecodableRow

MAX_ROW_STRING: Final = 4096
"""The longest plain string field a row may hold (event names, ids, targets, paths)."""

MAX_INTEGER_DIGITS: Final = 19
"""The most characters of an ordinal a listing reads from a row (a bigint's digits): a
longer one is no ordinal a step wrote, and a statement returns null for it instead."""


def string(args: dict[str, Any], key: str) -> str:
    """A non-empty, bounded string field."""
    value = args.get(key)
    if type(value) is str and 0 < len(value) <= MAX_ROW_STRING:  # what rows hold
        return value
    if not isinstance(value, str) or not value or len(value) > MAX_ROW_STRING:
        raise UndecodableRow(
            f"{key} must be a non-empty string of at most {MAX_ROW_STRING} characters, "
            f"found {brief(value)}"
        )
    return value


def optional_string(args: dict[str, Any], key: str) -> str | None:
    """A bounded string field, or null."""
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_ROW_STRING:
        raise UndecodableRow(
            f"{key} must be null or a string of at most {MAX_ROW_STRING} characters, "
            f"found {brief(value)}"
        )
    return value


def integer(args: dict[str, Any], key: str, minimum: int = 0) -> int:
    """An integer field (never a boolean) of at least ``minimum``."""
    value = args.get(key)
    if type(value) is int and value >= minimum:  # what rows hold: one check, not three
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UndecodableRow(f"{key} must be an integer >= {minimum}, found {brief(value)}")
    return value


def boolean(args: dict[str, Any], key: str) -> bool:
    """A boolean field (absent: False)."""
    value = args.get(key, False)
    if not isinstance(value, bool):
        raise UndecodableRow(f"{key} must be a boolean, found {brief(value)}")
    return value


def bound_ms(meta: object, key: str, maximum: int) -> int | None:
    """A run-time bound in the job's meta (``meta.<key>``): absent or null is None (no
    bound), else an integer of milliseconds in ``1..maximum`` (what a ``Config`` writes);
    anything else is ``UndecodableRow``, so the row is cancelled before it runs."""
    if not isinstance(meta, dict):
        return None
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise UndecodableRow(
            f"meta.{key} must be an integer of milliseconds in 1..{maximum}, found {brief(value)}"
        )
    return value
