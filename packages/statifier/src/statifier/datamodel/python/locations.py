"""Assignable locations (``a``, ``a.b``, ``a['k'][0]``) and copy-on-write updates of values.

Writing never changes a container in place: every container on the path from the root variable
to the written element is shallow-copied, and the caller receives the new root value. Values
that shared structure with the old root keep seeing the old data.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Final

from statifier.budget import Budget
from statifier.datamodel.base import PathKey, WriteResult, write_result
from statifier.datamodel.python.access import attribute, subscript
from statifier.datamodel.python.compiler import ExpressionCompiler
from statifier.datamodel.python.context import EvalContext, Evaluator
from statifier.datamodel.python.errors import (
    EvaluationError,
    ExpressionSyntaxError,
    evaluation_error,
)
from statifier.datamodel.python.limits import MAX_SOURCE_LENGTH, STEP_BUDGET
from statifier.datamodel.python.literals import literal_value
from statifier.datamodel.python.nodes import HostCalls
from statifier.datamodel.python.parsing import parse_expression_source
from statifier.datamodel.python.values import InState, Value, Variables, type_name
from statifier.values import brief

_MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class _Step:
    key: Evaluator
    is_attribute: bool
    literal: str | None = None
    """The key when the source spells it out (``a.b``, ``a['b']``)."""


@dataclass(frozen=True, slots=True)
class LocationPlan:
    """A compiled location: a root variable name and the steps leading into its value."""

    root: str
    steps: tuple[_Step, ...]

    def keys(self, context: EvalContext) -> list[Value]:
        """Evaluate the key of every step, outermost first."""
        return [step.key(context) for step in self.steps]

    def read(self, root_value: Value, keys: list[Value]) -> Value:
        """Return the value found by following ``keys`` from ``root_value``."""
        current = root_value
        for step, key in zip(self.steps, keys, strict=True):
            current = attribute(current, key) if step.is_attribute else subscript(current, key)
        return current

    def write(self, context: EvalContext, root_value: Value, value: Value) -> WriteResult:
        """Evaluate the keys, then store ``value`` at the path (see :meth:`write_at`)."""
        return self.write_at(context, root_value, self.keys(context), value)

    def write_at(
        self, context: EvalContext, root_value: Value, keys: list[Value], value: Value
    ) -> WriteResult:
        """Return the root value with ``value`` stored at the path given by ``keys``.

        Missing dict keys along the way are created as empty dicts.
        """
        if not keys:
            return write_result(self.root, value, (), root_value, value)
        if len(keys) == 1 and isinstance(root_value, dict):
            # One key into a dict (``a.b``, ``a['k']``): the common case, without the walk.
            key = keys[0]
            if not isinstance(key, str):
                raise EvaluationError(f"dict keys are strings, not {type_name(key)}")
            prior = root_value.get(key)
            context.charge(len(root_value) + 1)
            copy: dict[str, Value] = dict(root_value)
            copy[key] = value
            return write_result(self.root, copy, (key,), prior, value)
        containers: list[Value] = []
        path: list[PathKey] = []
        current = root_value
        for step, key in zip(self.steps, keys, strict=True):
            containers.append(current)
            if isinstance(current, dict):
                if not isinstance(key, str):
                    raise EvaluationError(f"dict keys are strings, not {type_name(key)}")
                path.append(key)
                current = current.get(key, _MISSING)
                if current is _MISSING:
                    current = {} if len(path) < len(keys) else None
            elif isinstance(current, list):
                if step.is_attribute:
                    raise EvaluationError(f"cannot set attribute {brief(key)} on a list")
                index = _list_index(current, key)
                path.append(index)
                current = current[index]
            else:
                raise EvaluationError(f"cannot assign into a value of type '{type_name(current)}'")
        prior = current
        new_value = value
        for container, key in zip(reversed(containers), reversed(path), strict=True):
            context.charge(len(container) + 1)
            if isinstance(container, dict):
                replaced: dict[str, Value] = dict(container)
                replaced[str(key)] = new_value
                new_value = replaced
            else:
                items = list(container)
                items[int(key)] = new_value
                new_value = items
        return write_result(self.root, new_value, tuple(path), prior, value)


def _list_index(items: list[Value], key: Value) -> int:
    if not isinstance(key, int):
        raise EvaluationError(f"list indices must be integers, not {type_name(key)}")
    index = int(key) + len(items) if key < 0 else int(key)
    if not 0 <= index < len(items):
        raise EvaluationError(f"list index {key} out of range (length {len(items)})")
    return index


def plan_location(compiler: ExpressionCompiler, node: ast.expr) -> LocationPlan:
    """Compile an assignment target made of a name followed by attributes and subscripts."""
    steps: list[_Step] = []
    while True:
        if isinstance(node, ast.Name):
            compiler.check_name(node.id, node)
            steps.reverse()
            return LocationPlan(node.id, tuple(steps))
        if isinstance(node, ast.Attribute):
            compiler.check_attribute_name(node.attr, node)
            steps.append(_Step(_constant_key(node.attr), is_attribute=True, literal=node.attr))
        elif isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                raise compiler.error("cannot assign to a slice", node)
            literal = literal_value(node.slice)
            steps.append(
                _Step(
                    compiler.compile(node.slice),
                    is_attribute=False,
                    literal=literal if isinstance(literal, str) else None,
                )
            )
        else:
            raise compiler.error(
                "not a location: expected a name followed by attributes or subscripts", node
            )
        node = node.value


def _constant_key(name: str) -> Evaluator:
    def key(context: EvalContext) -> Value:
        return name

    return key


@dataclass(frozen=True, slots=True)
class Location:
    """An immutable compiled location expression."""

    source: str
    root: str
    _plan: LocationPlan = field(repr=False, compare=False)
    _slot_count: int = field(repr=False, compare=False)
    names_read: frozenset[str] | None = field(default=frozenset(), compare=False)
    """Variables read to find the place (subscript keys), not ``root``; None if unknown."""
    functions: HostCalls | None = field(default=None, repr=False, compare=False)
    """The host functions the location's keys may call (None: built-ins only)."""
    plain: bool = field(default=False, compare=False)
    """Whether the location is a bare variable name (see ``datamodel.base.Location``)."""
    _key: str | None = field(default=None, repr=False, compare=False)
    """The one key of a ``variable.key`` / ``variable['key']`` location (None: another kind)."""

    def __reduce__(self) -> tuple[object, tuple[str, HostCalls | None]]:
        # Closures cannot be pickled or deep-copied; the source is all that is needed.
        return compile_location, (self.source, self.functions)

    def write(
        self, variables: Variables, value: Value, in_state: InState, budget: Budget | None = None
    ) -> WriteResult:
        """Compute the new value of the root variable with ``value`` stored at this location.

        Neither ``variables`` nor any value in it is modified; store ``root_value`` yourself.
        With a ``budget``, the keys and the copies spend it (see ``Expression.evaluate``).
        Raises :class:`EvaluationError` and nothing else.
        """
        key = self._key
        if key is not None:
            # ``LocationPlan.write_at`` for one spelled-out key into a dict (``account.last``),
            # without a context; any other case (and a write the budget cannot pay) goes on
            # to the general path, which fails or charges exactly as it always did.
            root_value = variables.get(self.root)
            if type(root_value) is dict:
                units = len(root_value) + 1
                if units <= STEP_BUDGET and (budget is None or units <= budget.steps):
                    prior = root_value.get(key)
                    copy = dict(root_value)
                    copy[key] = value
                    if budget is not None:
                        budget.spend(units)
                    return write_result(self.root, copy, (key,), prior, value)
        context = EvalContext(variables, in_state, self._slot_count)
        if budget is not None and budget.steps < context.steps:
            context.steps = budget.steps
        allowance = context.steps
        try:
            return self._plan.write(context, self._root_value(variables), value)
        except EvaluationError:
            raise
        except Exception as exc:
            raise evaluation_error(exc) from None
        finally:
            if budget is not None:
                budget.spend(allowance - context.steps)

    def read(self, variables: Variables, in_state: InState) -> Value:
        """Return the value currently at this location. Raises :class:`EvaluationError` only."""
        context = EvalContext(variables, in_state, self._slot_count)
        try:
            root_value = self._root_value(variables)
            return self._plan.read(root_value, self._plan.keys(context))
        except EvaluationError:
            raise
        except Exception as exc:
            raise evaluation_error(exc) from None

    def _root_value(self, variables: Variables) -> Value:
        try:
            return variables[self.root]
        except KeyError:
            raise EvaluationError(f"name {self.root!r} is not defined") from None


def direct_key(location: object) -> str | None:
    """The one spelled-out key of a :class:`Location` such as ``account.last`` (None for
    anything else): ``Location.write`` copies a ``dict`` root value with it set, charging
    ``len + 1`` steps, when the budget can pay them (``datamodel.base.DirectEvaluation``)."""
    return location._key if type(location) is Location else None


def compile_location(source: str, functions: HostCalls | None = None) -> Location:
    """Compile ``source`` into a :class:`Location` or raise :class:`ExpressionSyntaxError`."""
    parsed = parse_expression_source(source, MAX_SOURCE_LENGTH)
    compiler = ExpressionCompiler(parsed, functions)
    try:
        plan = plan_location(compiler, parsed.expression())
    except RecursionError:
        raise ExpressionSyntaxError("location is too deeply nested", source) from None
    return Location(
        source,
        plan.root,
        plan,
        compiler.slot_count,
        frozenset(compiler.names_read),
        functions,
        plain=not plan.steps,
        _key=plan.steps[0].literal if len(plan.steps) == 1 else None,
    )
