"""The one loader of our SQL: named ``.sql`` files in ``statifier_persistence/sql/``.

A file holds SQL with psycopg parameters (``%(name)s``, bound at execution) and a few
placeholders in braces, filled here from a fixed table, never from a caller's data or
a stored row:

``{schema}``
    the configured schema, checked by :func:`check_prefix` and written quoted;
``{columns}``
    the columns of an ``Execution`` (the fragment ``execution_columns.sql``), in the order
    ``statifier_persistence._rows`` decodes them;
``{revision_columns}``
    the columns of a ``Revision`` (the fragment ``revision_columns.sql``);
``{position_columns}``
    the position, its counters and the armed list of a locked read (the fragment
    ``position_columns.sql``), in the order ``_rows.decode_position`` reads them;
``{journal}``
    the history entry and the notification of a statement that changed executions (the
    fragment ``journal.sql``: two CTEs after the ``updated`` one);
``{lock}``
    chosen per use: empty, ``FOR NO KEY UPDATE`` (a step locks the execution it drives),
    ``FOR UPDATE`` (a chart revision being retired) or ``FOR SHARE`` (a chart revision
    taking executions, against its retirement; a waiter reading an execution after a
    step);
``{stepped}``
    chosen per use: the rows a store writes (``store_executions.sql``), from arrays for
    a group of steps (``rows``: the fragment ``stepped_rows.sql``) or from one value per
    parameter for one step (``row``: ``stepped_row.sql``).
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources
from typing import Final, LiteralString

from psycopg import sql

from ._errors import InvalidPrefix, StatementError

_IDENTIFIER: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_NAME: Final = re.compile(r"[a-z][a-z0-9_]*")
_PLACEHOLDER: Final = re.compile(r"\{([a-z_]+)\}")

_CHOICES: Final = {
    "lock": frozenset({"", "FOR NO KEY UPDATE", "FOR UPDATE", "FOR SHARE"}),
    "stepped": frozenset({"rows", "row"}),
}
"""Placeholders chosen per use, and the values each may take."""

_CHOSEN_FRAGMENTS: Final = {"stepped": {"rows": "stepped_rows", "row": "stepped_row"}}
"""Placeholders chosen per use whose value names a fragment: the file filled in."""

_FRAGMENTS: Final = {
    "columns": "execution_columns",
    "revision_columns": "revision_columns",
    "position_columns": "position_columns",
    "journal": "journal",
}
"""Placeholders filled with another file's text (its own placeholders filled in turn)."""

RENDERED_CACHE_SIZE: Final = 128
"""Rendered statements kept: a dozen statements per schema, a few schemas per process."""


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a plain lowercase schema name, else ``InvalidPrefix``.

    Plain means lowercase ASCII letters, digits and underscores, not starting with a
    digit, at most 63 characters: the same rule oban's prefix follows, so one prefix
    serves both (ours is written quoted, so a key word is harmless here).
    """
    if not isinstance(prefix, str) or _IDENTIFIER.fullmatch(prefix) is None:
        raise InvalidPrefix(
            f"schema prefix {prefix!r} is not a plain identifier (lowercase letters, digits "
            "and underscores, not starting with a digit, at most 63 characters)"
        )
    return prefix


def statement(name: str, prefix: str, **choices: str) -> LiteralString:
    """The text of ``sql/<name>.sql`` for schema ``prefix``, placeholders filled in.

    This is the only place statifier_persistence builds SQL text from pieces (what ruff's
    ``S608`` guards against), and why that is safe: every piece is one of our packaged
    files, the prefix checked by :func:`check_prefix` and quoted, or a choice from the
    fixed ``_CHOICES``; values from callers and stored rows always travel as bound
    parameters.
    """
    check_prefix(prefix)
    for option, value in choices.items():
        allowed = _CHOICES.get(option)
        if allowed is None or value not in allowed:
            raise StatementError(f"{option}={value!r} is not a choice of statement {name!r}")
    return _render(name, prefix, tuple(sorted(choices.items())))


@lru_cache(maxsize=RENDERED_CACHE_SIZE)
def _render(name: str, prefix: str, choices: tuple[tuple[str, str], ...]) -> LiteralString:
    values = {"schema": sql.Identifier(prefix).as_string(None), **dict(choices)}

    def fill(match: re.Match[str]) -> str:
        placeholder = match.group(1)
        fragment = _FRAGMENTS.get(placeholder)
        if fragment is None and placeholder in values and placeholder in _CHOSEN_FRAGMENTS:
            fragment = _CHOSEN_FRAGMENTS[placeholder][values[placeholder]]
        if fragment is not None:
            return _PLACEHOLDER.sub(fill, _source(fragment).strip())
        if placeholder not in values:
            raise StatementError(
                f"statement {name!r} has an unfilled placeholder {{{placeholder}}}"
            )
        return values[placeholder]

    # Our own packaged file with only a checked, quoted schema name and fixed text filled
    # in: as trusted as a literal in the code, which is what LiteralString stands for.
    return _PLACEHOLDER.sub(fill, _source(name))


@cache
def _source(name: str) -> str:
    """A file's text as shipped (each of the dozen files is read once)."""
    if _NAME.fullmatch(name) is None:
        raise StatementError(f"{name!r} is not a statement name")
    try:
        text = resources.files("statifier_persistence").joinpath("sql", f"{name}.sql")
        return text.read_text("utf-8")
    except FileNotFoundError:
        raise StatementError(f"no statement {name!r} (sql/{name}.sql is not installed)") from None
