"""Scripts: sequences of assignments and expression statements run against an environment."""

from __future__ import annotations

import ast
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field

from statifier.budget import Budget
from statifier.datamodel.base import WriteResult
from statifier.datamodel.python.compiler import ExpressionCompiler
from statifier.datamodel.python.context import EvalContext, Evaluator
from statifier.datamodel.python.errors import (
    EvaluationError,
    ExpressionSyntaxError,
    ScriptError,
    evaluation_error,
)
from statifier.datamodel.python.limits import MAX_SCRIPT_SOURCE_LENGTH
from statifier.datamodel.python.locations import LocationPlan, plan_location
from statifier.datamodel.python.nodes import HostCalls
from statifier.datamodel.python.operators import BINARY_OPERATORS, BinaryOp
from statifier.datamodel.python.parsing import parse_script_source
from statifier.datamodel.python.values import InState, Value

Environment = MutableMapping[str, Value]
"""The variables a script reads and rebinds."""

Writable = Callable[[str], bool]
"""Callback deciding whether a script may (re)bind a top-level name."""

Admit = Callable[[WriteResult], None]
"""Callback that checks a write before it is applied; it raises to refuse it."""


class _Run:
    """State of one script run, shared by its statements."""

    __slots__ = ("admit", "context", "env", "writable", "writes")

    def __init__(
        self, context: EvalContext, env: Environment, writable: Writable, admit: Admit | None
    ) -> None:
        self.context = context
        self.env = env
        self.writable = writable
        self.admit = admit
        self.writes: list[WriteResult] = []

    def root_value(self, plan: LocationPlan) -> Value:
        """Check that the target's root may be written and return its current value."""
        if not self.writable(plan.root):
            raise EvaluationError(f"cannot assign to read-only variable {plan.root!r}")
        try:
            return self.env[plan.root]
        except KeyError:
            if plan.steps:
                raise EvaluationError(f"name {plan.root!r} is not defined") from None
            return None

    def commit(self, result: WriteResult) -> None:
        """Apply a write to the environment so that later statements see it."""
        if self.admit is not None:
            self.admit(result)
        self.env[result.root] = result.root_value
        self.writes.append(result)


@dataclass(frozen=True, slots=True)
class _Assign:
    line: int
    targets: tuple[LocationPlan, ...]
    value: Evaluator

    def execute(self, run: _Run) -> None:
        value = self.value(run.context)
        for target in self.targets:
            run.commit(target.write(run.context, run.root_value(target), value))


@dataclass(frozen=True, slots=True)
class _AugAssign:
    line: int
    target: LocationPlan
    apply: BinaryOp
    value: Evaluator

    def execute(self, run: _Run) -> None:
        target = self.target
        if target.root not in run.env:
            raise EvaluationError(f"name {target.root!r} is not defined")
        root_value = run.root_value(target)
        # As in Python, the target's keys are evaluated once, before the right-hand side.
        keys = target.keys(run.context)
        current = target.read(root_value, keys)
        result = self.apply(run.context, current, self.value(run.context))
        run.commit(target.write_at(run.context, root_value, keys, result))


@dataclass(frozen=True, slots=True)
class _Evaluate:
    line: int
    value: Evaluator

    def execute(self, run: _Run) -> None:
        self.value(run.context)


_Statement = _Assign | _AugAssign | _Evaluate


@dataclass(frozen=True, slots=True)
class Script:
    """An immutable compiled script."""

    source: str
    _statements: tuple[_Statement, ...] = field(repr=False, compare=False)
    _slot_count: int = field(repr=False, compare=False)
    names_read: frozenset[str] | None = field(default=frozenset(), compare=False)
    """Variables the script reads (augmented-assignment targets included); None if unknown."""
    names_assigned: frozenset[str] | None = field(default=frozenset(), compare=False)
    """Top-level variables the script (re)binds; None if unknown."""
    functions: HostCalls | None = field(default=None, repr=False, compare=False)
    """The host functions the script may call (None: built-ins only)."""

    def __reduce__(self) -> tuple[object, tuple[str, HostCalls | None]]:
        # Closures cannot be pickled or deep-copied; the source is all that is needed.
        return compile_script, (self.source, self.functions)

    def run(
        self,
        env: Environment,
        in_state: InState,
        writable: Writable,
        budget: Budget | None = None,
        admit: Admit | None = None,
    ) -> list[WriteResult]:
        """Execute the statements in order against ``env`` and return the writes made.

        Each write rebinds a top-level key of ``env`` (values themselves are never modified); a
        new top-level name may be created when ``writable(name)`` allows it, and ``admit``
        (when given) sees every write first and may refuse it by raising. With a ``budget``
        the whole run spends no more than what remains of it and is charged what it spent.
        On failure a :class:`ScriptError` is raised; the writes made so far stay applied and
        are listed in its ``writes``.
        """
        context = EvalContext(env, in_state, self._slot_count)
        if budget is not None and budget.steps < context.steps:
            context.steps = budget.steps
        allowance = context.steps
        run = _Run(context, env, writable, admit)
        try:
            for statement in self._statements:
                try:
                    statement.execute(run)
                except EvaluationError as exc:
                    raise ScriptError(str(exc), run.writes, statement.line) from None
                except Exception as exc:
                    reason = str(evaluation_error(exc))
                    raise ScriptError(reason, run.writes, statement.line) from None
        finally:
            if budget is not None:
                budget.spend(allowance - context.steps)
        return run.writes


def compile_script(source: str, functions: HostCalls | None = None) -> Script:
    """Compile ``source`` into a :class:`Script` or raise :class:`ExpressionSyntaxError`.

    Allowed statements are assignments (to names, dict attributes and subscripts), augmented
    assignments, expression statements and ``pass``. ``functions`` are host functions the
    script may call besides the built-ins.
    """
    parsed = parse_script_source(source, MAX_SCRIPT_SOURCE_LENGTH)
    compiler = ExpressionCompiler(parsed, functions)
    try:
        statements = [_compile_statement(compiler, node) for node in parsed.statements()]
    except RecursionError:
        raise ExpressionSyntaxError("script is too deeply nested", source) from None
    kept = tuple(statement for statement in statements if statement is not None)
    assigned: set[str] = set()
    read = set(compiler.names_read)
    for statement in kept:
        if isinstance(statement, _Assign):
            assigned.update(target.root for target in statement.targets)
        elif isinstance(statement, _AugAssign):
            assigned.add(statement.target.root)
            read.add(statement.target.root)
    return Script(
        source, kept, compiler.slot_count, frozenset(read), frozenset(assigned), functions
    )


def _compile_statement(compiler: ExpressionCompiler, node: ast.stmt) -> _Statement | None:
    match node:
        case ast.Assign():
            targets = tuple(_target(compiler, target) for target in node.targets)
            return _Assign(node.lineno, targets, compiler.compile(node.value))
        case ast.AugAssign():
            entry = BINARY_OPERATORS.get(type(node.op))
            if entry is None:
                raise compiler.error(f"operator {type(node.op).__name__} is not allowed", node)
            target = _target(compiler, node.target)
            return _AugAssign(node.lineno, target, entry[1], compiler.compile(node.value))
        case ast.Expr():
            return _Evaluate(node.lineno, compiler.compile(node.value))
        case ast.Pass():
            return None
    raise compiler.error(f"{type(node).__name__} statements are not allowed", node)


def _target(compiler: ExpressionCompiler, node: ast.expr) -> LocationPlan:
    if isinstance(node, ast.Tuple | ast.List | ast.Starred):
        raise compiler.error("unpacking assignments are not allowed", node)
    return plan_location(compiler, node)
