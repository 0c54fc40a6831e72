"""The invocation job's args: an ``Invoke`` effect plus its scope and handler, and back.

Layout (every key present; readable in SQL)::

    scope, invoke_id, handler ("pkg.module:Class"), type, src, params (opaque),
    content (opaque), caller_context (opaque), autoforward, state_index, invoke_index,
    macrostep, microstep, round

A fan-out child start job carries the parent's args verbatim plus ``index``,
``child_count``, ``policy`` (``"all"`` or ``"first_error"``) and ``item`` (opaque: the
fan-out's item for that index; rows stored before items travelled have no ``item``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statifier.core.effects import Invoke
from statifier.values import brief

from .._errors import FanOutError, UndecodableRow
from ..rows import _fields as fields
from ..rows._opaque import decode_field, encode_field

POLICIES = ("all", "first_error")


def encode(scope: str, handler: str, invoke: Invoke, codec: str | None) -> dict[str, Any]:
    """Args for the invocation job of ``invoke`` (raises ``OpaqueValueError``)."""
    return {
        "scope": scope,
        "invoke_id": invoke.invoke_id,
        "handler": handler,
        "type": invoke.type,
        "src": invoke.src,
        "params": encode_field("params", invoke.params, codec),
        "content": encode_field("content", invoke.content, codec),
        "caller_context": encode_field("caller_context", invoke.caller_context, codec),
        "autoforward": invoke.autoforward,
        "state_index": invoke.state_index,
        "invoke_index": invoke.invoke_index,
        "macrostep": invoke.macrostep,
        "microstep": invoke.microstep,
        "round": invoke.round,
    }


@dataclass(frozen=True, slots=True)
class InvocationRow:
    """A decoded invocation job: who it answers, which handler runs, and the effect."""

    scope: str
    invoke_id: str
    handler: str
    invoke: Invoke


def identity(args: Any) -> tuple[str, str] | None:
    """Just ``(scope, invoke_id)``, if both are readable: enough to report a corrupt row."""
    if not isinstance(args, dict):
        return None
    scope, invoke_id = args.get("scope"), args.get("invoke_id")
    if isinstance(scope, str) and scope and isinstance(invoke_id, str) and invoke_id:
        return scope, invoke_id
    return None


def decode(args: Any) -> InvocationRow:
    """Decode invocation args; ``UndecodableRow`` or ``CodecFailed`` if they are not valid."""
    if not isinstance(args, dict):
        raise UndecodableRow("args are not an object")
    params = decode_field("params", args.get("params"))
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise UndecodableRow("params must decode to an object")
    invoke = Invoke(
        invoke_id=fields.string(args, "invoke_id"),
        type=fields.string(args, "type"),
        src=fields.optional_string(args, "src"),
        params=params,
        content=decode_field("content", args.get("content")),
        autoforward=fields.boolean(args, "autoforward"),
        state_index=fields.integer(args, "state_index"),
        invoke_index=fields.integer(args, "invoke_index"),
        caller_context=decode_field("caller_context", args.get("caller_context")),
        macrostep=fields.integer(args, "macrostep"),
        microstep=fields.integer(args, "microstep"),
        round=fields.integer(args, "round"),
    )
    return InvocationRow(
        fields.string(args, "scope"), invoke.invoke_id, fields.string(args, "handler"), invoke
    )


def for_child_start(
    parent_args: dict[str, Any],
    index: int,
    count: int,
    policy: str,
    item: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A child start job's args: the parent's, verbatim, plus the child's position and its
    item (already in its stored form, ``_opaque.encode_field``)."""
    if not 0 <= index < count or policy not in POLICIES:
        raise FanOutError(f"invalid child position {index}/{count} or policy {policy!r}")
    return {**parent_args, "index": index, "child_count": count, "policy": policy, "item": item}


def child_position(args: Any) -> tuple[int, int, str]:
    """``(index, count, policy)`` of a child start job; ``UndecodableRow`` if invalid."""
    if not isinstance(args, dict):
        raise UndecodableRow("args are not an object")
    index, count = fields.integer(args, "index"), fields.integer(args, "child_count")
    if index >= count:
        raise UndecodableRow(f"index {index} is outside 0..{count - 1}")
    policy = args.get("policy", "all")
    if policy not in POLICIES:
        raise UndecodableRow(f"policy must be one of {POLICIES}, found {brief(policy)}")
    return index, count, policy


def child_item(args: Any) -> tuple[bool, Any]:
    """``(present, item)`` of a child start job: its decoded item, if the row has one.

    Raises ``UndecodableRow`` (corrupt) or ``CodecFailed`` (retry), as ``decode`` does.
    """
    if not isinstance(args, dict) or "item" not in args:
        return False, None
    return True, decode_field("item", args["item"])
