"""What one write into a datamodel reports, for the checks that admit or refuse it.

Below both the datamodel protocols (``datamodel.base``) and the macrostep budget
(``statifier.budget``, whose ``admit`` hook receives a :class:`WriteResult`), so neither
has to import the other's module to name it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from statifier._slots import builder
from statifier.values import Value

type Admit = Callable[[WriteResult], None]
"""Callback that checks a write before it is applied; it raises to refuse it."""

PathKey = str | int
"""One step of a written path: a dict key or a (non-negative) list index."""


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The outcome of one write.

    ``root_value`` is the new value of variable ``root``; ``path`` leads from the root to the
    written element (empty when the variable itself was assigned); ``prior`` is the value
    previously at that path, or ``None`` if there was none; ``value`` is the value written
    at the path (``root_value`` when the path is empty; a datamodel that does not say
    leaves it ``None`` and the whole root is measured).
    """

    root: str
    root_value: Value
    path: tuple[PathKey, ...]
    prior: Value
    value: Value = field(default=None, compare=False)


_WriteResultBuilder = builder(WriteResult)


def write_result(
    root: str, root_value: Value, path: tuple[PathKey, ...], prior: Value, value: Value
) -> WriteResult:
    """``WriteResult(root, root_value, path, prior, value)``, built fast (a write per
    ``<assign>``)."""
    result = _WriteResultBuilder()
    result.root = root
    result.root_value = root_value
    result.path = path
    result.prior = prior
    result.value = value
    result.__class__ = WriteResult
    built: WriteResult = result
    return built
