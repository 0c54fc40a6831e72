"""The ECMAScript datamodel: chart code runs in a sandboxed QuickJS engine (ADR 10).

Selected by ``<scxml datamodel="ecmascript">``; needs the ``statifier[ecmascript]`` extra
(the ``quickjs-ng`` wheel). The sandbox has no host objects and no I/O; the clock
(``Date``, ``performance``), ``Math.random``, ``WeakRef`` and shared memory are removed;
every built-in is frozen; each call runs under CPU-time, heap and stack limits.

Variables are stored as JSON-like values (so positions stay JSON): a variable holding
``undefined`` or ``null`` is stored as ``None`` and reads back as ``undefined``; a
function is stored as ``{"$function": source}`` and rebuilt from its source in the global
scope; a value JSON cannot hold (a cycle, a BigInt) makes the evaluation that produced it
fail with ``error.execution``. See ADR 10 for every rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from statifier.datamodel.base import Expression, Location, Script, Value
from statifier.datamodel.ecmascript._engine import load_quickjs
from statifier.datamodel.ecmascript.compiled import (
    compile_expression,
    compile_location,
    compile_script,
    is_identifier,
)
from statifier.datamodel.ecmascript.limits import DEFAULT_LIMITS, Limits
from statifier.datamodel.failing import FailingExpression, FailingLocation, FailingScript
from statifier.datamodel.python import parse_inline_content as _parse_inline_content

if TYPE_CHECKING:
    from statifier.datamodel.host import HostFunctions

__all__ = [
    "DEFAULT_LIMITS",
    "EcmascriptDatamodel",
    "Limits",
    "compile_expression",
    "compile_location",
    "compile_script",
    "ecmascript_datamodel",
    "is_identifier",
]


@dataclass(frozen=True, slots=True)
class EcmascriptDatamodel:
    """The :class:`~statifier.datamodel.Datamodel` for ``datamodel="ecmascript"``."""

    name: str = "ecmascript"
    syntax_errors_at_runtime: bool = True
    supports_host_functions: bool = False
    """Not yet: the engine cannot call back into Python under its time limit (ADR 10)."""

    def compile_expression(self, source: str, functions: HostFunctions | None = None) -> Expression:
        """Compile an ECMAScript expression (``functions`` are refused by the compiler)."""
        return compile_expression(source)

    def compile_location(self, source: str, functions: HostFunctions | None = None) -> Location:
        """Compile an ECMAScript left-hand-side expression."""
        return compile_location(source)

    def compile_script(self, source: str, functions: HostFunctions | None = None) -> Script:
        """Compile an ECMAScript program."""
        return compile_script(source)

    def failing_expression(self, source: str, reason: str) -> Expression:
        """An expression that raises ``reason`` (an unparsable source)."""
        return FailingExpression(source, reason)

    def failing_location(self, source: str, reason: str) -> Location:
        """A location that raises ``reason`` (an unparsable source)."""
        return FailingLocation(source, reason)

    def failing_script(self, source: str, reason: str) -> Script:
        """A script that raises ``reason`` (an unparsable source)."""
        return FailingScript(source, reason)

    def is_identifier(self, name: str) -> bool:
        """An ECMAScript identifier that is not a reserved word."""
        return is_identifier(name)

    def parse_inline_content(self, text: str) -> Value:
        """JSON becomes the value it denotes; other text is whitespace-normalised (B.2)."""
        return _parse_inline_content(text)


_DATAMODEL: Final = EcmascriptDatamodel()


def ecmascript_datamodel() -> EcmascriptDatamodel:
    """The ECMAScript datamodel; raises ``DatamodelUnavailable`` without the extra."""
    load_quickjs()
    return _DATAMODEL
