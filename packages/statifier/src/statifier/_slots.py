"""Builders: making frozen, slotted dataclass instances fast on hot paths; and bare
subclasses, making instances of a slotted class without its ``__init__``.

A frozen dataclass's generated ``__init__`` stores each field through
``object.__setattr__``, and even a slot descriptor's ``__set__`` is a slow call from
Python (a wrapper that takes a tuple of arguments). A hot path that makes many instances
of one such class (an effect per write, a write result per assignment) fills a
*builder* instead: a subclass that adds no slots, so it has exactly the same layout,
whose instances take plain attribute stores; then it gives the filled instance its real
class (``obj.__class__ = cls``, which CPython allows between classes of one layout). The
result is an ordinary instance of the dataclass: equal, hashable and frozen as any other.
Every builder sets every field; tests compare each with the dataclass constructor.

A subclass rather than a sibling with the same ``__slots__``: CPython checks a sibling's
layout by comparing the two classes' slot names one by one at every ``__class__``
assignment, and a subclass that adds none by following its base (about 25 ns saved an
effect, 55 ns a ``MachineState``).

``statifier-persistence`` and ``statifier-oban`` build their per-step records this way
too (an execution row, a step's parts, a decoded timer): they are released with
statifier under one version, so this private module is theirs to use.
"""

from __future__ import annotations

from typing import Any


def builder(cls: type) -> Any:
    """A mutable subclass of ``cls`` (a slotted dataclass) laid out exactly as it: make a
    bare instance (call the builder with no argument), fill every field of it, then
    assign ``__class__ = cls``."""
    namespace = {
        "__slots__": (),
        # Both, so that CPython stores attributes with its generic C setter: a class that
        # keeps the frozen ``__delattr__`` falls back to a slow Python-level dispatch.
        "__setattr__": object.__setattr__,
        "__delattr__": object.__delattr__,
        # Calling the builder then makes a bare instance without a Python call (the
        # class's generated ``__init__`` would want the fields): cheaper than
        # ``object.__new__``.
        "__init__": object.__init__,
    }
    return type(f"{cls.__name__}Builder", (cls,), namespace)


def bare(cls: type) -> Any:
    """A subclass of the slotted class ``cls`` (no slots of its own) whose instances are
    made by calling it with no argument, without ``cls.__init__``: no Python call (and
    cheaper than ``object.__new__``), for a hot path that fills every slot itself. The
    instances are instances of ``cls``; only their exact type differs, so only objects
    that never leave the code that makes them are made so."""
    namespace = {"__slots__": (), "__init__": object.__init__}
    return type(f"Bare{cls.__name__}", (cls,), namespace)
