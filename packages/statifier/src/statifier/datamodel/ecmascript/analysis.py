"""What an ECMAScript source can do, read from its syntax tree (ADR 22).

Sources are parsed with tree-sitter's JavaScript grammar, a real ECMAScript parser, never
matched with regular expressions. :func:`analyse` answers, once per compiled source:

- ``writes``: whether evaluating it can change anything outside itself. Only a source built
  from a closed list of node kinds that cannot write (reads, operators, literals,
  ``In('id')``...) is write-free; anything else, anything unknown and any parse error
  counts as a write, so the answer errs only towards "writes". A write-free source may
  still run chart code implicitly (a getter, a ``valueOf``) when the datamodel holds such
  a function; the engine knows whether it does (``inert`` in ``prelude.js``) and treats
  every call as writing while it does.
- ``pure``: whether its only calls are to built-in functions that read (``a.concat(b)``,
  ``s.slice(1)``, ``Math.max(x, y)``: ``PURE_METHODS``, ``PURE_FUNCTIONS``), which take no
  function to call back. Such a source writes nothing while the datamodel holds no
  function at all (a call then cannot reach anything but a built-in), which the engine
  checks at run time (``callable_free`` in ``prelude.js``).
- ``in_ids``: the state ids it passes to ``In()`` as string literals.
- ``functions``: the source text of every function literal in it, and how to rebuild it
  from that text: the only functions a stored position may bring back are the chart's own.
- ``names_read``, ``names_assigned``, ``names_local``: the free names it reads, the global
  names a script creates (``var``, function declarations, assignments to undeclared names)
  and the names a script keeps to itself (top-level ``let``, ``const``, ``class``), for
  ``statifier check``.
- ``root``: for a location, the variable it writes into (``order`` for ``order.lines[0]``).
- ``calls``: the names called directly (``f(x)``), to find host functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final, Literal

from statifier.datamodel.base import DatamodelUnavailable

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

Kind = Literal["expression", "location", "script"]

IMPLICIT_KEYS: Final = frozenset({"valueOf", "toString", "join"})
"""Property names the engine calls without a call in the source (``a + b``, ``` `${a}` ```,
``String(array)``): an object literal that names one may run chart code implicitly."""

PURE_METHODS: Final = frozenset(
    {
        # Array.prototype (and TypedArray's: the same names read there too)
        "at", "concat", "entries", "flat", "includes", "indexOf", "join", "keys",
        "lastIndexOf", "slice", "toReversed", "toSpliced", "values", "with",
        # String.prototype
        "charAt", "charCodeAt", "codePointAt", "endsWith", "isWellFormed", "localeCompare",
        "normalize", "padEnd", "padStart", "repeat", "split", "startsWith", "substr",
        "substring", "toLocaleLowerCase", "toLocaleUpperCase", "toLowerCase", "toUpperCase",
        "toWellFormed", "trim", "trimEnd", "trimStart",
        # Number.prototype
        "toExponential", "toFixed", "toPrecision",
        # Object.prototype, and what every prototype has
        "hasOwnProperty", "isPrototypeOf", "propertyIsEnumerable", "toLocaleString",
        "toString", "valueOf",
        # Map, Set, WeakMap, WeakSet (and Reflect's)
        "get", "has",
    }
)  # fmt: skip
"""Method names that read on every built-in prototype that has them, and call no function
they are given (``map``, ``sort``, ``test``, ``replace``... are not here: they call back, or
write a regular expression's ``lastIndex``)."""

PURE_FUNCTIONS: Final = frozenset(
    {
        "Boolean", "Number", "String", "parseFloat", "parseInt", "isFinite", "isNaN",
        "encodeURI", "encodeURIComponent", "decodeURI", "decodeURIComponent",
        "Array.isArray", "Object.keys", "Object.values", "Object.entries",
        "Number.isFinite", "Number.isInteger", "Number.isNaN", "Number.isSafeInteger",
        "Number.parseFloat", "Number.parseInt", "String.fromCharCode", "String.fromCodePoint",
    }
)  # fmt: skip
"""Built-in functions (and ``Math``'s, every one) that read and call back nothing."""

_READ_ONLY: Final = frozenset(
    {
        "program",
        "expression_statement",
        "parenthesized_expression",
        "sequence_expression",
        "identifier",
        "property_identifier",
        "shorthand_property_identifier",
        "private_property_identifier",
        "this",
        "number",
        "string",
        "string_fragment",
        "escape_sequence",
        "template_string",
        "template_substitution",
        "regex",
        "regex_pattern",
        "regex_flags",
        "true",
        "false",
        "null",
        "undefined",
        "comment",
        "binary_expression",
        "ternary_expression",
        "member_expression",
        "subscript_expression",
        "optional_chain",
        "array",
        "object",
        "pair",
    }
)
"""Node kinds that never write (see ``_writes``: unary ``delete``, object keys the engine
calls and the bodies of function literals are judged on their own)."""

_FUNCTIONS: Final = frozenset(
    {
        "function_expression",
        "function_declaration",
        "generator_function",
        "generator_function_declaration",
        "arrow_function",
        "method_definition",
    }
)
_CLASSES: Final = frozenset({"class", "class_declaration"})
_BODY_STATEMENTS: Final = frozenset(
    {"statement_block", "return_statement", "expression_statement", "empty_statement"}
)
"""Statements a function literal's body may hold and still count as write-free when the
engine might call it implicitly (a getter of an object literal)."""


@dataclass(frozen=True, slots=True)
class Analysis:
    """What :func:`analyse` found in one source (see the module docstring)."""

    writes: bool
    pure: bool = False
    accessors: bool = True
    """Whether an object literal in it may define an accessor (``get x() {}``): a value it
    builds without one is read directly, not through property descriptors."""
    in_ids: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] = ()
    """``(text, how)`` of every function literal: ``how`` is ``expression`` (rebuilt as
    ``(text)``), ``method`` (rebuilt as the one method of ``({text})``) or ``none`` (a
    getter, a setter, a computed name: not rebuilt)."""
    names_read: frozenset[str] = frozenset()
    names_assigned: frozenset[str] = frozenset()
    names_local: frozenset[str] = frozenset()
    root: str = ""
    member: str | None = None
    """For a location that writes into a property, that property's name when the source
    spells it out (``a.b.last``, ``a.b['last']``); None otherwise (``a[i]``, ``a``)."""
    target: tuple[str, str, bool] | None = None
    """For a location that writes into a property: the source of the object it writes
    into, and the key (the property's name, or with ``True`` the source of the index:
    ``a.b[i]`` is ``("a.b", "i", True)``); None otherwise."""
    calls: frozenset[str] = frozenset()
    parsed: bool = field(default=True)
    """False when the parser found an error (then only ``writes=True`` is known)."""


@lru_cache(maxsize=1)
def _parser() -> Parser:
    try:
        import tree_sitter_javascript
        from tree_sitter import Language, Parser
    except ImportError as exc:
        raise DatamodelUnavailable(
            "the ecmascript datamodel needs tree-sitter and its JavaScript grammar: "
            "install the extra with `pip install 'statifier[ecmascript]'`"
        ) from exc
    return Parser(Language(tree_sitter_javascript.language()))


def load_parser() -> None:
    """Import the parser now, or raise :class:`DatamodelUnavailable`."""
    _parser()


_UNPARSED: Final = Analysis(writes=True, parsed=False)


@lru_cache(maxsize=8192)
def analyse(kind: Kind, source: str) -> Analysis:
    """The :class:`Analysis` of ``source`` read as an expression, a location or a script."""
    # An expression or a location is parsed in parentheses, as the engine compiles it (an
    # object literal is not a block there); the newline ends a trailing line comment.
    prefix = "" if kind == "script" else "("
    text = f"{prefix}{source}\n" + ("" if kind == "script" else ")")
    data = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(data)
    root = tree.root_node
    if root.has_error:
        return _UNPARSED
    reader = _Reader(data)
    pure = False
    if kind == "script":
        body: Node = root
        writes = True
    else:
        statement = root.named_children[0] if root.named_child_count == 1 else None
        if statement is None or statement.type != "expression_statement":
            return _UNPARSED
        body = statement
        writes = reader.writes(statement)
        pure = writes and _PureReader(data).writes(statement) is False
    scope = _Scope(reader, root)
    return Analysis(
        writes=writes,
        pure=pure,
        accessors=reader.accessors(root),
        in_ids=tuple(dict.fromkeys(reader.in_ids(root))),
        functions=tuple(dict.fromkeys(reader.functions(root))),
        names_read=frozenset(scope.free),
        names_assigned=frozenset(scope.globals_created) if kind == "script" else frozenset(),
        names_local=frozenset(scope.top_lexical) if kind == "script" else frozenset(),
        root=reader.root_of(body) if kind == "location" else "",
        member=reader.member_of(body) if kind == "location" else None,
        target=reader.target_of(body) if kind == "location" else None,
        calls=frozenset(reader.calls(root)),
    )


class _Reader:
    """Walks one parsed source (``data`` is its UTF-8 text)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def text(self, node: Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")

    # -- writes ------------------------------------------------------------------------

    def writes(self, node: Node) -> bool:
        """Whether evaluating ``node`` may write (see the module docstring)."""
        kind = node.type
        if kind in _FUNCTIONS:
            # Creating a function runs none of it; a getter the engine calls implicitly
            # runs its body, so the body must not write either.
            return self._body_writes(node)
        if kind == "call_expression":
            return self.in_literal(node) is None
        if kind == "unary_expression":
            operator = node.child_by_field_name("operator")
            if operator is None or operator.type == "delete":
                return True
        elif kind == "pair":
            key = node.child_by_field_name("key")
            if key is None or self._implicit_key(key):
                return True
        elif kind not in _READ_ONLY:
            return True
        return any(self.writes(child) for child in node.named_children)

    def _implicit_key(self, key: Node) -> bool:
        if key.type == "computed_property_name":
            return True  # might be Symbol.toPrimitive
        name = self.text(key).strip("'\"")
        return name in IMPLICIT_KEYS

    def _body_writes(self, node: Node) -> bool:
        if node.type == "method_definition":
            name = node.child_by_field_name("name")
            if name is None or self._implicit_key(name):
                return True
        parameters = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
        if (
            parameters is not None
            and parameters.type != "identifier"
            and any(p.type != "identifier" for p in parameters.named_children)
        ):
            return True  # default values and patterns run on every call
        body = node.child_by_field_name("body")
        if body is None:
            return True
        if body.type != "statement_block":
            return self.writes(body)
        return self._statements_write(body)

    def _statements_write(self, node: Node) -> bool:
        for child in node.named_children:
            if child.type == "comment":
                continue
            if child.type not in _BODY_STATEMENTS:
                return True
            if child.type == "statement_block":
                if self._statements_write(child):
                    return True
            elif any(self.writes(c) for c in child.named_children):
                return True
        return False

    # -- In() --------------------------------------------------------------------------

    def in_literal(self, node: Node) -> str | None:
        """The id of ``In('id')`` written with one plain string literal, else None."""
        function = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        if function is None or arguments is None or function.type != "identifier":
            return None
        if self.text(function) != "In" or node.child_by_field_name("optional_chain"):
            return None
        if arguments.type != "arguments" or arguments.named_child_count != 1:
            return None
        argument = arguments.named_children[0]
        if argument.type != "string":
            return None
        if any(part.type != "string_fragment" for part in argument.named_children):
            return None  # an escape sequence: the id is not spelled out
        return "".join(self.text(part) for part in argument.named_children)

    def in_ids(self, node: Node) -> Iterator[str]:
        for found in _walk(node):
            if found.type == "call_expression":
                state_id = self.in_literal(found)
                if state_id is not None:
                    yield state_id

    def accessors(self, node: Node) -> bool:
        """Whether a getter or setter is written anywhere in ``node``."""
        for found in _walk(node):
            if found.type == "method_definition" and self._rebuilt_as(found) == "none":
                return True
        return False

    def calls(self, node: Node) -> Iterator[str]:
        for found in _walk(node):
            if found.type == "call_expression":
                function = found.child_by_field_name("function")
                if function is not None and function.type == "identifier":
                    yield self.text(function)

    # -- function literals -------------------------------------------------------------

    def functions(self, node: Node) -> Iterator[tuple[str, str]]:
        for found in _walk(node):
            if found.type in _FUNCTIONS:
                yield self.text(found), self._rebuilt_as(found)

    def _rebuilt_as(self, node: Node) -> str:
        if node.type != "method_definition":
            return "expression"
        name = node.child_by_field_name("name")
        if name is None or name.type == "computed_property_name":
            return "none"
        first = node.children[0] if node.children else None
        if first is not None and first.type in ("get", "set", "static"):
            return "none"
        return "method"

    # -- locations ---------------------------------------------------------------------

    def member_of(self, node: Node) -> str | None:
        """See ``Analysis.member``."""
        return _member(self, node)

    def target_of(self, node: Node) -> tuple[str, str, bool] | None:
        """See ``Analysis.target``."""
        while node.type in ("expression_statement", "parenthesized_expression"):
            if node.named_child_count != 1:
                return None
            node = node.named_children[0]
        target = node.child_by_field_name("object")
        if target is None:
            return None
        if node.type == "member_expression":
            name = node.child_by_field_name("property")
            if name is None or name.type != "property_identifier":
                return None  # a private name: not a property of the object
            return (self.text(target), self.text(name), False)
        if node.type == "subscript_expression":
            index = node.child_by_field_name("index")
            return None if index is None else (self.text(target), self.text(index), True)
        return None

    def root_of(self, node: Node) -> str:
        """The variable a location writes into: the identifier its member chain starts at."""
        while True:
            if node.type in ("expression_statement", "parenthesized_expression"):
                if node.named_child_count != 1:
                    return ""
                node = node.named_children[0]
            elif node.type in ("member_expression", "subscript_expression"):
                target = node.child_by_field_name("object")
                if target is None:
                    return ""
                node = target
            elif node.type == "identifier":
                return self.text(node)
            else:
                return ""


class _PureReader(_Reader):
    """``_Reader`` that also lets through calls of ``PURE_METHODS`` and ``PURE_FUNCTIONS``
    (and not a function literal anywhere: one could be handed to a built-in as a
    callback)."""

    def writes(self, node: Node) -> bool:
        kind = node.type
        if kind in _FUNCTIONS or kind in _CLASSES:
            return True
        if kind == "call_expression" and self.in_literal(node) is None:
            function = node.child_by_field_name("function")
            arguments = node.child_by_field_name("arguments")
            if function is None or arguments is None or arguments.type != "arguments":
                return True
            if not self._pure_callee(function):
                return True
            target = function.child_by_field_name("object")
            parts = [child for child in arguments.named_children]
            if target is not None and function.type == "member_expression":
                parts.append(target)
            return any(self.writes(part) for part in parts)
        return super().writes(node)

    def _pure_callee(self, function: Node) -> bool:
        if function.type == "identifier":
            return self.text(function) in PURE_FUNCTIONS
        if function.type != "member_expression":
            return False
        target = function.child_by_field_name("object")
        name = function.child_by_field_name("property")
        if target is None or name is None or name.type != "property_identifier":
            return False
        method = self.text(name)
        if target.type == "identifier":
            owner = self.text(target)
            if owner == "Math" or f"{owner}.{method}" in PURE_FUNCTIONS:
                return True
        return method in PURE_METHODS


def _member(reader: _Reader, node: Node) -> str | None:
    while node.type in ("expression_statement", "parenthesized_expression"):
        if node.named_child_count != 1:
            return None
        node = node.named_children[0]
    if node.type == "member_expression":
        name = node.child_by_field_name("property")
        return (
            reader.text(name) if name is not None and name.type == "property_identifier" else None
        )
    if node.type == "subscript_expression":
        index = node.child_by_field_name("index")
        if index is not None and index.type == "string":
            parts = index.named_children
            if all(part.type == "string_fragment" for part in parts):
                return "".join(reader.text(part) for part in parts)
    return None


def _walk(node: Node) -> Iterator[Node]:
    """Every node under ``node`` (itself included), depth first, without recursion."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.named_children))


class _Scope:
    """Names a source binds, reads and creates, with ECMAScript's scoping rules.

    Approximate where it cannot matter for ``statifier check``: a block's ``let`` counts
    for the whole enclosing function, a function's names for its whole body.
    """

    def __init__(self, reader: _Reader, root: Node) -> None:
        self.reader = reader
        self.free: set[str] = set()
        self.globals_created: set[str] = set()
        self.top_lexical: set[str] = set()
        names, lexical = self._declared(root)
        self.top_lexical = lexical - names
        self.top_var = frozenset(names | lexical)
        self._visit(root)
        # Names the program declares with var or function become chart variables.
        self.globals_created.update(names - lexical)

    # -- declarations ------------------------------------------------------------------

    def _declared(self, node: Node) -> tuple[set[str], set[str]]:
        """The ``var`` and function names, and the ``let``/``const``/``class`` names,
        declared for ``node``'s whole body (not inside nested functions)."""
        names: set[str] = set()
        lexical: set[str] = set()
        stack = list(node.named_children)
        while stack:
            child = stack.pop()
            kind = child.type
            if kind in _FUNCTIONS or kind in _CLASSES:
                name = child.child_by_field_name("name")
                if name is not None and kind.endswith("declaration"):
                    target = lexical if kind == "class_declaration" else names
                    target.add(self.reader.text(name))
                continue
            if kind in ("variable_declaration", "lexical_declaration"):
                target = lexical if kind == "lexical_declaration" else names
                for declarator in child.named_children:
                    pattern = declarator.child_by_field_name("name")
                    if pattern is not None:
                        target.update(self._pattern_names(pattern))
            elif kind == "for_in_statement":
                self._loop_names(child, names, lexical)
            stack.extend(child.named_children)
        return names, lexical

    def _loop_names(self, node: Node, names: set[str], lexical: set[str]) -> None:
        left = node.child_by_field_name("left")
        keyword = node.child_by_field_name("kind")
        if left is not None and keyword is not None:
            target = names if self.reader.text(keyword) == "var" else lexical
            target.update(self._pattern_names(left))

    def _pattern_names(self, node: Node) -> set[str]:
        found: set[str] = set()
        stack = [node]
        while stack:
            current = stack.pop()
            kind = current.type
            if kind in ("identifier", "shorthand_property_identifier_pattern"):
                found.add(self.reader.text(current))
            elif kind in _PATTERN_PARTS:
                part = current.child_by_field_name(_PATTERN_PARTS[kind])
                if part is not None:
                    stack.append(part)
            elif kind in _PATTERNS:
                stack.extend(current.named_children)
        return found

    # -- references --------------------------------------------------------------------

    def _visit(self, root: Node) -> None:
        stack: list[tuple[Node, tuple[frozenset[str], ...]]] = [(root, ())]
        while stack:
            node, chain = stack.pop()
            handler = _HANDLERS.get(node.type)
            if handler is not None:
                stack.extend(handler(self, node, chain))
            else:
                stack.extend((child, chain) for child in node.named_children)

    def _bound(self, name: str, chain: tuple[frozenset[str], ...]) -> bool:
        return name in self.top_var or any(name in scope for scope in chain)

    def _read(self, name: str, chain: tuple[frozenset[str], ...]) -> None:
        if not self._bound(name, chain):
            self.free.add(name)

    def _identifier(self, node: Node, chain: Chain) -> Children:
        parent = node.parent
        if parent is not None and parent.type in _LABELS:
            return ()
        name = self.reader.text(node)
        if parent is not None and parent.type == "update_expression":
            self._create(name, chain)
        self._read(name, chain)
        return ()

    def _shorthand(self, node: Node, chain: Chain) -> Children:
        self._read(self.reader.text(node), chain)
        return ()

    def _create(self, name: str, chain: Chain) -> None:
        if not any(name in scope for scope in chain):
            self.globals_created.add(name)

    def _assignment(self, node: Node, chain: Chain) -> Children:
        left = node.child_by_field_name("left")
        if left is None or left.type not in ("identifier", "array_pattern", "object_pattern"):
            return [(child, chain) for child in node.named_children]
        for name in self._pattern_names(left):
            self._create(name, chain)
            if node.type == "augmented_assignment_expression":
                self._read(name, chain)
        right = node.child_by_field_name("right")
        found = [(default, chain) for default in self._defaults(left)]
        if right is not None:
            found.append((right, chain))
        return found

    def _declarator(self, node: Node, chain: Chain) -> Children:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        found = [] if name is None else [(d, chain) for d in self._defaults(name)]
        if value is not None:
            found.append((value, chain))
        return found

    def _member(self, node: Node, chain: Chain) -> Children:
        target = node.child_by_field_name("object")
        return [] if target is None else [(target, chain)]

    def _nothing(self, node: Node, chain: Chain) -> Children:
        return ()

    def _class(self, node: Node, chain: Chain) -> Children:
        name = node.child_by_field_name("name")
        inner = chain
        if name is not None and node.type == "class":
            inner = (*chain, frozenset({self.reader.text(name)}))
        return [(child, inner) for child in node.named_children if child != name]

    def _catch(self, node: Node, chain: Chain) -> Children:
        parameter = node.child_by_field_name("parameter")
        inner = chain
        if parameter is not None:
            inner = (*chain, frozenset(self._pattern_names(parameter)))
        return [(child, inner) for child in node.named_children if child != parameter]

    def _function(self, node: Node, chain: Chain) -> Children:
        own: set[str] = {"arguments"}
        name = node.child_by_field_name("name")
        if name is not None and node.type in ("function_expression", "generator_function"):
            own.add(self.reader.text(name))
        parameters = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
        if parameters is not None:
            own.update(self._pattern_names(parameters))
        body = node.child_by_field_name("body")
        if body is not None and body.type == "statement_block":
            names, lexical = self._declared(body)
            own.update(names | lexical)
        inner = (*chain, frozenset(own))
        found: list[tuple[Node, Chain]] = []
        if parameters is not None:
            found.extend((default, inner) for default in self._defaults(parameters))
        if body is not None:
            found.append((body, inner))
        if name is not None and name.type == "computed_property_name":
            found.append((name, chain))
        return found

    def _defaults(self, node: Node) -> Iterator[Node]:
        """The expressions a pattern runs: default values and computed keys."""
        for found in _walk(node):
            if found.type in ("assignment_pattern", "object_assignment_pattern"):
                right = found.child_by_field_name("right")
                if right is not None:
                    yield right
            elif found.type == "pair_pattern":
                key = found.child_by_field_name("key")
                if key is not None and key.type == "computed_property_name":
                    yield key


type Chain = tuple[frozenset[str], ...]
type Children = list[tuple[Node, Chain]] | tuple[()]

_LABELS: Final = frozenset({"labeled_statement", "break_statement", "continue_statement"})
_PATTERNS: Final = frozenset(
    {"array_pattern", "object_pattern", "rest_pattern", "formal_parameters"}
)
_PATTERN_PARTS: Final = {
    "pair_pattern": "value",
    "assignment_pattern": "left",
    "object_assignment_pattern": "left",
}
_HANDLERS: Final[dict[str, Any]] = {
    **dict.fromkeys(_FUNCTIONS, _Scope._function),
    **dict.fromkeys(_CLASSES, _Scope._class),
    "catch_clause": _Scope._catch,
    "identifier": _Scope._identifier,
    "shorthand_property_identifier": _Scope._shorthand,
    "assignment_expression": _Scope._assignment,
    "augmented_assignment_expression": _Scope._assignment,
    "variable_declarator": _Scope._declarator,
    "member_expression": _Scope._member,
    "statement_identifier": _Scope._nothing,
    "property_identifier": _Scope._nothing,
}
