"""What the compilers of calls and of comprehensions need of the expression compiler.

``calls`` and ``comprehensions`` compile their sub-expressions through the compiler that
called them; they see it through :class:`NodeCompiler`, so the compiler imports them and
they never import it back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

from statifier.datamodel.base import ExpressionSyntaxError
from statifier.datamodel.python.context import Evaluator
from statifier.datamodel.python.parsing import Located
from statifier.datamodel.python.values import Value


class HostCalls(Protocol):
    """What the compiler needs of a host-function registry (``statifier.datamodel.host``)."""

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is registered."""

    def __iter__(self) -> Iterator[str]:
        """The registered names."""

    def call(self, name: str, args: list[Value], kwargs: Mapping[str, Value]) -> Value:
        """Call a registered function with checked JSON-like values."""


class NodeCompiler(Protocol):
    """The expression compiler, as the compilers of its sub-forms use it."""

    functions: HostCalls | None
    """The host functions a call may name (None: none registered)."""

    def error(self, message: str, node: Located | None) -> ExpressionSyntaxError:
        """A compile error located at ``node``."""

    def check_name(self, name: str, node: Located) -> None:
        """Refuse a reserved variable name."""

    def check_attribute_name(self, name: str, node: Located) -> None:
        """Refuse a private attribute name."""

    def local_scope(self, names: list[str]) -> AbstractContextManager[list[int]]:
        """Bring comprehension variables into scope, yielding the slot of each."""

    def compile(self, node: ast.expr) -> Evaluator:
        """Compile one expression node."""
