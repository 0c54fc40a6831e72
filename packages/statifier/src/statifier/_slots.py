"""Slot setters: building frozen, slotted dataclass instances fast on hot paths.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__``, about three times what storing through the slot descriptor costs.
A hot path that builds many instances of one such class (an effect per write, a write
result per assignment) takes the descriptors' setters once with ``setters`` and fills a
bare instance (``object.__new__(cls)``) itself, setting every field. The result is an
ordinary instance of the dataclass: equal, hashable and frozen as any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Setter = Callable[[Any, Any], None]
"""Stores a value into one slot of an instance, bypassing ``__setattr__``."""


def setters(cls: type, *names: str) -> tuple[Setter, ...]:
    """The slot setters of ``cls`` for ``names``, in order (inherited slots included)."""
    found: list[Setter] = []
    for name in names:
        descriptor = getattr(cls, name)
        found.append(descriptor.__set__)
    return tuple(found)
