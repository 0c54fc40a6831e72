"""Compiling an allow-listed expression syntax tree into a tree of small closures.

Each node becomes a closure ``evaluate(context) -> value``; compiling once and calling closures
avoids re-dispatching on node types at every evaluation. Any node, name, function or method
outside the allow-list is rejected here, at compile time, with an
:class:`~statifier.datamodel.python.errors.ExpressionSyntaxError`.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from statifier.datamodel.python.access import attribute, slice_of, subscript
from statifier.datamodel.python.calls import compile_call
from statifier.datamodel.python.comprehensions import compile_comprehension
from statifier.datamodel.python.context import EvalContext, Evaluator
from statifier.datamodel.python.errors import EvaluationError, ExpressionSyntaxError
from statifier.datamodel.python.limits import MAX_INT_BITS
from statifier.datamodel.python.literals import NONE, NOT_LITERAL, constant, literal_value
from statifier.datamodel.python.nodes import HostCalls
from statifier.datamodel.python.operators import (
    BINARY_OPERATORS,
    COMPARE_OPERATORS,
    UNARY_OPERATORS,
    CompareOp,
)
from statifier.datamodel.python.parsing import Located, ParsedSource
from statifier.datamodel.python.rendering import render
from statifier.datamodel.python.sizing import CHARS_PER_UNIT, charge_key, check_length
from statifier.datamodel.python.specialised import (
    compared_read,
    conjunction,
    constant_slice,
    disjunction,
    int_arithmetic,
    path_read,
)
from statifier.datamodel.python.values import Value, type_name
from statifier.values import brief

_DISALLOWED: Final[Mapping[type[ast.AST], str]] = {
    ast.Lambda: "lambda expressions",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.Await: "await expressions",
    ast.Yield: "yield expressions",
    ast.YieldFrom: "yield expressions",
    ast.Starred: "starred expressions",
    ast.Set: "set literals",
    ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions",
    ast.Slice: "slices outside a subscript",
}

_FORMAT_CONVERSIONS: Final[Mapping[int, bool]] = {-1: False, ord("s"): False, ord("r"): True}
"""Allowed f-string conversions, mapped to whether they use ``repr``."""

# With a literal scalar on one side a comparison costs O(1) whatever the other side is, so the
# plain Python operator can be used without any size guard. (A string literal of 64 characters
# or more is compared by the general operator, which charges reading it: see
# ``_compare_with_literal``.)
_FAST_COMPARISONS: Final[Mapping[type[ast.cmpop], Callable[[Value, Value], bool]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _variable(name: str) -> Evaluator:
    """The evaluator reading variable ``name``."""

    def variable(context: EvalContext) -> Value:
        try:
            return context.variables[name]
        except KeyError:
            raise EvaluationError(f"name {name!r} is not defined") from None

    return variable


def is_reserved_name(name: str) -> bool:
    """Return whether ``name`` is refused as a variable or attribute name (dunder-prefixed)."""
    return name.startswith("__")


class ExpressionCompiler:
    """Compiles expression nodes of one parsed source into evaluator closures.

    ``slot_count`` is the number of comprehension-variable slots the compiled closures need in
    their :class:`EvalContext`.
    """

    def __init__(self, parsed: ParsedSource, functions: HostCalls | None = None) -> None:
        self._parsed = parsed
        # Comprehension variables currently in scope, by name, mapped to their slot.
        self._scope: dict[str, int] = {}
        self.slot_count = 0
        self.functions = functions
        """Host functions callable by name besides the built-ins (None: none)."""
        self.names_read: set[str] = set()
        """Variables the compiled code reads (comprehension variables and callees excluded)."""
        self._variables: dict[str, Evaluator] = {}
        self._constants: dict[tuple[type, Value], Evaluator] = {}
        self._inner_link = False

    def error(self, message: str, node: Located | None) -> ExpressionSyntaxError:
        """Return a compile error located at ``node``."""
        return self._parsed.error(message, node)

    def check_name(self, name: str, node: Located) -> None:
        """Refuse dunder names."""
        if is_reserved_name(name):
            raise self.error(f"names starting with '__' are not allowed: {name!r}", node)

    def check_attribute_name(self, name: str, node: Located) -> None:
        """Refuse attribute names starting with an underscore."""
        if name.startswith("_"):
            raise self.error(f"attributes starting with '_' are not allowed: {name!r}", node)

    @contextmanager
    def local_scope(self, names: list[str]) -> Iterator[list[int]]:
        """Bring comprehension variables into scope, yielding the slot of each."""
        slots = list(range(self.slot_count, self.slot_count + len(names)))
        self.slot_count += len(names)
        enclosing = self._scope
        self._scope = {**enclosing, **dict(zip(names, slots, strict=True))}
        try:
            yield slots
        finally:
            self._scope = enclosing

    def compile(self, node: ast.expr) -> Evaluator:  # noqa: C901 - one case per allowed node
        """Compile one expression node, refusing anything outside the allow-list."""
        match node:
            case ast.Constant():
                return self._constant(node)
            case ast.Name():
                return self._name(node)
            case ast.List() | ast.Tuple():
                return self._list(node.elts)
            case ast.Dict():
                return self._dict(node)
            case ast.BoolOp():
                return self._bool_op(node)
            case ast.UnaryOp():
                return self._unary_op(node)
            case ast.BinOp():
                return self._bin_op(node)
            case ast.Compare():
                return self._compare(node)
            case ast.IfExp():
                return self._if_exp(node)
            case ast.Subscript():
                return self._subscript(node)
            case ast.Attribute():
                return self._attribute(node)
            case ast.Call():
                return compile_call(self, node)
            case ast.JoinedStr():
                return self._joined_str(node)
            case ast.ListComp() | ast.GeneratorExp():
                return compile_comprehension(self, node)
        description = _DISALLOWED.get(type(node), f"{type(node).__name__} expressions")
        raise self.error(f"{description} are not allowed", node)

    # -- leaves -------------------------------------------------------------------------------

    def _constant(self, node: ast.Constant) -> Evaluator:
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool):
            if value.bit_length() > MAX_INT_BITS:
                raise self.error("integer literal is too large", node)
        elif not (value is None or isinstance(value, str | float | bool)):
            raise self.error(f"{type(value).__name__} literals are not allowed", node)
        if isinstance(value, float):  # 0.0 == -0.0: floats are not shared
            return constant(value)
        # A literal written again is yielded by the same closure (it holds nothing else).
        key = (type(value), value)
        known = self._constants.get(key)
        if known is None:
            self._constants[key] = known = constant(value)
        return known

    def _name(self, node: ast.Name) -> Evaluator:
        name = node.id
        slot = self._scope.get(name)
        if slot is None:
            # A variable read again is read by the same closure (it holds nothing else).
            known = self._variables.get(name)
            if known is not None:
                return known
            self.check_name(name, node)
            self.names_read.add(name)
            self._variables[name] = read = _variable(name)
            return read
        self.check_name(name, node)

        def local(context: EvalContext) -> Value:
            return context.slots[slot]

        return local

    # -- containers ---------------------------------------------------------------------------

    def _list(self, elements: list[ast.expr]) -> Evaluator:
        items = tuple(self.compile(element) for element in elements)
        if len(items) == 1:
            (only,) = items

            def build_singleton(context: EvalContext) -> Value:
                return [only(context)]

            return build_singleton

        def build_list(context: EvalContext) -> Value:
            return [item(context) for item in items]

        return build_list

    def _dict(self, node: ast.Dict) -> Evaluator:
        keys: list[Evaluator] = []
        for key in node.keys:
            if key is None:
                raise self.error("dict unpacking (**) is not allowed", node)
            keys.append(self.compile(key))
        pairs = tuple(zip(keys, (self.compile(value) for value in node.values), strict=True))

        def build_dict(context: EvalContext) -> Value:
            result: dict[str, Value] = {}
            for key_of, value_of in pairs:
                key = key_of(context)
                if type(key) is not str:
                    raise EvaluationError(f"dict keys must be str, not {type_name(key)}")
                result[key] = value_of(context)
            return result

        return build_dict

    # -- operators ----------------------------------------------------------------------------

    def _bool_op(self, node: ast.BoolOp) -> Evaluator:
        operands = tuple(self.compile(value) for value in node.values)
        is_and = isinstance(node.op, ast.And)
        if len(operands) == 2:  # ``a and b``, the common condition
            return (conjunction if is_and else disjunction)(*operands)

        # Python semantics: the result is the operand that decided the outcome.
        def boolean(context: EvalContext) -> Value:
            result: Value = None
            for operand in operands:
                result = operand(context)
                if bool(result) is not is_and:
                    return result
            return result

        return boolean

    def _unary_op(self, node: ast.UnaryOp) -> Evaluator:
        literal = literal_value(node)
        if literal is not NOT_LITERAL:
            return constant(literal)
        apply = UNARY_OPERATORS[type(node.op)]
        operand = self.compile(node.operand)

        def unary(context: EvalContext) -> Value:
            return apply(operand(context))

        return unary

    def _bin_op(self, node: ast.BinOp) -> Evaluator:
        entry = BINARY_OPERATORS.get(type(node.op))
        if entry is None:
            raise self.error(f"operator {type(node.op).__name__} is not allowed", node)
        apply = entry[1]
        left = self.compile(node.left)
        right = self.compile(node.right)
        literal = literal_value(node.right)
        read = self._constant_read(node.left)
        shortcut = int_arithmetic(
            apply,
            left,
            right,
            None if literal is NOT_LITERAL else literal,
            read[0] if read is not None and not read[1] else None,
        )
        if shortcut is not None:
            return shortcut

        def binary(context: EvalContext) -> Value:
            return apply(context, left(context), right(context))

        return binary

    def _compare(self, node: ast.Compare) -> Evaluator:
        operands = [self.compile(node.left), *(self.compile(item) for item in node.comparators)]
        if len(node.ops) == 1:
            fast = _FAST_COMPARISONS.get(type(node.ops[0]))
            if fast is not None:
                specialised = _compare_with_literal(fast, node, operands)
                if specialised is not None:
                    read = self._constant_read(node.left)
                    expected = literal_value(node.comparators[0])
                    if read is not None and expected is not NOT_LITERAL:
                        inline = compared_read(fast, read[0], read[1], expected, specialised)
                        if inline is not None:
                            return inline
                    return specialised
            return _single_comparison(COMPARE_OPERATORS[type(node.ops[0])], *operands)
        steps = tuple(
            zip(
                (COMPARE_OPERATORS[type(op)] for op in node.ops),
                operands[1:],
                strict=True,
            )
        )
        first = operands[0]

        def chained(context: EvalContext) -> Value:
            left = first(context)
            for compare, right_of in steps:
                right = right_of(context)
                if not compare(context, left, right):
                    return False
                left = right
            return True

        return chained

    def _if_exp(self, node: ast.IfExp) -> Evaluator:
        test = self.compile(node.test)
        body = self.compile(node.body)
        orelse = self.compile(node.orelse)

        def conditional(context: EvalContext) -> Value:
            return body(context) if test(context) else orelse(context)

        return conditional

    # -- access -------------------------------------------------------------------------------

    def _subscript(self, node: ast.Subscript) -> Evaluator:
        inner = self._inner_link
        self._inner_link = False
        container = self._container(node.value)
        index = node.slice
        if isinstance(index, ast.Slice):
            return self._slice(container, index)
        literal = literal_value(index)
        if isinstance(literal, str):
            key: str = literal

            def constant_key(context: EvalContext) -> Value:
                value = container(context)
                if type(value) is dict:
                    try:
                        return value[key]
                    except KeyError:
                        raise EvaluationError(f"key {brief(key)} not found") from None
                return subscript(value, key)

            return constant_key if inner else self._read_path(node, constant_key)
        index_of = self.compile(index)

        def item(context: EvalContext) -> Value:
            value = container(context)
            key = index_of(context)
            if type(key) is str and type(value) is dict:
                charge_key(context, key)
            return subscript(value, key)

        return item

    def _slice(self, container: Evaluator, node: ast.Slice) -> Evaluator:
        bounds = tuple(
            None if bound is None else self.compile(bound)
            for bound in (node.lower, node.upper, node.step)
        )
        lower, upper, step = (NONE if bound is None else bound for bound in bounds)
        literals = tuple(
            None if bound is None else literal_value(bound)
            for bound in (node.lower, node.upper, node.step)
        )
        if all(value is None or type(value) is int for value in literals) and literals[2] != 0:
            return constant_slice(container, *literals)

        def sliced(context: EvalContext) -> Value:
            value = container(context)
            return slice_of(context, value, lower(context), upper(context), step(context))

        return sliced

    def _attribute(self, node: ast.Attribute) -> Evaluator:
        inner = self._inner_link
        self._inner_link = False
        name = node.attr
        self.check_attribute_name(name, node)
        container = self._container(node.value)

        def get(context: EvalContext) -> Value:
            value = container(context)
            if type(value) is dict:
                try:
                    return value[name]
                except KeyError:
                    pass
            return attribute(value, name)

        return get if inner else self._read_path(node, get)

    def _container(self, value: ast.expr) -> Evaluator:
        """Compile what an attribute or a subscript reads from.

        When that is itself an attribute or a subscript (a link of a chain such as
        ``_event.data.amount``), it builds no path shortcut of its own: it only serves as
        the outer link's fallback, and the outer link reads the whole path (one walk of
        the chain, not one per link).
        """
        if isinstance(value, ast.Attribute | ast.Subscript):
            self._inner_link = True  # taken (and cleared) at once by the link's compile
        return self.compile(value)

    def _read_path(self, node: ast.Attribute | ast.Subscript, general: Evaluator) -> Evaluator:
        """``general``, or a shortcut when ``node`` reads a variable through constant keys
        (``_event.data.amount``, ``account['id']``)."""
        read = self._constant_read(node)
        if read is None:
            return general
        return path_read(read[0], read[1], general)

    def _constant_read(self, node: ast.expr) -> tuple[str, tuple[str, ...]] | None:
        """``(variable, keys)`` when ``node`` reads a variable (not a comprehension's), maybe
        through spelled-out keys (``count``, ``_event.data.amount``, ``account['id']``)."""
        keys: list[str] = []
        current: ast.expr = node
        while True:
            if isinstance(current, ast.Attribute):
                keys.append(current.attr)
            elif isinstance(current, ast.Subscript) and isinstance(
                key := literal_value(current.slice), str
            ):
                keys.append(key)
            else:
                break
            current = current.value
        if not isinstance(current, ast.Name) or current.id in self._scope:
            return None
        keys.reverse()
        return current.id, tuple(keys)

    # -- f-strings ----------------------------------------------------------------------------

    def _joined_str(self, node: ast.JoinedStr) -> Evaluator:
        parts: list[tuple[Evaluator, bool | None]] = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append((constant(part.value), None))
                continue
            if not isinstance(part, ast.FormattedValue):
                raise self.error("unsupported f-string part", part)
            if part.format_spec is not None:
                raise self.error("format specifications are not allowed in f-strings", part)
            use_repr = _FORMAT_CONVERSIONS.get(part.conversion)
            if use_repr is None:
                raise self.error("only the !s and !r conversions are allowed", part)
            parts.append((self.compile(part.value), use_repr))
        pieces = tuple(parts)

        def format_string(context: EvalContext) -> Value:
            texts: list[str] = []
            length = 0
            copied = 0  # characters of strings copied as they are (render charges the rest)
            for evaluate, use_repr in pieces:
                value = evaluate(context)
                text: str = value if use_repr is None else render(context, value, use_repr)
                if text is value:
                    copied += len(text)
                length += len(text)
                check_length(length, "f-string result")
                texts.append(text)
            context.charge(copied)
            return "".join(texts)

        return format_string


def _compare_with_literal(
    compare: Callable[[Value, Value], bool], node: ast.Compare, operands: list[Evaluator]
) -> Evaluator | None:
    right_literal = literal_value(node.comparators[0])
    left_literal = literal_value(node.left)
    if _long_text(right_literal) or _long_text(left_literal):
        return None  # the general operator charges reading it
    if right_literal is not NOT_LITERAL:
        left = operands[0]
        expected = right_literal
        # ``==`` and ``!=`` dominate state-machine conditions; inlining them skips a call.
        if compare is operator.eq:

            def equals_literal(context: EvalContext) -> Value:
                return left(context) == expected

            return equals_literal
        if compare is operator.ne:

            def differs_from_literal(context: EvalContext) -> Value:
                return left(context) != expected

            return differs_from_literal

        ordered = _ordered_against_literal(compare, left, expected)
        if ordered is not None:
            return ordered

        def compare_to_literal(context: EvalContext) -> Value:
            return compare(left(context), expected)

        return compare_to_literal
    if left_literal is not NOT_LITERAL:
        right = operands[1]
        expected = left_literal

        def compare_literal_to(context: EvalContext) -> Value:
            return compare(expected, right(context))

        return compare_literal_to
    return None


def _long_text(literal: Value) -> bool:
    """Whether ``literal`` is a string long enough for comparing it to cost steps."""
    return type(literal) is str and len(literal) >= CHARS_PER_UNIT


def _ordered_against_literal(
    compare: Callable[[Value, Value], bool], left: Evaluator, expected: Value
) -> Evaluator | None:
    """``<``, ``<=``, ``>``, ``>=`` against a literal as an inline operator (guards on event
    data are mostly ``amount > 50``), or None for another comparison."""
    if compare is operator.gt:

        def greater(context: EvalContext) -> Value:
            return left(context) > expected

        return greater
    if compare is operator.ge:

        def at_least(context: EvalContext) -> Value:
            return left(context) >= expected

        return at_least
    if compare is operator.lt:

        def less(context: EvalContext) -> Value:
            return left(context) < expected

        return less
    if compare is operator.le:

        def at_most(context: EvalContext) -> Value:
            return left(context) <= expected

        return at_most
    return None


def _single_comparison(compare: CompareOp, left: Evaluator, right: Evaluator) -> Evaluator:
    def comparison(context: EvalContext) -> Value:
        return compare(context, left(context), right(context))

    return comparison
