"""JSON-like values as the engine stores and ships them: measured and rendered in bounds.

Datamodel values are immutable, so they share sub-containers freely: ``[[[0]*1000]*1000]*100``
occupies a few kilobytes in memory and 10^8 elements once written out. Everything that
writes a value out (a position, a job row, a log line, an error message) pays for the
written-out form, so the engine measures that form, counting every shared reference as what
it expands to, and gives up as soon as a limit is passed (``measure``). Messages never hold
more than a short, truncated rendering of a value (``brief``). The value domain itself is
here too: the ``Value`` type every datamodel speaks and ``is_value``, its one check; and the
one way a time is written out (``format_time``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from types import NoneType
from typing import Any, Final, Literal

import orjson

type Value = Any
"""A JSON-like value: ``str``, ``int``, ``float``, ``bool``, ``None``, ``list``, ``dict``."""

MAX_DEPTH: Final = 256
"""Deepest nesting of containers a stored value may have (writing deeper ones out recurses)."""

BRIEF_LENGTH: Final = 120
"""Characters of a value ``brief`` shows before it truncates."""

MESSAGE_LENGTH: Final = 1_000
"""Characters of an error message ``clip`` keeps (an exception's text can be any length)."""

_FLOAT_TEXT: Final = 24
"""The longest ``repr`` of a finite float."""

MAX_INT_BITS: Final = 14_000
"""Longest stored integer: at most 4,215 digits, under the 4,300 Python writes out."""

DIGITS_PER_256_BITS: Final = 77
"""``(bits * DIGITS_PER_256_BITS >> 8) + 2`` is what ``measure`` counts for an integer of
``bits`` bits. ``256 * log10(2)`` is 77.06, so the count covers the text, sign included,
only up to 102 bits: it falls short by at most 4 characters beyond (negative integers
from 103 bits, any from 4,086). Kept: a stored position is checked against the datamodel
cap by this count, and counting more would refuse a stored execution at its cap (ADR 11)."""

ONE_DIGIT: Final = 2**30 - 1
"""The largest int CPython keeps in one digit. Comparing two such ints runs specialised;
comparing with a larger one (``2**64``, ``1 << MAX_INT_BITS``) takes the generic path, so
hot checks test against this first."""


_TOO_LONG_INT: Final = f"an integer of more than {MAX_INT_BITS} bits cannot be stored"


class ValueRefused(ValueError):
    """A value cannot be stored: too large written out, too deep, or not JSON-like."""


class ValueTooLarge(ValueRefused):
    """A value is larger written out than the limit it was measured against."""


def measure(value: Any, limit: int, depth: int = 0) -> tuple[int, int]:
    """``(size, work)``: the JSON text length of ``value`` and the elements visited.

    ``size`` counts shared references as what they expand to and non-ASCII characters as the
    ``\\uXXXX`` escapes a position writes. Raises ``ValueRefused`` as soon as the size passes
    ``limit`` (``ValueTooLarge``), for a container nested deeper than ``MAX_DEPTH`` (counting
    from ``depth``, where the value is stored), for a NaN or infinite float, an integer of
    more than ``MAX_INT_BITS`` bits, a non-string dict key, or any value that is not ``str``,
    ``int``, ``float``, ``bool``, ``None``, ``list`` or ``dict``. The walk stops at
    ``limit``, so its cost is bounded by it.
    """
    kind = type(value)
    if kind is int:
        # The common cases, a number, a short string or a flat list, without the walk.
        bits = value.bit_length()
        if bits > MAX_INT_BITS:
            raise ValueRefused(_TOO_LONG_INT)
        total = (bits * DIGITS_PER_256_BITS >> 8) + 2
    elif kind is str and len(value) < 256 and value.isascii():
        total = len(value) + 2
    elif (
        kind is list
        and depth < MAX_DEPTH
        and len(value) + 2 <= limit
        and (flat := flat_list_measure(value)) is not None
    ):
        total = flat[0]
        if total > limit:
            raise ValueTooLarge(f"the value is larger than {limit} bytes written out")
        return flat
    else:
        return _walk(value, limit, depth)
    if total > limit:
        raise ValueTooLarge(f"the value is larger than {limit} bytes written out")
    return total, 1


def flat_list_measure(items: list[Any]) -> tuple[int, int] | None:
    """``measure`` of a list of scalars of one kind (``(size, work)``, no limit applied),
    without its walk; None for any other list (``measure`` walks it)."""
    flat = _flat_size(items)
    if flat is None:
        return None
    count = len(items)
    return 2 + count + flat, 1 + count // 16


def _walk(value: Any, limit: int, depth: int) -> tuple[int, int]:  # noqa: C901 - hot, inlined
    # One explicit-stack loop with a branch per JSON kind, inlined on purpose: every step
    # measures its values through here (bench/interpreter.py), and calls cost.
    total = 0
    work = 0
    stack: list[tuple[Any, int]] = [(value, depth)]
    pop = stack.pop
    push = stack.append
    while stack:
        item, depth = pop()
        work += 1
        kind = type(item)
        if kind is str:
            total += len(item) + 2 if item.isascii() else _text_size(item)
        elif kind is int:
            bits = item.bit_length()
            if bits > MAX_INT_BITS:
                raise ValueRefused(_TOO_LONG_INT)
            total += (bits * DIGITS_PER_256_BITS >> 8) + 2
        elif item is None or kind is bool:
            total += 5
        elif kind is float:
            if not math.isfinite(item):
                raise ValueRefused(f"{item!r} cannot be stored (it is not a finite number)")
            total += _FLOAT_TEXT
        elif kind is list or kind is dict:
            if depth >= MAX_DEPTH:
                raise ValueRefused(f"the value is nested more than {MAX_DEPTH} levels deep")
            if kind is list:
                total += 2 + len(item)
                if total <= limit:
                    flat = _flat_size(item)
                    if flat is None:
                        stack.extend([(child, depth + 1) for child in item])
                    else:
                        total += flat
                        work += len(item) // 16
            else:
                total += 2 + 4 * len(item)
                if total <= limit:
                    for key, child in item.items():
                        if type(key) is not str:
                            raise ValueRefused(
                                f"dict key {brief(key)} is a {type(key).__name__}, not a string"
                            )
                        # ``entry_key_size``, inlined (its 4 are in the dict's count).
                        total += len(key) + 2 if key.isascii() else _text_size(key)
                        push((child, depth + 1))
        else:
            raise ValueRefused(f"a {kind.__name__} cannot be stored (values are JSON-like)")
        if total > limit:
            raise ValueTooLarge(f"the value is larger than {limit} bytes written out")
    return total, work


def entry_key_size(key: str) -> int:
    """What a new entry of a dict adds to ``measure``'s count besides its value: the key
    written out (quoted, escaped as a position writes it) and the entry's four separators
    counted with the dict."""
    return 4 + (len(key) + 2 if key.isascii() else _text_size(key))


def _text_size(text: str) -> int:
    # A position escapes every non-ASCII character as \\uXXXX (a surrogate pair is two).
    if text.isascii():
        return len(text) + 2
    return (6 if max(text) <= "\uffff" else 12) * len(text) + 2


_SHORT_LIST: Final = 64
"""Longest list ``_flat_size`` counts in one Python loop; a longer one is counted in
passes that run in C (the loop is the quicker below about a hundred items)."""


def _flat_size(items: list[Any]) -> int | None:  # noqa: C901 - two ways per kind
    """The written size of a list of scalars of one kind, else None."""
    # A short list (every write of one is measured here, bench/interpreter.py) in one loop
    # that checks each item's type as it counts: half the cost of a set of the types and
    # a second pass. A long one in those passes, which run in C.
    if not items:
        return 0
    kind = type(items[0])
    short = len(items) <= _SHORT_LIST
    if not short and len(set(map(type, items))) != 1:
        return None
    if kind is int:
        if short:
            bits = 0
            for item in items:
                if type(item) is not int:
                    return None
                bits += item.bit_length()
        else:
            bits = sum(map(int.bit_length, items))
        if bits > MAX_INT_BITS and max(map(int.bit_length, items)) > MAX_INT_BITS:
            return None  # the walk refuses it
        return (bits * DIGITS_PER_256_BITS >> 8) + 2 * len(items)
    if kind is str:
        if short:
            size = 0
            for item in items:
                if type(item) is not str or not item.isascii():
                    return None
                size += len(item)
        elif all(map(str.isascii, items)):
            size = sum(map(len, items))
        else:
            return None
        return size + 2 * len(items)
    if kind is bool or kind is NoneType or kind is float:
        if short:
            for item in items:
                if type(item) is not kind or (kind is float and not math.isfinite(item)):
                    return None
        elif kind is float and not all(map(math.isfinite, items)):
            return None
        return (_FLOAT_TEXT if kind is float else 5) * len(items)
    return None


def clip(text: str, limit: int = MESSAGE_LENGTH) -> str:
    """``text`` cut at ``limit`` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def format_time(
    moment: datetime, *, timespec: Literal["seconds", "microseconds"] = "seconds"
) -> str:
    """A time as UTC ISO-8601: ``2026-12-02T09:30:00Z``, or with ``timespec=
    "microseconds"`` ``2026-12-02T09:30:00.250000Z`` (records keep every digit they have).
    A naive time is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    text = moment.astimezone(UTC).isoformat(timespec=timespec)
    return text.removesuffix("+00:00") + "Z"


def brief(value: Any, limit: int = BRIEF_LENGTH) -> str:
    """A ``repr``-like rendering of ``value`` cut at about ``limit`` characters.

    Its cost depends on ``limit``, never on the size of ``value``: messages hold this, not
    ``repr(value)``.
    """
    parts: list[str] = []
    room = _render(value, limit, parts, 0)
    text = "".join(parts)
    return text if room >= 0 else text + "..."


def _render(value: Any, room: int, parts: list[str], depth: int) -> int:
    """Append pieces of ``value``'s repr to ``parts``; return the room left (< 0: cut)."""
    if room < 0:
        return room
    if isinstance(value, str):
        if len(value) > room:
            parts.append(repr(value[:room]))
            return -1
        text = repr(value)
    elif isinstance(value, bool | float) or value is None:
        text = repr(value)
    elif isinstance(value, int):
        if value.bit_length() > 4 * room:
            parts.append(f"<int of {value.bit_length()} bits>")
            return -1
        text = repr(value)
    elif isinstance(value, list | tuple | dict) and depth < 32:
        return _render_container(value, room, parts, depth)
    else:
        text = f"<{type(value).__name__}>"
    if len(text) > room:
        parts.append(text[: max(room, 0)])
        return -1
    parts.append(text)
    return room - len(text)


def _render_container(
    value: list[Any] | tuple[Any, ...] | dict[Any, Any], room: int, parts: list[str], depth: int
) -> int:
    """``_render`` of a list, tuple or dict: its items, cut where the room runs out."""
    opening, closing = ("{", "}") if isinstance(value, dict) else ("[", "]")
    parts.append(opening)
    room -= 1
    items = value.items() if isinstance(value, dict) else value
    for position, item in enumerate(items):
        if position:
            parts.append(", ")
            room -= 2
        if room < 0:
            return room
        if isinstance(value, dict):
            room = _render(item[0], room, parts, depth + 1)
            if room < 0:
                return room
            parts.append(": ")
            room = _render(item[1], room - 2, parts, depth + 1)
        else:
            room = _render(item, room, parts, depth + 1)
        if room < 0:
            return room
    parts.append(closing)
    return room - 1


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


def same_data(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` are the same JSON-like data: equal, and of the same types
    all the way down (``1``, ``1.0`` and ``True`` differ). Nesting past ``MAX_DEPTH``
    counts as different."""
    stack: list[tuple[object, object, int]] = [(a, b, 0)]
    while stack:
        left, right, depth = stack.pop()
        if type(left) is not type(right) or depth > MAX_DEPTH:
            return False
        if isinstance(left, dict):
            assert isinstance(right, dict)  # noqa: S101 - the types are the same
            if left.keys() != right.keys():
                return False
            stack.extend((item, right[key], depth + 1) for key, item in left.items())
        elif isinstance(left, list):
            assert isinstance(right, list)  # noqa: S101 - the types are the same
            if len(left) != len(right):
                return False
            stack.extend((x, y, depth + 1) for x, y in zip(left, right, strict=True))
        elif left != right:
            return False
    return True


def one_shot_json_writer(*, sort_keys: bool, ensure_ascii: bool = True) -> Callable[[Any], str]:
    """``json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=False,
    separators=(",", ":"))``'s ``encode``, on one C encoder made here instead of one per
    call; a cycle is found as a ``RecursionError`` (like ``ValueError``: not JSON)."""
    encoder = json.JSONEncoder(
        sort_keys=sort_keys, ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":")
    )
    try:
        from _json import make_encoder
    except ImportError:  # pragma: no cover - an interpreter without the C accelerator
        return encoder.encode
    from json.encoder import encode_basestring, encode_basestring_ascii

    quote = encode_basestring_ascii if ensure_ascii else encode_basestring
    make = make_encoder(None, encoder.default, quote, None, ":", ",", sort_keys, False, False)
    join = "".join
    return lambda value: join(make(value, 0))


json_text: Final[Callable[[Any], str]] = one_shot_json_writer(sort_keys=False)
"""Compact JSON text of a JSON-like value, ASCII only, keys in their order; raises
``TypeError``, ``ValueError`` (``NaN``, the infinities) or ``RecursionError`` (a cycle, or
nesting too deep) for anything else."""

json_text_utf8: Final[Callable[[Any], str]] = one_shot_json_writer(
    sort_keys=False, ensure_ascii=False
)
""":data:`json_text` with the characters beyond ASCII written as themselves (text a
database stores: smaller, and read back the same)."""


def json_value_text_utf8(value: Any) -> str:
    """:data:`json_text_utf8` of a value already checked to be JSON (lists, dicts with
    string keys, strings, ints, finite floats, booleans, None), written by orjson where it
    can: the same value read back, in about a sixth of the time. Only for such values:
    orjson writes ``NaN`` as ``null`` and some non-JSON types (dataclasses, datetimes) as
    something, where :data:`json_text_utf8` raises. A float may be spelled differently
    (``1e16`` for ``1e+16``). What orjson refuses (an int beyond 64 bits, a key that is not
    a string, a lone surrogate) goes to :data:`json_text_utf8`, which writes or raises."""
    try:
        return orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS).decode()
    except TypeError:
        return json_text_utf8(value)


LONG_NUMBER_DIGITS: Final = 19
"""Digits in a row of an int orjson might read as a float (beyond 64 bits), or not."""

_DIGIT_MARKS: Final = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
"""A ``bytes.translate`` table: every ASCII digit to ``0``, every other byte to a space."""


def digit_run(data: bytes, length: int) -> bool:
    """Whether ``data`` holds ``length`` ASCII digits in a row: a regex search's answer in
    passes of C, several times faster on the few hundred bytes of a stored JSON document.
    Fewer digits in all answer at once; else the digits are marked and the run looked for
    (a search whose set-up alone costs about a microsecond)."""
    if len(data) - len(data.translate(None, _DIGITS)) < length:
        return False
    return b"0" * length in data.translate(_DIGIT_MARKS)


_DIGITS: Final = b"0123456789"


def read_json(data: bytes | str, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """The value of JSON ``data`` exactly as ``json.loads`` reads it, by orjson when it can.

    For stored JSON whose size the reader already bounds. Where orjson reads a document it
    gives what the standard decoder gives (both keep the last of duplicate keys and round
    floats alike), except for ints beyond 64 bits, which it reads as floats: a document
    with 19 digits in a row goes to the standard decoder, as does one orjson refuses
    (``NaN``, a number too large for a float, an escaped lone surrogate, nesting deeper
    than 1,024), with ``parse_constant`` as ``json.loads`` takes it."""
    raw = data.encode() if isinstance(data, str) else data
    if not digit_run(raw, LONG_NUMBER_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw, parse_constant=parse_constant)


MAX_JSON_TEXT: Final = 1_000_000
"""The most characters of JSON text :func:`parse_json` reads by default."""


def parse_json(text: str, *, max_chars: int = MAX_JSON_TEXT, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``text``, read only if it is small and shallow enough.

    For JSON from outside (a command-line argument): ``ValueRefused``, with a one-line
    message that reads after "is" (``not JSON: ...``, ``JSON nested ...``), for text
    longer than ``max_chars``, containers nested deeper than ``max_depth`` (counted before
    parsing, so no nesting reaches the parser's recursion), ``NaN`` or ``Infinity`` (not
    JSON) and anything ``json`` refuses.
    """
    if len(text) > max_chars:
        raise ValueRefused(f"JSON longer than {max_chars} characters ({len(text)})")
    if _nesting(text) > max_depth:
        raise ValueRefused(f"JSON nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as exc:
        raise ValueRefused(f"not JSON: {exc.msg} at column {exc.colno}") from None
    except ValueError as exc:
        raise ValueRefused(f"not JSON: {exc}") from None


def _nesting(text: str) -> int:
    """The deepest nesting of brackets in ``text`` outside strings (one linear pass)."""
    deepest = depth = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _not_json(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON value")
