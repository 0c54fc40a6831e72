"""Compiling calls: allow-listed functions by name and allow-listed methods by attribute."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from statifier.datamodel.python.context import EvalContext, Evaluator
from statifier.datamodel.python.errors import EvaluationError
from statifier.datamodel.python.functions import FUNCTIONS, NO_KEYWORDS, FunctionSpec
from statifier.datamodel.python.literals import NOT_LITERAL, literal_value
from statifier.datamodel.python.methods import METHOD_NAMES, METHODS, lookup_method
from statifier.datamodel.python.sizing import charge_deep
from statifier.datamodel.python.values import Value, type_name
from statifier.suggest import NearSpellings, bounded_did_you_mean

if TYPE_CHECKING:
    from statifier.datamodel.python.nodes import HostCalls, NodeCompiler


def compile_call(compiler: NodeCompiler, node: ast.Call) -> Evaluator:
    """Compile ``f(...)`` for an allow-listed ``f`` or ``x.m(...)`` for an allowed method."""
    for argument in node.args:
        if isinstance(argument, ast.Starred):
            raise compiler.error("starred arguments are not allowed", argument)
    for keyword in node.keywords:
        if keyword.arg is None:
            raise compiler.error("keyword unpacking (**) is not allowed", keyword)
    callee = node.func
    if isinstance(callee, ast.Name):
        return _function_call(compiler, node, callee)
    if isinstance(callee, ast.Attribute):
        return _method_call(compiler, node, callee)
    raise compiler.error("only allow-listed functions and methods can be called", node)


def _function_call(compiler: NodeCompiler, node: ast.Call, callee: ast.Name) -> Evaluator:
    name = callee.id
    compiler.check_name(name, callee)
    spec = FUNCTIONS.get(name)
    if spec is None:
        host = compiler.functions
        if host is not None and name in host:
            return _host_call(compiler, node, name, host)
        known = [*FUNCTIONS, *(host or ())]
        raise compiler.error(
            f"function {name!r} is not allowed (neither built in nor registered by the host)"
            + bounded_did_you_mean(name, known, lambda: NearSpellings(known)),
            callee,
        )
    _check_signature(compiler, node, name, spec)
    state = literal_value(node.args[0]) if name == "In" else NOT_LITERAL
    if isinstance(state, str):
        # ``In('id')`` is the most common condition after comparisons; skip the generic call.
        state_id: str = state

        def in_literal_state(context: EvalContext) -> Value:
            return bool(context.in_state(state_id))

        return in_literal_state
    arguments = tuple(compiler.compile(argument) for argument in node.args)
    impl = spec.impl
    if not node.keywords:

        def call(context: EvalContext) -> Value:
            return impl(context, [argument(context) for argument in arguments], NO_KEYWORDS)

        return call
    keywords = tuple(
        (str(keyword.arg), compiler.compile(keyword.value)) for keyword in node.keywords
    )

    def call_with_keywords(context: EvalContext) -> Value:
        args = [argument(context) for argument in arguments]
        return impl(context, args, {key: value(context) for key, value in keywords})

    return call_with_keywords


def _host_call(compiler: NodeCompiler, node: ast.Call, name: str, host: HostCalls) -> Evaluator:
    arguments = tuple(compiler.compile(argument) for argument in node.args)
    keywords = tuple(
        (str(keyword.arg), compiler.compile(keyword.value)) for keyword in node.keywords
    )

    def call_host(context: EvalContext) -> Value:
        args = [argument(context) for argument in arguments]
        kwargs = {key: value(context) for key, value in keywords}
        charge_deep(context, [*args, *kwargs.values()])
        try:
            result = host.call(name, args, kwargs)
        except Exception as exc:
            raise EvaluationError(str(exc)) from None
        charge_deep(context, [result])
        return result

    return call_host


def _check_signature(compiler: NodeCompiler, node: ast.Call, name: str, spec: FunctionSpec) -> None:
    count = len(node.args)
    if not spec.min_args <= count <= spec.max_args:
        expected = (
            str(spec.min_args)
            if spec.min_args == spec.max_args
            else f"{spec.min_args} to {spec.max_args}"
        )
        raise compiler.error(
            f"{name}() takes {expected} positional arguments but {count} were given", node
        )
    for keyword in node.keywords:
        if keyword.arg not in spec.keywords and "*" not in spec.keywords:
            raise compiler.error(
                f"{name}() does not accept the keyword argument {keyword.arg!r}", keyword
            )


def _method_call(compiler: NodeCompiler, node: ast.Call, callee: ast.Attribute) -> Evaluator:
    name = callee.attr
    compiler.check_attribute_name(name, callee)
    if name not in METHOD_NAMES:
        raise compiler.error(
            f"method {name!r} is not allowed" + bounded_did_you_mean(name, METHOD_NAMES),
            callee,
        )
    if node.keywords:
        raise compiler.error("keyword arguments are not allowed in method calls", node.keywords[0])
    count = len(node.args)
    specs = [methods[name] for methods in METHODS.values() if name in methods]
    if not any(spec.min_args <= count <= spec.max_args for spec in specs):
        raise compiler.error(f"wrong number of arguments for method {name!r}", node)
    receiver = compiler.compile(callee.value)
    arguments = tuple(compiler.compile(argument) for argument in node.args)

    def call_method(context: EvalContext) -> Value:
        target = receiver(context)
        # The receiver's type is only known now, so the exact arity is checked now too.
        spec = lookup_method(target, name)
        args = [argument(context) for argument in arguments]
        if not spec.min_args <= len(args) <= spec.max_args:
            raise EvaluationError(
                f"wrong number of arguments for {type_name(target)}.{name}(): {len(args)}"
            )
        return spec.impl(context, target, args)

    return call_method
