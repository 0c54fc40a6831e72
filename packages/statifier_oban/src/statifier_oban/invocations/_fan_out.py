"""Fan-out: one invocation becomes N child starts, one job per index.

The package schedules the starts; it creates no executions. Each start job carries its
item (an opaque field, encoded like the invoke's params) and calls the host's
``ChildStarter`` (named in ``Config.child_starter``) with it, which must be idempotent on
``(parent scope, invoke_id, index)``. Settling the N answers into one ``done.invoke``
belongs to the host's execution store (``statifier_oban.children`` does it for durable
executions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

from psycopg import AsyncConnection
from statifier import instrumentation
from statifier.core.effects import Invoke

from .. import telemetry
from .._config import Config
from .._errors import FanOutError, InvalidScope, OpaqueValueError
from .._names import CHILD_START_WORKER, META_CHILD_STARTER, META_TIMEOUT
from ..rows._opaque import encode_field
from ..rows._traced import carry
from ..store import _statements
from . import _args

Policy = Literal["all", "first_error"]

MAX_ITEM_BYTES: Final = 64 * 1024
"""The largest fan-out item, as stored (its JSON text, or its codec's base64): fan out
over descriptors (ids, ranges), not payloads; every start job holds its item."""


@dataclass(frozen=True, slots=True)
class Refused:
    """The fan-out is refused: the invocation fails with ``fan_out_refused``."""

    reason: str
    count: int | None = None
    cap: int | None = None
    index: int | None = None
    message: str | None = None

    def detail(self) -> str:
        """The human-readable detail delivered with the failure."""
        if self.reason == "cap_exceeded":
            return f"cap_exceeded: {self.count} items exceed max_fan_out {self.cap}"
        if self.index is not None:
            return f"{self.reason}: item {self.index}: {self.message}"
        return self.reason


def policy_of(invoke: Invoke) -> Policy | Refused:
    """The aggregation policy from the invoke's ``on`` parameter (absent: ``all``)."""
    params = invoke.params if isinstance(invoke.params, dict) else {}
    on = params.get("on", "all")
    if on == "all":
        return "all"
    if on == "first_error":
        return "first_error"
    return Refused("invalid_policy")


async def start(
    config: Config,
    parent_args: dict[str, Any],
    invoke: Invoke,
    items: Any,
    max_concurrency: Any = None,
) -> int | Refused:
    """Store one child start job per item; the number stored (0: answer ``[]`` at once).

    Checks, first failure wins: items must be a list (or tuple) no wider than
    ``max_fan_out`` (refused with the count and cap); the policy must be valid (refused);
    ``max_concurrency`` must be None or a positive integer, the invoke queue and the child
    starter must be configured (``FanOutError``: retried); every item must be storable
    (JSON-like, at most ``MAX_ITEM_BYTES`` stored; refused naming the item). A replay
    stores only missing indices.
    """
    if not isinstance(items, list | tuple):
        return Refused("invalid_items")
    count = len(items)
    if count > config.max_fan_out:
        return Refused("cap_exceeded", count, config.max_fan_out)
    policy = policy_of(invoke)
    if isinstance(policy, Refused):
        return policy
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise FanOutError(
            f"max_concurrency must be None or a positive integer: {max_concurrency!r}"
        )
    if config.invoke_queue is None:
        raise FanOutError("invoke_queue is not configured")
    if config.child_starter is None:
        raise FanOutError("child_starter is not configured")
    if count == 0:
        return 0
    meta: dict[str, Any] = {META_CHILD_STARTER: config.child_starter}
    if config.child_start_timeout is not None:
        meta[META_TIMEOUT] = config.child_start_timeout
    tracer = instrumentation.current
    if tracer is not None:
        carry(meta, tracer)
    stored = _stored_items(items, config.opaque_codec)
    if isinstance(stored, Refused):
        return stored
    rows = [
        _statements.jsonb(_args.for_child_start(parent_args, index, count, policy, item))
        for index, item in enumerate(stored)
    ]
    async with _statements.connection(config.oban, None) as db:
        await db.execute(
            _statements.statement(config.oban, "insert_child_starts"),
            {
                "args": rows,
                "meta": _statements.jsonb(meta),
                "queue": config.invoke_queue,
                "channel": _statements.insert_channel(config.oban),
            },
        )
    return count


def _stored_items(items: Any, codec: str | None) -> list[dict[str, str] | None] | Refused:
    """Each item in its stored form, or the refusal naming the first that cannot be."""
    stored: list[dict[str, str] | None] = []
    for index, item in enumerate(items):
        try:
            field = encode_field("item", item, codec)
        except OpaqueValueError as exc:
            return Refused("unstorable_item", index=index, message=str(exc))
        if field is None:
            size = 0
        elif "b64" in field:
            size = len(field["b64"])
        else:
            size = len(field["json"].encode("utf-8"))
        if size > MAX_ITEM_BYTES:
            message = f"{size} bytes stored, over the {MAX_ITEM_BYTES} limit"
            return Refused("item_too_large", index=index, message=message)
        stored.append(field)
    return stored


async def cancel_unstarted(
    config: Config, scope: str, invoke_id: str, *, conn: AsyncConnection[Any] | None = None
) -> int:
    """Cancel the child starts of an invocation whose job has not run yet; the count.

    ``conn``: on the caller's connection (inside its transaction), else the host's pool.
    """
    if not isinstance(scope, str) or not scope:
        raise InvalidScope(f"scope must be a non-empty string, not {scope!r}")
    async with _statements.connection(config.oban, conn) as db:
        count = await _statements.cancel_pending(
            db,
            config.oban,
            worker=CHILD_START_WORKER,
            key="invoke_id",
            scope=scope,
            value=invoke_id,
            reason=f"unstarted children of {invoke_id!r} cancelled",
        )
    telemetry.emit(
        telemetry.INVOKE_UNSTARTED_CANCELLED, count=count, scope=scope, invoke_id=invoke_id
    )
    return count
