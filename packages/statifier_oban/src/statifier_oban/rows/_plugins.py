"""The host's plug-ins that job rows name, typed: the protocols, and resolving them.

A job row names its delivery (timer or invocation), its child starter, its invoke
handler and the codec of its opaque fields by path (``"myapp.timers:Delivery"``); the
process that runs the job resolves them then, only among what it registered
(``_resolve``, ADR 13). Each resolver here checks the class against its protocol (every
method callable, then ``issubclass``) *before* building an instance, and returns an object
checked against the protocol, or raises :class:`ResolutionError`; so the workers handle
typed objects, never ``Any``, and a row cannot make a worker construct anything else.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import Any, Protocol, cast, runtime_checkable

from statifier.core.effects import Invoke

from .._errors import ResolutionError
from ..delivery import InvokeDelivery, TimerDelivery
from ._resolve import lookup


@runtime_checkable
class OpaqueCodec(Protocol):
    """Transforms the bytes of opaque fields (encrypt on encode, decrypt on decode).

    ``decode(encode(b)) == b`` must hold on every node for as long as a row can live;
    ``encode`` may be nondeterministic (a random nonce). Dedup and cancel never read
    opaque fields, so a nondeterministic codec is fine.

    Decoded values are capped (``statifier_oban.MAX_OPAQUE_BYTES``): a larger result makes
    the row undecodable. A codec that expands its input (decompression) should declare a
    keyword parameter ``max_size`` on ``decode``: it is then given the cap and should stop
    before producing more, so a small crafted payload cannot allocate a large buffer first.
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


def _build(path: str, protocol: type[Any], methods: tuple[str, ...], what: str) -> object:
    """The plug-in ``path`` names, checked against ``protocol`` before anything is built.

    A class is checked (its methods, then ``issubclass``) before it is instantiated with
    no arguments, so a class that is not the plug-in is never constructed; a registered
    instance is checked as it is. Callers narrow the answer with ``isinstance``.
    """
    target = lookup(path)
    missing = [name for name in methods if not _conforms(target, name)]
    if missing:
        raise ResolutionError(f"{path!r} does not implement {', '.join(missing)}")
    if isinstance(target, type):
        if not issubclass(target, protocol):
            raise ResolutionError(f"{path!r} is not a {what}")
        built: object = target()
        return built
    return target


def _refused(path: str, what: str) -> ResolutionError:
    return ResolutionError(f"{path!r} is not a {what}")


def timer_delivery(path: str) -> TimerDelivery:
    """The timer delivery at ``path`` (a class is instantiated once checked)."""
    built = _build(path, TimerDelivery, ("deliver",), "timer delivery")
    if isinstance(built, TimerDelivery):
        return built
    raise _refused(path, "timer delivery")


def invoke_delivery(path: str) -> InvokeDelivery:
    """The invocation delivery at ``path`` (a class is instantiated once checked)."""
    built = _build(path, InvokeDelivery, ("deliver", "deliver_failure"), "invoke delivery")
    if isinstance(built, InvokeDelivery):
        return built
    raise _refused(path, "invoke delivery")


def child_starter(path: str) -> ChildStarter:
    """The child starter at ``path`` (a class is instantiated once checked)."""
    built = _build(path, ChildStarter, ("start_child",), "child starter")
    if isinstance(built, ChildStarter):
        return built
    raise _refused(path, "child starter")


def opaque_codec(path: str) -> OpaqueCodec:
    """The opaque codec at ``path`` (a class is instantiated once checked)."""
    built = _build(path, OpaqueCodec, ("encode", "decode"), "opaque codec")
    if isinstance(built, OpaqueCodec):
        return built
    raise _refused(path, "opaque codec")


async def settle[T](value: T | Awaitable[T]) -> T:
    """The value a plug-in answered, awaited if the plug-in is async."""
    if inspect.isawaitable(value):
        return cast(T, await value)
    return value
