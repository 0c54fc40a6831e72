"""Compiling list comprehensions and generator expressions (evaluated eagerly to lists)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from statifier.datamodel.python.access import iterable_items
from statifier.datamodel.python.context import EvalContext, Evaluator, budget_exceeded
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.limits import LOOP_NODE_COST
from statifier.datamodel.python.sizing import check_length
from statifier.datamodel.python.values import Value, type_name

if TYPE_CHECKING:
    from statifier.datamodel.python.nodes import NodeCompiler


def compile_comprehension(
    compiler: NodeCompiler, node: ast.ListComp | ast.GeneratorExp
) -> Evaluator:
    """Compile ``[elt for target in iterable if cond...]`` with a single ``for`` clause."""
    if len(node.generators) != 1:
        raise compiler.error("only one 'for' clause is allowed in a comprehension", node)
    generator = node.generators[0]
    if generator.is_async:
        raise compiler.error("async comprehensions are not allowed", node)
    # The iterable belongs to the enclosing scope, exactly as in Python.
    iterable = compiler.compile(generator.iter)
    names = _target_names(compiler, generator.target)
    with compiler.local_scope(names) as slots:
        conditions = tuple(compiler.compile(condition) for condition in generator.ifs)
        element = compiler.compile(node.elt)
    # Work per iteration is proportional to the size of the loop body, so that is what one
    # iteration costs against the step budget.
    body_nodes = sum(
        isinstance(inner, ast.expr)
        for part in [node.elt, *generator.ifs]
        for inner in ast.walk(part)
    )
    cost = LOOP_NODE_COST * (1 + body_nodes)
    unpack = isinstance(generator.target, ast.Tuple)
    first_slot = slots[0]

    def comprehension(context: EvalContext) -> Value:
        items = iterable_items(iterable(context), "comprehension")
        check_length(len(items), "comprehension")
        variables = context.slots
        result: list[Value] = []
        for item in items:
            context.steps -= cost
            if context.steps < 0:
                raise budget_exceeded()
            if unpack:
                _unpack(variables, slots, item)
            else:
                variables[first_slot] = item
            for condition in conditions:
                if not condition(context):
                    break
            else:
                result.append(element(context))
        return result

    return comprehension


def _target_names(compiler: NodeCompiler, target: ast.expr) -> list[str]:
    elements = target.elts if isinstance(target, ast.Tuple) else [target]
    names: list[str] = []
    for element in elements:
        if not isinstance(element, ast.Name):
            raise compiler.error("comprehension targets must be names", element)
        compiler.check_name(element.id, element)
        if element.id in names:
            raise compiler.error(f"duplicate comprehension variable {element.id!r}", element)
        names.append(element.id)
    if not names:
        raise compiler.error("comprehension target is empty", target)
    return names


def _unpack(variables: list[Value], slots: list[int], item: Value) -> None:
    if not isinstance(item, list | tuple) or len(item) != len(slots):
        raise EvaluationError(f"cannot unpack {type_name(item)} into {len(slots)} variables")
    for slot, value in zip(slots, item, strict=True):
        variables[slot] = value
