"""The standard library's JSON as positions use it: a strict reader and a canonical writer.

The reader refuses what a position's JSON may not hold (duplicate keys, ``NaN`` and the
infinities, numbers too large for a float, which would read as infinite) and says what is
wrong; the writer gives compact text with sorted keys, ASCII only, no ``NaN`` (what
``json.dumps`` with those options writes), built on one C encoder made once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Final, NoReturn, cast

from statifier.core._payload import CorruptPosition
from statifier.values import brief, one_shot_json_writer


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return result


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{brief(text, 40)} is not a finite number")
    return value


DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_unique_object, parse_constant=_no_constant, parse_float=_finite
)
"""Reads a payload: duplicate keys, NaN/Infinity and numbers too large for a float (which
would read as infinite) are errors."""

SCAN: Final = cast(Callable[[str, int], tuple[Any, int]], vars(DECODER)["scan_once"])
"""``DECODER`` without its whitespace handling: the text ``dumps`` writes has none."""


def decode_json(text: str, what: str) -> Any:
    """The JSON value ``text`` holds (surrounding whitespace allowed), or
    ``CorruptPosition`` naming ``what`` and saying what is wrong."""
    try:
        return DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptPosition(f"the {what} is not valid JSON: {exc}") from None


ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
)
"""A position's JSON form: compact, sorted keys, ASCII only, no NaN."""


encode_json: Final = one_shot_json_writer(sort_keys=True)
"""``ENCODER.encode``, faster: compact JSON text with sorted keys, ASCII only."""
