"""Expressions of a built chart: text in the chart's datamodel, or calls of host functions.

A chart stays data: a condition is never a Python callable. ``call(is_fraud, "amount")``
writes ``is_fraud(amount)``, a call of the host function registered under that name when
the chart is compiled (``functions=``, ADR 9); only the name goes into the chart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class HostCall:
    """A call of a registered host function, as an expression: ``name(arg, key=arg)``.

    Made by ``call()``; ``str()`` is its source text.
    """

    function: str
    args: tuple[Expr, ...]
    keywords: tuple[tuple[str, Expr], ...]

    def __str__(self) -> str:
        parts = [str(arg) for arg in self.args]
        parts += [f"{key}={value}" for key, value in self.keywords]
        return f"{self.function}({', '.join(parts)})"


type Expr = str | HostCall
"""An expression: its source text in the chart's datamodel, or a ``HostCall``."""


def call(function: str | Callable[..., Any], /, *args: Expr, **keywords: Expr) -> HostCall:
    """A call of the host function ``function`` (a name, or the function itself, whose
    ``__name__`` is the name it is registered under) with expressions as arguments:
    ``call(is_fraud, "_event.data['amount']", country="'FR'")``.

    The name is checked when the chart is compiled with its ``functions``: a call of a name
    that is not registered is an error at this line.
    """
    name = function if isinstance(function, str) else getattr(function, "__name__", repr(function))
    return HostCall(name, args, tuple(keywords.items()))


def source(expr: Expr | None) -> str | None:
    """The source text of an expression (None stays None)."""
    return None if expr is None else str(expr)


def words(value: str | Sequence[str] | None) -> str | None:
    """An attribute holding a list of names (events, targets, a namelist): a string as it
    is, a sequence joined by spaces."""
    if value is None or isinstance(value, str):
        return value
    return " ".join(value)
