"""Compiled ECMAScript expressions, locations and scripts (ADR 22).

Each is an immutable value holding its source and what :mod:`.analysis` read in it (whether
it can write, the ``In()`` ids it names, its function literals...). Sources are checked for
syntax when the chart is compiled (see :func:`compile_expression`); an instance compiles a
source into a function the first time it runs it. They run against the call's variables
(:class:`~.variables.Variables`), in that chart instance's own engine.

Given a plain ``dict`` instead (a host evaluating an expression on its own), a source runs
in an engine made for that one evaluation, with the dict's values as data both ways.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Final

from statifier.budget import Budget
from statifier.datamodel.base import (
    Admit,
    Environment,
    EvaluationError,
    ExpressionSyntaxError,
    InState,
    Value,
    Variables,
    Writable,
    WriteResult,
)
from statifier.datamodel.ecmascript._instance import Instance, Setup, checker
from statifier.datamodel.ecmascript.analysis import Analysis, Kind, analyse
from statifier.datamodel.ecmascript.charges import NO_LIMIT
from statifier.datamodel.ecmascript.limits import MAX_SCRIPT_SOURCE_LENGTH, MAX_SOURCE_LENGTH
from statifier.datamodel.ecmascript.variables import SYSTEM_VARIABLES
from statifier.datamodel.ecmascript.variables import Variables as Store
from statifier.datamodel.host import HostFunctions

_RESERVED_TEXT: Final = """
    break case catch class const continue debugger default delete do else enum export extends
    false finally for function if import in instanceof new null return super switch this throw
    true try typeof var void while with yield let static implements interface package private
    protected public await arguments eval undefined NaN Infinity
"""
RESERVED_WORDS: Final = frozenset(_RESERVED_TEXT.split())
"""Words that cannot name a chart variable."""


def is_identifier(name: str) -> bool:
    """Whether ``name`` can name a chart variable: an identifier, not a reserved word."""
    if not name or name in RESERVED_WORDS:
        return False
    first, rest = name[0], name[1:]
    if not (first in "$_" or first.isalpha()):
        return False
    return all(c in "$_" or c.isalnum() for c in rest)


@dataclass(frozen=True, slots=True)
class Compiled:
    """What every compiled ECMAScript source holds."""

    source: str
    analysis: Analysis = field(compare=False, repr=False)
    functions: HostFunctions | None = field(default=None, compare=False, repr=False)
    """The host functions the chart was compiled with (ADR 9)."""

    @property
    def names_read(self) -> frozenset[str]:
        """The free names the source reads that the chart must define (built-in globals
        and host functions aside), for ``statifier check``."""
        return self.analysis.names_read - checker().globals - frozenset(self.functions or ())


@dataclass(frozen=True, slots=True)
class Expression(Compiled):
    """A compiled ECMAScript expression."""

    def evaluate(
        self, variables: Variables, in_state: InState, budget: Budget | None = None
    ) -> Value:
        """Evaluate; raises :class:`~statifier.datamodel.EvaluationError` and nothing else.

        The value comes back as a copy (JSON-like data); what the expression changes stays
        in the engine (or, for a plain ``dict``, is written back into it as data).
        """
        if type(variables) is Store:
            return variables.evaluate(self, in_state, budget)
        with _Detached(self, variables) as store:
            return store.variables.evaluate(self, in_state, budget)


@dataclass(frozen=True, slots=True)
class Location(Compiled):
    """A compiled ECMAScript location: any left-hand-side expression (``a``, ``a.b[0]``)."""

    @property
    def root(self) -> str:
        """The variable the location writes into ("" when it is not a member chain)."""
        return self.analysis.root

    @property
    def plain(self) -> bool:
        """Never: an ECMAScript write happens in the engine, where the variables are."""
        return False

    def write(
        self, variables: Variables, value: Value, in_state: InState, budget: Budget | None = None
    ) -> WriteResult:
        """Store the data ``value`` there (the datamodel cap admits it first)."""
        if type(variables) is Store:
            variables.assign(self, None, value, self.root, in_state, budget)
            return WriteResult(self.root, None, (), None, value)
        with _Detached(self, variables) as store:
            store.variables.assign(self, None, value, self.root, in_state, budget)
            return WriteResult(self.root, store.exported(self.root), (), None, value)


@dataclass(frozen=True, slots=True)
class Script(Compiled):
    """A compiled ECMAScript program, run in the global scope (``var`` and function
    declarations create chart variables)."""

    @property
    def names_assigned(self) -> frozenset[str]:
        """The names it may make chart variables of (for ``statifier check``)."""
        return self.analysis.names_assigned

    @property
    def names_local(self) -> frozenset[str]:
        """The names it declares for itself alone (top-level ``let``, ``const``, ``class``)."""
        return self.analysis.names_local

    def run(
        self,
        env: Environment,
        in_state: InState,
        writable: Writable,
        budget: Budget | None = None,
        admit: Admit | None = None,
    ) -> list[WriteResult]:
        """Run the program; all-or-nothing: a failure (or a write the datamodel cap refuses)
        changes no variable. Returns one write per variable whose stored form changed."""
        if type(env) is Store:
            return env.run_script(self, in_state, writable, budget)
        with _Detached(self, env) as store:
            writes = store.variables.run_script(self, in_state, writable, budget)
            return [WriteResult(w.root, store.exported(w.root), (), None) for w in writes]


class _Detached:
    """An engine made for one evaluation against a plain ``dict`` (values are data)."""

    def __init__(self, compiled: Compiled, variables: Mapping[str, Value]) -> None:
        self.compiled = compiled
        self.mapping = variables
        setup = Setup(dict(compiled.analysis.functions), compiled.functions or HostFunctions())
        self.variables = Store(Instance(setup, NO_LIMIT), set())

    def __enter__(self) -> _Detached:
        store = self.variables
        for name, value in self.mapping.items():
            if name in SYSTEM_VARIABLES:
                store.set_system(name, value)
            else:
                store.bind(name, value, None)
        self.before = {name: store.stored().get(name) for name in store.names}
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is not None:
            return
        mapping = self.mapping
        store = self.variables
        after = store.stored()
        for name in store.names:
            if after.get(name) != self.before.get(name):
                if not isinstance(mapping, MutableMapping):
                    raise EvaluationError(
                        "the expression changes variables, which are read-only here"
                    )
                mapping[name] = store.export(name)

    def exported(self, name: str) -> Value:
        """A variable's value as data."""
        return self.variables.export(name)


def _check(kind: Kind, source: str, limit: int) -> Analysis:
    if len(source) > limit:
        raise ExpressionSyntaxError(f"{kind} is longer than {limit} characters", source)
    if "\x00" in source:
        raise ExpressionSyntaxError(f"{kind} contains a NUL character", source)
    problem = checker().syntax_error(kind, source)
    if problem is not None:
        raise ExpressionSyntaxError(problem, source)
    return analyse(kind, source)


def compile_expression(source: str, functions: HostFunctions | None = None) -> Expression:
    """Compile an expression or raise :class:`~statifier.datamodel.ExpressionSyntaxError`."""
    return Expression(source, _check("expression", source, MAX_SOURCE_LENGTH), functions)


def compile_location(source: str, functions: HostFunctions | None = None) -> Location:
    """Compile a location or raise :class:`~statifier.datamodel.ExpressionSyntaxError`."""
    return Location(source, _check("location", source, MAX_SOURCE_LENGTH), functions)


def compile_script(source: str, functions: HostFunctions | None = None) -> Script:
    """Compile a script or raise :class:`~statifier.datamodel.ExpressionSyntaxError`."""
    return Script(source, _check("script", source, MAX_SCRIPT_SOURCE_LENGTH), functions)
