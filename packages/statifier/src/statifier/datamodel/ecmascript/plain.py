"""An ECMAScript chart's variables as plain data: what users read (ADR 22).

Positions hold each variable in the stored form (``{"$ref": 0}``, ``#objects``, tags for
what JSON cannot say). Everything a user reads (``MachineState.datamodel``,
``export_position``, traced values, ``statifier run``, ``executions show``...) shows plain
JSON values instead, decoded from the stored form here, by the rules ``JSON.stringify``
follows (read through property descriptors, as values handed out are):

* ``undefined``, a function (the chart's or a built-in) and a symbol are left out of an
  object, ``null`` in an array, and ``None`` as a variable's whole value; ``null`` is
  ``None``;
* ``NaN`` and the infinities are ``None``, ``-0`` is ``0``;
* a ``Map``, a ``Set`` and a ``RegExp`` are ``{}``, an object's prototype is not shown;
* a ``BigInt`` is its ``int`` (where ``JSON.stringify`` would throw);
* an object referred to from several places (``p = o``) is written out in each, as equal
  copies; an object met again inside itself is :data:`CIRCULAR`;
* past :data:`MAX_DEPTH` levels, or once shared objects written out again have made
  :data:`MAX_REPEATED` values, what is left is :data:`TRUNCATED`.

Stored data is never trusted to be well formed: a tag that does not read right is left out,
as the engine leaves it undefined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

CIRCULAR: Final = "[Circular]"
"""Stands where an object holds itself (``o.self = o``), directly or further down."""

TRUNCATED: Final = "[Truncated]"
"""Stands for what lies deeper than :data:`MAX_DEPTH`, or past :data:`MAX_REPEATED`."""

MAX_DEPTH: Final = 256
"""Levels of nesting shown (as for values handed out of the engine)."""

MAX_REPEATED: Final = 1_000_000
"""Values that shared objects may add, written out again where they recur, per datamodel
(a chain of objects each shared twice would otherwise double at every level)."""

HEAP: Final = "#objects"
"""The stored form's entry holding objects stored once (shared, cyclic or deep ones)."""

_TAGS: Final = frozenset(
    {
        "$ref",
        "$undefined",
        "$null",
        "$number",
        "$bigint",
        "$builtin",
        "$system",
        "$function",
        "$prototype",
        "$map",
        "$set",
        "$regexp",
        "$proto",
    }
)
_INVALID: Final = "invalid"
_ABSENT: Final[Any] = object()
"""What ``undefined`` decodes to before its container decides (left out, or null)."""


class PlainDecoder:
    """Decodes one stored datamodel's variables, one at a time (see the module docstring).

    What shared objects add where they recur counts against one ``repeated`` (values) for
    the whole datamodel."""

    __slots__ = ("_expanded", "_heap", "_repeats", "_stored", "_system")

    def __init__(
        self, stored: Mapping[str, Any], system: Mapping[str, Any], repeated: int = MAX_REPEATED
    ) -> None:
        heap = stored.get(HEAP)
        self._heap: list[Any] = heap if isinstance(heap, list) else []
        self._stored = stored
        self._system = system
        self._expanded: set[int] = set()
        self._repeats = repeated

    def variable(self, name: str) -> Any:
        """The plain value of the variable ``name`` (``KeyError`` when there is none)."""
        if name == HEAP:
            raise KeyError(name)
        stored = self._stored[name]
        if stored is None:
            return None
        value = self._value(stored, 0, False, frozenset())
        return None if value is _ABSENT else value

    def _value(self, stored: Any, depth: int, repeated: bool, active: frozenset[int]) -> Any:
        if repeated:
            self._repeats -= 1
            if self._repeats < 0:
                return TRUNCATED
        kind = type(stored)
        if kind is str or kind is int or kind is bool or stored is None:
            return stored
        if kind is float:
            return stored if stored == stored and abs(stored) != float("inf") else None
        if depth >= MAX_DEPTH:
            return TRUNCATED
        if kind is list:
            return self._array(stored, depth, repeated, active)
        if kind is not dict:
            return _ABSENT
        tag = _tag_of(stored)
        if tag is None or tag == "$proto":
            return self._object(stored, depth, repeated, active)
        if tag == "$ref":
            return self._reference(stored["$ref"], depth, repeated, active)
        return _scalar_tag(tag, stored, self._system)

    def _array(self, stored: list[Any], depth: int, repeated: bool, active: frozenset[int]) -> Any:
        out = []
        for item in stored:
            value = self._value(item, depth + 1, repeated, active)
            out.append(None if value is _ABSENT else value)
        return out

    def _object(
        self, stored: dict[str, Any], depth: int, repeated: bool, active: frozenset[int]
    ) -> Any:
        out = {}
        for key, item in stored.items():
            if key[:1] == "$":
                if key[1:2] != "$":
                    continue  # a tag beside the keys ($proto): not data
                key = key[1:]
            value = self._value(item, depth + 1, repeated, active)
            if value is not _ABSENT:
                out[key] = value
        return out

    def _reference(self, index: Any, depth: int, repeated: bool, active: frozenset[int]) -> Any:
        if type(index) is not int or not 0 <= index < len(self._heap):
            return _ABSENT
        if index in active:
            return CIRCULAR
        again = index in self._expanded
        if again and not repeated:  # the first copy written again (inside one, it counted)
            self._repeats -= 1
            if self._repeats < 0:
                return TRUNCATED
        self._expanded.add(index)
        entry = self._heap[index]
        inner = active | {index}
        if type(entry) is list:
            return self._array(entry, depth, repeated or again, inner)
        if type(entry) is not dict:
            return _ABSENT
        tag = _tag_of(entry)
        if tag is None or tag == "$proto":
            return self._object(entry, depth, repeated or again, inner)
        if tag in ("$map", "$set", "$regexp"):
            return {}
        return _ABSENT  # a function, or a tag a heap entry cannot be


def _tag_of(stored: dict[str, Any]) -> str | None:
    """The tag of a stored object (None: plain data), as the engine reads it."""
    found = None
    for key in stored:
        if type(key) is str and key[:1] == "$" and key[1:2] != "$":
            if key not in _TAGS:
                return _INVALID
            if found is None or key == "$function":
                found = key
    return found


def _scalar_tag(tag: str, stored: dict[str, Any], system: Mapping[str, Any]) -> Any:
    """The plain value of a tag that is no object of the chart's."""
    if tag == "$null":
        return None
    if tag == "$number":
        return 0 if stored["$number"] == "-0" else None
    if tag == "$bigint":
        text = stored["$bigint"]
        if type(text) is str and text.lstrip("-").isdigit() and len(text) <= 4300:
            return int(text)
        return _ABSENT
    if tag in ("$map", "$set", "$regexp"):
        return {}
    if tag == "$system":
        return _system_part(stored["$system"], system)
    return _ABSENT  # undefined, a function, a built-in, a tag that does not read right


def _system_part(path: Any, system: Mapping[str, Any]) -> Any:
    """The part of a system variable ``path`` names (``["_event", "data"]``)."""
    if type(path) is not list or not path or path[0] not in ("_event", "_ioprocessors"):
        return _ABSENT
    value = system.get(path[0])
    for key in path[1:]:
        if type(value) is not dict or type(key) is not str or key not in value:
            return _ABSENT
        value = value[key]
    return value
