"""Compiled expressions: the public :func:`compile_expression` and :class:`Expression`."""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field
from typing import Final

from statifier.budget import Budget
from statifier.datamodel.python.compiler import ExpressionCompiler, is_reserved_name
from statifier.datamodel.python.context import (
    CONTEXT_POOL,
    CONTEXT_POOL_LIMIT,
    NO_SLOTS,
    NO_STATES,
    NO_VARIABLES,
    EvalContext,
    Evaluator,
)
from statifier.datamodel.python.errors import (
    EvaluationError,
    ExpressionSyntaxError,
    evaluation_error,
)
from statifier.datamodel.python.limits import MAX_SOURCE_LENGTH, STEP_BUDGET
from statifier.datamodel.python.nodes import HostCalls
from statifier.datamodel.python.parsing import parse_expression_source
from statifier.datamodel.python.values import InState, Value, Variables


@dataclass(frozen=True, slots=True)
class Expression:
    """An immutable compiled expression; evaluate it any number of times, from any thread."""

    source: str
    _evaluator: Evaluator = field(repr=False, compare=False)
    _slot_count: int = field(repr=False, compare=False)
    names_read: frozenset[str] | None = field(default=frozenset(), compare=False)
    """The variables the expression reads (not the functions it calls); None if unknown."""
    functions: HostCalls | None = field(default=None, repr=False, compare=False)
    """The host functions the expression was compiled against (None: built-ins only)."""

    def __reduce__(self) -> tuple[object, tuple[str, HostCalls | None]]:
        # Closures cannot be pickled or deep-copied; the source is all that is needed.
        return compile_expression, (self.source, self.functions)

    def evaluate(  # noqa: C901 - the context pool and the budget charge are inlined (hot path)
        self, variables: Variables, in_state: InState, budget: Budget | None = None
    ) -> Value:
        """Evaluate against ``variables``; ``in_state`` answers ``In(state_id)``.

        With a ``budget`` (the macrostep's), the evaluation may spend no more than what
        remains of it and is charged what it spent, failed or not. Raises
        :class:`EvaluationError` and nothing else.
        """
        # The context pool and the budget's ``spend`` are inlined here because this is the
        # interpreter's hottest call.
        slot_count = self._slot_count
        try:
            context = _take_context()
        except IndexError:
            context = EvalContext(variables, in_state, slot_count)
        else:
            context.variables = variables
            context.in_state = in_state
            if slot_count:
                context.slots = [None] * slot_count
        if budget is None:
            allowance = context.steps = STEP_BUDGET
        else:
            allowance = budget.steps
            if allowance > STEP_BUDGET:
                allowance = STEP_BUDGET
            context.steps = allowance
        try:
            result = self._evaluator(context)
        except EvaluationError:
            if budget is not None:
                budget.spend(allowance - context.steps)
            raise
        except Exception as exc:
            if budget is not None:
                budget.spend(allowance - context.steps)
            raise evaluation_error(exc) from None
        if budget is not None:
            steps = budget.steps = budget.steps - allowance + context.steps
            if steps < 0 and budget.exhausted is None:
                budget.exhausted = "steps"
        # Contexts of failed evaluations are simply dropped; only the success path recycles,
        # and a recycled context keeps nothing of the caller (no variables, no In callback).
        context.variables = NO_VARIABLES
        context.in_state = NO_STATES
        if slot_count:
            context.slots = NO_SLOTS
        if len(CONTEXT_POOL) < CONTEXT_POOL_LIMIT:
            _give_context(context)
        return result


_take_context: Final = CONTEXT_POOL.pop
_give_context: Final = CONTEXT_POOL.append


def direct_evaluator(expr: object) -> Evaluator | None:
    """The closure of an :class:`Expression` without comprehension variables, to evaluate
    against a context of the caller's (``datamodel.base.DirectEvaluation``); None for
    anything else, which goes through ``evaluate``."""
    if type(expr) is Expression and not expr._slot_count:
        return expr._evaluator
    return None


def direct_failure(exc: Exception) -> EvaluationError:
    """What ``Expression.evaluate`` raises when its closure raised ``exc``."""
    return exc if isinstance(exc, EvaluationError) else evaluation_error(exc)


def compile_expression(source: str, functions: HostCalls | None = None) -> Expression:
    """Compile ``source`` into an :class:`Expression` or raise :class:`ExpressionSyntaxError`.

    ``functions`` are host functions the expression may call besides the built-ins.
    """
    parsed = parse_expression_source(source, MAX_SOURCE_LENGTH)
    compiler = ExpressionCompiler(parsed, functions)
    try:
        evaluator = compiler.compile(parsed.expression())
    except RecursionError:
        raise ExpressionSyntaxError("expression is too deeply nested", source) from None
    return Expression(
        source, evaluator, compiler.slot_count, frozenset(compiler.names_read), functions
    )


def is_identifier(name: str) -> bool:
    """Return whether ``name`` is a usable variable name.

    That is a Python identifier that is not a keyword and does not start with ``__``.
    """
    return name.isidentifier() and not keyword.iskeyword(name) and not is_reserved_name(name)
