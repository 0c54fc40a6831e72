"""The timer job's args: a ``SendDelayed`` effect as JSON, and back, exactly.

Layout (all keys always present; an operator can read every field in SQL)::

    scope, ordinal, send_id, event, target (null: the session or execution itself), type,
    delay_ms, c_index,
    owner (["onentry", s, n] | ["onexit", s, n] | ["transition", t] | ["finalize", s, i] | null),
    macrostep, microstep, round, id_from_author, data (opaque), caller_context (opaque)
"""

from __future__ import annotations

from typing import Any

from statifier.core._build import send_delayed
from statifier.core.effects import Owner, SendDelayed
from statifier.values import brief

from .._errors import UndecodableRow
from ..rows import _fields as fields
from ..rows._opaque import decode_field, encode_field

OWNER_KINDS = {"onentry": 3, "onexit": 3, "finalize": 3, "transition": 2}


def encode(scope: str, effect: SendDelayed, codec: str | None) -> dict[str, Any]:
    """Args for the timer job of ``effect`` (raises ``OpaqueValueError``)."""
    return {
        "scope": scope,
        "ordinal": effect.ordinal,
        "send_id": effect.send_id,
        "event": effect.event,
        "target": effect.target,
        "type": effect.type,
        "delay_ms": effect.delay_ms,
        "c_index": effect.c_index,
        "owner": list(effect.owner) if effect.owner is not None else None,
        "macrostep": effect.macrostep,
        "microstep": effect.microstep,
        "round": effect.round,
        "id_from_author": effect.id_from_author,
        "data": encode_field("data", effect.data, codec),
        "caller_context": encode_field("caller_context", effect.caller_context, codec),
    }


def decode(args: Any) -> tuple[str, SendDelayed]:
    """``(scope, effect)`` from stored args; ``UndecodableRow`` or ``CodecFailed`` if not."""
    if not isinstance(args, dict):
        raise UndecodableRow("args are not an object")
    scope = fields.string(args, "scope")
    # The engine's fast constructor of the effect (every worker step decodes one).
    effect = send_delayed(
        fields.string(args, "event"),
        fields.optional_string(args, "target"),
        fields.optional_string(args, "type"),
        decode_field("data", args.get("data")),
        fields.string(args, "send_id"),
        fields.integer(args, "delay_ms", 0),
        fields.integer(args, "c_index", 0),
        _owner(args.get("owner")),
        fields.integer(args, "ordinal", 1),
        fields.boolean(args, "id_from_author"),
        decode_field("caller_context", args.get("caller_context")),
        fields.integer(args, "macrostep", 0),
        fields.integer(args, "microstep", 0),
        fields.integer(args, "round", 0),
    )
    return scope, effect


def _owner(value: Any) -> Owner | None:
    if value is None:
        return None
    # Exact types, as JSON reads them (a bool is no index); no generator: every step's
    # timer decodes one owner of two or three items.
    if type(value) is list and value:
        kind = value[0]
        size = OWNER_KINDS.get(kind) if type(kind) is str else None
        if size is not None and len(value) == size:
            first = value[1]
            if type(first) is int and first >= 0:
                if size == 2:
                    return (kind, first)
                second = value[2]
                if type(second) is int and second >= 0:
                    return (kind, first, second)
    raise UndecodableRow(f"owner has an unknown shape: {brief(value)}")
