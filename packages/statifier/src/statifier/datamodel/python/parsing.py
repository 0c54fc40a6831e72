"""Turning source text into a size- and depth-checked Python syntax tree.

The text handed to :func:`ast.parse` is a normalised copy of the caller's source (wrapped in
parentheses for expressions, dedented for scripts); :class:`ParsedSource` maps positions in the
copy back to the caller's text so errors point at what the author wrote.
"""

from __future__ import annotations

import ast
import warnings
from typing import Final, Literal

from statifier.datamodel.python.errors import ExpressionSyntaxError
from statifier.datamodel.python.limits import MAX_AST_DEPTH

# Operator and context nodes are leaves that carry no nesting of their own.
_LEAF_TYPES: Final = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)


Located = ast.expr | ast.stmt | ast.keyword
"""Syntax-tree nodes that carry a source position."""


class ParsedSource:
    """A parsed source together with the mapping from parsed positions to source positions."""

    __slots__ = ("_lines", "_shifts", "source", "tree")

    source: str
    tree: ast.AST

    def __init__(self, source: str, parsed_text: str, tree: ast.AST, shifts: list[int]) -> None:
        self.source = source
        self.tree = tree
        self._lines = parsed_text.split("\n")
        self._shifts = shifts

    def expression(self) -> ast.expr:
        """Return the body of a source parsed as an expression."""
        if not isinstance(self.tree, ast.Expression):
            raise TypeError("not parsed as an expression")
        return self.tree.body

    def statements(self) -> list[ast.stmt]:
        """Return the statements of a source parsed as a script."""
        if not isinstance(self.tree, ast.Module):
            raise TypeError("not parsed as a script")
        return self.tree.body

    def error(self, message: str, node: Located | None = None) -> ExpressionSyntaxError:
        """Build an :class:`ExpressionSyntaxError` located at ``node`` (or at the start)."""
        if node is None:
            return ExpressionSyntaxError(message, self.source, 1, 0)
        line = node.lineno
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        # AST columns count UTF-8 bytes; callers think in characters.
        prefix = text.encode("utf-8")[: node.col_offset].decode("utf-8", errors="ignore")
        line, column = _source_position(self.source, self._shifts, line, len(prefix))
        return ExpressionSyntaxError(message, self.source, line, column)


def _source_position(source: str, shifts: list[int], line: int, column: int) -> tuple[int, int]:
    """Map a (1-based line, 0-based character column) of the parsed text to ``source``."""
    source_lines = source.split("\n")
    if line > len(source_lines):
        # Only the closing parenthesis added around expressions lives past the last line.
        return len(source_lines), len(source_lines[-1])
    line = max(line, 1)
    return line, max(column + shifts[line - 1], 0)


def parse_expression_source(source: str, max_length: int) -> ParsedSource:
    """Parse ``source`` as a single expression (whitespace and newlines around it allowed)."""
    _check_length(source, max_length, "expression")
    if not source.strip():
        raise ExpressionSyntaxError("empty expression", source, 1, 0)
    # Parentheses let the expression span lines and start with whitespace; the newline keeps a
    # trailing comment from swallowing the closing parenthesis.
    text = f"({source}\n)"
    shifts = [-1] + [0] * source.count("\n")
    return _parse(source, text, "eval", shifts)


def parse_script_source(source: str, max_length: int) -> ParsedSource:
    """Parse ``source`` as a sequence of statements, ignoring a common indentation."""
    _check_length(source, max_length, "script")
    lines = source.split("\n")
    margin = _common_margin(lines)
    dedented = [line[len(margin) :] if line.strip() else "" for line in lines]
    shifts = [len(margin) if line.strip() else 0 for line in lines]
    return _parse(source, "\n".join(dedented), "exec", shifts)


def _check_length(source: str, max_length: int, what: str) -> None:
    if len(source) > max_length:
        raise ExpressionSyntaxError(
            f"{what} is too long ({len(source)} characters; the limit is {max_length})",
            source,
            1,
            0,
        )


def _common_margin(lines: list[str]) -> str:
    margins = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    if not margins:
        return ""
    # The prefix shared by the smallest and the largest margin is shared by all of them, which
    # keeps this linear even for hostile indentation.
    smallest, largest = min(margins), max(margins)
    length = 0
    for left, right in zip(smallest, largest, strict=False):
        if left != right:
            break
        length += 1
    return smallest[:length]


def _parse(
    source: str, text: str, mode: Literal["eval", "exec"], shifts: list[int]
) -> ParsedSource:
    try:
        with warnings.catch_warnings(action="ignore"):
            tree = ast.parse(text, mode=mode)
    except SyntaxError as exc:
        line, column = _source_position(source, shifts, exc.lineno or 1, (exc.offset or 1) - 1)
        raise ExpressionSyntaxError(exc.msg, source, line, column) from None
    except (RecursionError, MemoryError):
        raise ExpressionSyntaxError("expression is too deeply nested", source, 1, 0) from None
    except (ValueError, OverflowError) as exc:
        raise ExpressionSyntaxError(str(exc), source, 1, 0) from None
    parsed = ParsedSource(source, text, tree, shifts)
    if _deeper_than(tree, MAX_AST_DEPTH):
        too_deep = _find_too_deep(tree)
        raise parsed.error(
            f"expression is too deeply nested (the limit is {MAX_AST_DEPTH} levels)",
            too_deep or None,
        )
    return parsed


def _deeper_than(tree: ast.AST, limit: int) -> bool:
    """Whether the tree nests deeper than ``limit`` levels (leaf node kinds not counted).

    Level by level, without building a tuple per node: every expression of a chart is
    measured, so this runs once per syntax node compiled (the slower
    :func:`_find_too_deep` then locates the culprit, for the error only).
    """
    level: list[ast.AST] = [tree]
    depth = 0
    leaves = _LEAF_TYPES
    while level:
        if depth > limit:
            return True
        below: list[ast.AST] = []
        add = below.append
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast.AST) and not isinstance(item, leaves):
                            add(item)
                elif isinstance(value, ast.AST) and not isinstance(value, leaves):
                    add(value)
        level = below
        depth += 1
    return False


def _find_too_deep(tree: ast.AST) -> Located | Literal[False] | None:
    """Return the first node (or its nearest located ancestor) past the depth limit, or False."""
    # Iterative so that measuring a pathological tree cannot itself overflow the stack.
    stack: list[tuple[ast.AST, int, Located | None]] = [(tree, 0, None)]
    while stack:
        node, depth, located = stack.pop()
        if isinstance(node, Located):
            located = node
        if depth > MAX_AST_DEPTH:
            return located
        stack.extend(
            (child, depth + 1, located)
            for child in ast.iter_child_nodes(node)
            if not isinstance(child, _LEAF_TYPES)
        )
    return False
