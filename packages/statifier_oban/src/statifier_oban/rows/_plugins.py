"""The host's plug-ins that job rows name, typed: the protocols, and resolving them.

A job row names its delivery (timer or invocation), its child starter, its invoke
handler and the codec of its opaque fields by path (``"myapp.timers:Delivery"``); the
process that runs the job resolves them then, only among what it registered
(``_resolve``, ADR 13). Each resolver here checks the class against its protocol (every
method callable with the arguments the worker will pass, then ``issubclass``) *before*
building an instance, and returns an object checked against the protocol, or raises
:class:`ResolutionError`; so the workers handle typed objects, never ``Any``, a row
cannot make a worker construct anything else, and a registered plug-in of another kind
(an invoke delivery named on a timer row: both have a ``deliver``) is refused before it
is called, not retried on the ``TypeError`` of a call it cannot take.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable
from typing import Any, Final, Protocol, cast, runtime_checkable

from statifier.core.effects import Invoke

from .._errors import ResolutionError
from ..delivery import InvokeDelivery, Snoozed, TimerDelivery
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
    retry; returning ``Snoozed(seconds)`` snoozes it, keeping its attempts (a wait with no
    known end, such as a parked parent).
    """

    def start_child(
        self, parent_scope: str, invoke: Invoke, index: int, count: int, opts: dict[str, Any]
    ) -> Awaitable[Exception | Snoozed | None] | Exception | Snoozed | None:
        """Make sure the child exists."""


type _Methods = dict[str, tuple[int, tuple[str, ...]]]
"""A protocol's methods as the workers call them: name -> (positional arguments, keyword
arguments passed when the method declares them)."""


def _conforms(target: object, name: str) -> bool:
    return callable(getattr(target, name, None))


def _takes(target: object, name: str, positional: int, keywords: tuple[str, ...]) -> bool:
    """Whether ``target``'s method ``name`` (on an instance of it, for a class) accepts
    ``positional`` positional arguments (plus the ``keywords`` it declares)."""
    if isinstance(target, type):
        return _class_takes(target, name, positional, keywords)
    return _accepts(getattr(target, name), positional, keywords)


@functools.lru_cache(maxsize=256)
def _class_takes(target: type, name: str, positional: int, keywords: tuple[str, ...]) -> bool:
    """``_takes`` for a class, remembered: every job resolves its plug-in again."""
    member = inspect.getattr_static(target, name)
    if isinstance(member, staticmethod):
        return _accepts(member.__func__, positional, keywords)
    if isinstance(member, classmethod) or inspect.isfunction(member):
        return _accepts(getattr(member, "__func__", member), positional + 1, keywords)
    return _accepts(getattr(target, name), positional, keywords)


def _accepts(function: Any, positional: int, keywords: tuple[str, ...]) -> bool:
    """Whether ``function`` can be called with ``positional`` arguments (and ``keywords``
    it declares)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # no signature to read (a builtin): called as it is
        return True
    declared = {key: None for key in keywords if key in signature.parameters}
    try:
        signature.bind(*([None] * positional), **declared)
    except TypeError:
        return False
    return True


def _build(path: str, protocol: type[Any], methods: _Methods, what: str) -> object:
    """The plug-in ``path`` names, checked against ``protocol`` before anything is built.

    A class is checked (its methods and what they take, then ``issubclass``) before it is
    instantiated with no arguments, so a class that is not the plug-in is never
    constructed; a registered instance is checked as it is. Callers narrow the answer
    with ``isinstance``.
    """
    target = lookup(path)
    if isinstance(target, type) and (target, protocol) in _fit:
        # Checked before; only what it builds is new (every job row resolves again).
        return target()
    missing = [name for name in methods if not _conforms(target, name)]
    if missing:
        raise ResolutionError(f"{path!r} does not implement {', '.join(missing)}")
    unfit = [
        name
        for name, (positional, keywords) in methods.items()
        if not _takes(target, name, positional, keywords)
    ]
    if unfit:
        raise ResolutionError(
            f"{path!r} is not a {what}: its {', '.join(unfit)} cannot take the "
            f"arguments a {what} is given"
        )
    if isinstance(target, type):
        if not issubclass(target, protocol):
            raise ResolutionError(f"{path!r} is not a {what}")
        if len(_fit) >= MAX_CHECKED_CLASSES:
            _fit.clear()
        _fit.add((target, protocol))
        built: object = target()
        return built
    return target


MAX_CHECKED_CLASSES: Final = 256
"""Plug-in classes ``_build`` remembers as checked against a protocol; when full, it
forgets them all and starts again."""

_fit: set[tuple[type, type]] = set()
"""``(class, protocol)`` pairs ``_build`` checked: a class's methods do not change while a
worker runs (a reloaded module's class is another class)."""


def _refused(path: str, what: str) -> ResolutionError:
    return ResolutionError(f"{path!r} is not a {what}")


def timer_delivery(path: str) -> TimerDelivery:
    """The timer delivery at ``path`` (a class is instantiated once checked)."""
    built = _build(path, TimerDelivery, {"deliver": (2, ())}, "timer delivery")
    if isinstance(built, TimerDelivery):
        return built
    raise _refused(path, "timer delivery")


def invoke_delivery(path: str) -> InvokeDelivery:
    """The invocation delivery at ``path`` (a class is instantiated once checked)."""
    methods: _Methods = {"deliver": (4, ()), "deliver_failure": (6, ())}
    built = _build(path, InvokeDelivery, methods, "invoke delivery")
    if isinstance(built, InvokeDelivery):
        return built
    raise _refused(path, "invoke delivery")


def child_starter(path: str) -> ChildStarter:
    """The child starter at ``path`` (a class is instantiated once checked)."""
    built = _build(path, ChildStarter, {"start_child": (5, ())}, "child starter")
    if isinstance(built, ChildStarter):
        return built
    raise _refused(path, "child starter")


def opaque_codec(path: str) -> OpaqueCodec:
    """The opaque codec at ``path`` (a class is instantiated once checked)."""
    methods: _Methods = {"encode": (1, ()), "decode": (1, ("max_size",))}
    built = _build(path, OpaqueCodec, methods, "opaque codec")
    if isinstance(built, OpaqueCodec):
        return built
    raise _refused(path, "opaque codec")


async def settle[T](value: T | Awaitable[T]) -> T:
    """The value a plug-in answered, awaited if the plug-in is async."""
    if inspect.isawaitable(value):
        return cast(T, await value)
    return value
