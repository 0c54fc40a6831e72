"""The timer job's args: a ``SendDelayed`` effect as JSON, and back, exactly.

Layout (all keys always present; an operator can read every field in SQL)::

    scope, ordinal, send_id, event, target (null: the session or execution itself), type,
    delay_ms, c_index,
    owner (["onentry", s, n] | ["onexit", s, n] | ["transition", t] | ["finalize", s, i] | null),
    macrostep, microstep, round, id_from_author, data (opaque), caller_context (opaque)
"""

from __future__ import annotations

from typing import Any

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
    effect = SendDelayed(
        event=fields.string(args, "event"),
        target=fields.optional_string(args, "target"),
        type=fields.optional_string(args, "type"),
        data=decode_field("data", args.get("data")),
        send_id=fields.string(args, "send_id"),
        delay_ms=fields.integer(args, "delay_ms", 0),
        c_index=fields.integer(args, "c_index", 0),
        owner=_owner(args.get("owner")),
        ordinal=fields.integer(args, "ordinal", 1),
        id_from_author=fields.boolean(args, "id_from_author"),
        caller_context=decode_field("caller_context", args.get("caller_context")),
        macrostep=fields.integer(args, "macrostep", 0),
        microstep=fields.integer(args, "microstep", 0),
        round=fields.integer(args, "round", 0),
    )
    return scope, effect


def _owner(value: Any) -> Owner | None:
    if value is None:
        return None
    if isinstance(value, list) and value and isinstance(value[0], str) and value[0] in OWNER_KINDS:
        size = OWNER_KINDS[value[0]]
        rest = value[1:]
        if len(value) == size and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in rest
        ):
            if size == 2:
                return (value[0], rest[0])
            return (value[0], rest[0], rest[1])
    raise UndecodableRow(f"owner has an unknown shape: {brief(value)}")
