"""The host's plug-ins that job rows name, typed: the protocols, and resolving them.

A job row names its delivery (timer or invocation), its child starter, its invoke
handler and the codec of its opaque fields by import path (``"myapp.timers:Delivery"``);
the process that runs the job resolves them then. Each resolver here returns an object
checked against its protocol (a ``runtime_checkable`` ``isinstance`` plus every method
callable) or raises :class:`ResolutionError`, so the workers handle typed objects, never
``Any``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, Protocol, cast, runtime_checkable

from statifier.core.effects import Invoke

from ._errors import ResolutionError
from ._handler import InvokeHandler
from ._resolve import resolve
from .delivery import InvokeDelivery, TimerDelivery


@runtime_checkable
class OpaqueCodec(Protocol):
    """Transforms the bytes of opaque fields (encrypt on encode, decrypt on decode).

    ``decode(encode(b)) == b`` must hold on every node for as long as a row can live;
    ``encode`` may be nondeterministic (a random nonce). Dedup and cancel never read
    opaque fields, so a nondeterministic codec is fine.
    """

    def encode(self, data: bytes) -> bytes:
        """Encode plain bytes for storage."""

    def decode(self, data: bytes) -> bytes:
        """Decode stored bytes back to the plain bytes."""


@runtime_checkable
class ChildStarter(Protocol):
    """Creates child ``index`` of ``count`` for an invocation; idempotent per index.

    ``opts`` carries ``policy`` (``"all"`` or ``"first_error"``) and ``item`` (the
    fan-out's item for this index; absent on start jobs stored before items travelled);
    ignore keys you do not know. Raising (or returning an exception) makes the start job
    retry.
    """

    def start_child(
        self, parent_scope: str, invoke: Invoke, index: int, count: int, opts: dict[str, Any]
    ) -> Awaitable[Exception | None] | Exception | None:
        """Make sure the child exists."""


def _conforms(target: object, *methods: str) -> bool:
    return all(callable(getattr(target, name, None)) for name in methods)


def timer_delivery(path: str) -> TimerDelivery:
    """The timer delivery at ``path`` (a class is instantiated)."""
    target = resolve(path)
    if isinstance(target, TimerDelivery) and _conforms(target, "deliver"):
        return target
    raise ResolutionError(f"{path!r} does not implement deliver")


def invoke_delivery(path: str) -> InvokeDelivery:
    """The invocation delivery at ``path`` (a class is instantiated)."""
    target = resolve(path)
    if isinstance(target, InvokeDelivery) and _conforms(target, "deliver", "deliver_failure"):
        return target
    missing = [name for name in ("deliver", "deliver_failure") if not _conforms(target, name)]
    raise ResolutionError(f"{path!r} does not implement {', '.join(missing)}")


def child_starter(path: str) -> ChildStarter:
    """The child starter at ``path`` (a class is instantiated)."""
    target = resolve(path)
    if isinstance(target, ChildStarter) and _conforms(target, "start_child"):
        return target
    raise ResolutionError(f"{path!r} does not implement start_child")


def opaque_codec(path: str) -> OpaqueCodec:
    """The opaque codec at ``path`` (a class is instantiated)."""
    target = resolve(path)
    if isinstance(target, OpaqueCodec) and _conforms(target, "encode", "decode"):
        return target
    raise ResolutionError(f"{path!r} does not implement encode and decode")


async def settle[T](value: T | Awaitable[T]) -> T:
    """The value a plug-in answered, awaited if the plug-in is async."""
    if inspect.isawaitable(value):
        return cast(T, await value)
    return value


def invoke_handler(path: str) -> InvokeHandler:
    """The ``InvokeHandler`` at ``path`` (its class, instantiated)."""
    target = resolve(path)
    if isinstance(target, InvokeHandler):
        return target
    raise ResolutionError(f"{path!r} is not an InvokeHandler")
