"""The ECMAScript datamodel: chart code runs in a sandboxed QuickJS engine (ADR 22).

Selected by ``<scxml datamodel="ecmascript">``; needs the ``statifier[ecmascript]`` extra
(the ``quickjs-ng`` engine and the ``tree-sitter`` JavaScript parser). Every chart instance
(a live session, a durable execution's step, a virtual run) runs in an engine of its own:
its own context and heap limit, no host objects and no I/O, the clock (``Date``,
``performance``), ``Math.random``, ``WeakRef``, ``Proxy`` and shared memory removed, every
built-in frozen, each call under CPU-time, heap and stack limits.

The variables live in the engine for the whole macrostep, and between the steps of a live
session; object identity holds (``p = o`` makes one object), and a position stores shared
and cyclic objects once. A position's datamodel is the stored form of ADR 22: plain data is
itself, anything else is a tag; data from outside (events, parameters, answers, operators'
changes, stored positions) is never revived as code, and the only functions a position
brings back are the chart's own function literals. Host functions (ADR 9) are callable.

A state's ``datamodel`` is a :class:`VariablesView`: every variable reads as plain JSON
data (``p`` and ``o`` as equal copies, a cycle as :data:`CIRCULAR`: :mod:`.plain`), while
positions keep the stored form (``statifier.datamodel.stored_variables``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from statifier.datamodel.base import Expression, Location, Script, Value
from statifier.datamodel.ecmascript._instance import checker, load_quickjs
from statifier.datamodel.ecmascript.analysis import load_parser
from statifier.datamodel.ecmascript.compiled import (
    compile_expression,
    compile_location,
    compile_script,
    is_identifier,
)
from statifier.datamodel.ecmascript.limits import DEFAULT_LIMITS, Limits
from statifier.datamodel.ecmascript.plain import CIRCULAR, TRUNCATED
from statifier.datamodel.ecmascript.stored import stored_form
from statifier.datamodel.ecmascript.variables import Variables, new_variables
from statifier.datamodel.ecmascript.view import VariablesView, loaded_view
from statifier.datamodel.failing import FailingExpression, FailingLocation, FailingScript
from statifier.datamodel.python import parse_inline_content as _parse_inline_content

if TYPE_CHECKING:
    from statifier.datamodel.host import HostFunctions

__all__ = [
    "CIRCULAR",
    "DEFAULT_LIMITS",
    "TRUNCATED",
    "EcmascriptDatamodel",
    "Limits",
    "Variables",
    "VariablesView",
    "compile_expression",
    "compile_location",
    "compile_script",
    "ecmascript_datamodel",
    "is_identifier",
    "stored_form",
]


@dataclass(frozen=True, slots=True)
class EcmascriptDatamodel:
    """The :class:`~statifier.datamodel.Datamodel` for ``datamodel="ecmascript"``."""

    name: str = "ecmascript"
    syntax_errors_at_runtime: bool = True
    supports_host_functions: bool = True

    @property
    def builtin_names(self) -> frozenset[str]:
        """The sandbox's built-in globals (``Math``, ``JSON``, ``In``...)."""
        return checker().globals

    @property
    def variables(self) -> Callable[..., Any]:
        """The variables of a call live in the chart instance's engine (ADR 22)."""
        return new_variables

    def compile_expression(self, source: str, functions: HostFunctions | None = None) -> Expression:
        """Compile an ECMAScript expression (it may call ``functions``)."""
        return compile_expression(source, functions)

    def compile_location(self, source: str, functions: HostFunctions | None = None) -> Location:
        """Compile an ECMAScript left-hand-side expression."""
        return compile_location(source, functions)

    def compile_script(self, source: str, functions: HostFunctions | None = None) -> Script:
        """Compile an ECMAScript program."""
        return compile_script(source, functions)

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

    def stored_form(self, value: Value) -> Value:
        """The stored form of plain data (``stored_form``): what an operator sets."""
        return stored_form(value)

    state_variables = staticmethod(loaded_view)
    """A state's variables from their stored form: plain values to read (the view itself,
    not a method around it: every position read calls it)."""


_DATAMODEL: Final = EcmascriptDatamodel()


def ecmascript_datamodel() -> EcmascriptDatamodel:
    """The ECMAScript datamodel; raises ``DatamodelUnavailable`` without the extra."""
    load_quickjs()
    load_parser()
    return _DATAMODEL
