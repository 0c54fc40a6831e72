"""Compiled ECMAScript expressions, locations and scripts.

Each is an immutable value holding its source; the thread's :class:`~._engine.Engine`
compiles it into a function once per engine and runs it. Sources are checked for syntax
when the chart is compiled (see :func:`compile_expression`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from time import perf_counter_ns
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
from statifier.datamodel.ecmascript._engine import engine
from statifier.datamodel.ecmascript.limits import MAX_SCRIPT_SOURCE_LENGTH, MAX_SOURCE_LENGTH

_RESERVED_TEXT: Final = """
    break case catch class const continue debugger default delete do else enum export extends
    false finally for function if import in instanceof new null return super switch this throw
    true try typeof var void while with yield let static implements interface package private
    protected public await arguments eval undefined NaN Infinity
"""
RESERVED_WORDS: Final = frozenset(_RESERVED_TEXT.split())
"""Words that cannot name a chart variable."""

_ROOT: Final = re.compile(r"\s*([A-Za-z_$][A-Za-z0-9_$]*)")
_IN_CALL: Final = re.compile(r"""\bIn\s*\(\s*(?:'([^'\\]*)'|"([^"\\]*)")\s*\)""")
_MAY_MUTATE: Final = re.compile(r"(?<![=!<>])=(?!=)|<<=|>>=|\+\+|--|[(`]|\bnew\b|\bdelete\b")

_NAME: Final = r"[A-Za-z_$][\w$]*"
_NOT_CODE: Final = re.compile(
    r"//[^\n]*|/\*.*?\*/|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"|`(?:[^`\\]|\\.)*`", re.S
)
_DECLARED: Final = re.compile(rf"\b(?:var\s+|function\b\s*\*?\s*)({_NAME})")
_LEXICAL: Final = re.compile(rf"\b(?:let|const)\s+{_NAME}")
_VAR_LIST: Final = re.compile(r"\bvar\s([^;]*)")
_BRACKET_OR_LEXICAL: Final = re.compile(
    rf"([()\[\]{{}}])|(?<![\w$.])(?:let|const|class)\s+({_NAME})"
)
_LISTED: Final = re.compile(rf",\s*({_NAME})")
_ASSIGNED: Final = re.compile(
    rf"(?<![\w$.])({_NAME})\s*(?:\*\*|<<|>>>?|&&|\|\||\?\?|[-+*/%&|^])?=(?![=>])"
    rf"|(?<![\w$.])({_NAME})\s*(?:\+\+|--)|(?:\+\+|--)\s*({_NAME})"
)


def may_have_side_effects(source: str) -> bool:
    """Whether evaluating ``source`` could change a variable.

    Conservative: only sources without assignments, increments, calls (``In('id')`` aside),
    tagged templates, ``new`` and ``delete`` are side-effect free. That is sound because
    every value the engine holds is revived from JSON (no getters, no proxies) and every
    built-in is frozen, so reading properties and comparing values cannot run chart code.
    """
    return _MAY_MUTATE.search(_IN_CALL.sub("true", source)) is not None


def names_assigned(source: str) -> frozenset[str]:
    """The names a script may make chart variables of: ``var`` and function declarations
    and plain assignments (strings and comments aside).

    Over-approximates (a local ``var`` counts too): ``statifier check`` uses it to know what
    the chart defines, where a name too many only hides a warning. ``let``, ``const`` and
    ``class`` declarations do not count: a script runs as eval code, where they stay local.
    """
    code = _LEXICAL.sub(" ", _NOT_CODE.sub(" ", source))
    names = set(_DECLARED.findall(code))
    for declarators in _VAR_LIST.findall(code):
        names.update(_LISTED.findall(declarators))
    for groups in _ASSIGNED.findall(code):
        names.update(name for name in groups if name)
    return frozenset(name for name in names if name not in RESERVED_WORDS)


def names_local(source: str) -> frozenset[str]:
    """The names a script declares with ``let``, ``const`` or ``class`` at its top level.

    A script runs as eval code, where such declarations stay local to the script (only
    ``var`` and function declarations make chart variables): ``statifier check`` warns when
    the chart reads one elsewhere. Nesting is told from brackets outside strings and
    comments (a bracket in a regular expression literal can hide a declaration).
    """
    code = _NOT_CODE.sub(" ", source)
    found: set[str] = set()
    depth = 0
    for match in _BRACKET_OR_LEXICAL.finditer(code):
        bracket = match.group(1)
        if bracket is not None:
            depth += 1 if bracket in "([{" else -1
        elif depth == 0:
            found.add(match.group(2))
    return frozenset(found)


def in_state_ids(source: str) -> tuple[str, ...]:
    """The state ids ``source`` passes to ``In()`` as string literals, in order, once each."""
    found = (a or b for a, b in _IN_CALL.findall(source))
    return tuple(dict.fromkeys(found))


def is_identifier(name: str) -> bool:
    """Whether ``name`` can name a chart variable: an identifier, not a reserved word."""
    if not name or name in RESERVED_WORDS:
        return False
    first, rest = name[0], name[1:]
    if not (first in "$_" or first.isalpha()):
        return False
    return all(c in "$_" or c.isalnum() for c in rest)


@dataclass(frozen=True, slots=True)
class Expression:
    """A compiled ECMAScript expression."""

    source: str
    side_effects: bool = field(default=True, compare=False)
    in_ids: tuple[str, ...] = field(default=(), compare=False)

    def evaluate(
        self, variables: Variables, in_state: InState, budget: Budget | None = None
    ) -> Value:
        """Evaluate; variables the expression changes are written back into ``variables``.

        Raises :class:`~statifier.datamodel.EvaluationError` and nothing else.
        """
        started = _charge(budget)
        try:
            return engine().evaluate(
                self.source, variables, in_state, self.in_ids, self.side_effects, _admit_of(budget)
            )
        finally:
            _charge_time(budget, started)


@dataclass(frozen=True, slots=True)
class Location:
    """A compiled ECMAScript location: any left-hand-side expression (``a``, ``a.b[0]``)."""

    source: str
    root: str
    in_ids: tuple[str, ...] = field(default=(), compare=False)
    side_effects: bool = field(default=True, compare=False)
    """Whether writing may change more than the root (a call, an assignment, ``new``...)."""

    @property
    def plain(self) -> bool:
        """Never: a value assigned in JavaScript comes back revived from JSON."""
        return False

    def write(
        self, variables: Variables, value: Value, in_state: InState, budget: Budget | None = None
    ) -> WriteResult:
        """Assign ``value`` there; ``variables`` is updated and the root's write returned."""
        started = _charge(budget)
        try:
            return engine().assign(
                self.source,
                self.root,
                variables,
                value,
                in_state,
                self.in_ids,
                self.side_effects,
                _admit_of(budget),
            )
        finally:
            _charge_time(budget, started)


@dataclass(frozen=True, slots=True)
class Script:
    """A compiled ECMAScript program, run in the global scope (``var`` and function
    declarations create chart variables)."""

    source: str
    in_ids: tuple[str, ...] = field(default=(), compare=False)
    names_assigned: frozenset[str] = field(default=frozenset(), compare=False)
    """The names it may make chart variables of (see :func:`names_assigned`)."""
    names_local: frozenset[str] = field(default=frozenset(), compare=False)
    """The names it declares for itself alone (see :func:`names_local`)."""

    def run(
        self,
        env: Environment,
        in_state: InState,
        writable: Writable,
        budget: Budget | None = None,
        admit: Admit | None = None,
    ) -> list[WriteResult]:
        """Run the program; all-or-nothing: a failure (a write ``admit`` refuses included)
        changes no variable."""
        started = _charge(budget)
        if admit is None:
            admit = _admit_of(budget)
        try:
            return engine().run_script(self.source, env, in_state, self.in_ids, writable, admit)
        finally:
            _charge_time(budget, started)


CALL_COST: Final = 1_000
"""Steps of the macrostep budget (ADR 11) one call into the engine costs, at least.

The engine bounds each call by CPU time, which is not deterministic, so a call is charged
a fixed amount: replays exhaust the budget at the same call. Only a call that runs longer
than ``CALL_COST`` steps' worth of time (``STEPS_PER_SECOND``: 0.5 ms, a hundred times an
ordinary call) is charged for its time too, or a macrostep of such calls (an eventless loop
whose condition spins) could run its 10,000 calls at a full second each.
"""

STEPS_PER_SECOND: Final = 2_000_000
"""What a second of running chart code costs: the default budget buys about 5 s of it."""

_NS_PER_STEP: Final = 1_000_000_000 // STEPS_PER_SECOND


def _admit_of(budget: Budget | None) -> Admit | None:
    """The datamodel cap's check of the call's macrostep (ADR 11), if there is one."""
    return budget.admit if budget is not None else None


def _charge(budget: Budget | None) -> int:
    """Charge a call's fixed cost; return when it starts (0 without a budget)."""
    if budget is None:
        return 0
    budget.spend(CALL_COST)
    if budget.steps < 0:
        raise EvaluationError("the macrostep's steps budget is exhausted")
    return perf_counter_ns()


def _charge_time(budget: Budget | None, started: int) -> None:
    """Charge what a call that ran longer than its fixed cost's worth spent beyond it."""
    if budget is not None:
        beyond = (perf_counter_ns() - started) // _NS_PER_STEP - CALL_COST
        if beyond > 0:
            budget.spend(beyond)


def _check(kind: str, source: str, limit: int) -> None:
    if len(source) > limit:
        raise ExpressionSyntaxError(f"{kind} is longer than {limit} characters", source)
    if "\x00" in source:
        raise ExpressionSyntaxError(f"{kind} contains a NUL character", source)
    problem = engine().syntax_error(kind, source)
    if problem is not None:
        raise ExpressionSyntaxError(problem, source)


def compile_expression(source: str) -> Expression:
    """Compile an expression or raise :class:`~statifier.datamodel.ExpressionSyntaxError`."""
    _check("expression", source, MAX_SOURCE_LENGTH)
    return Expression(source, may_have_side_effects(source), in_state_ids(source))


def compile_location(source: str) -> Location:
    """Compile a location or raise :class:`~statifier.datamodel.ExpressionSyntaxError`."""
    _check("location", source, MAX_SOURCE_LENGTH)
    match = _ROOT.match(source)
    return Location(
        source, match.group(1) if match else "", in_state_ids(source), may_have_side_effects(source)
    )


def compile_script(source: str) -> Script:
    """Compile a script or raise :class:`~statifier.datamodel.ExpressionSyntaxError`."""
    _check("script", source, MAX_SCRIPT_SOURCE_LENGTH)
    return Script(source, in_state_ids(source), names_assigned(source), names_local(source))
