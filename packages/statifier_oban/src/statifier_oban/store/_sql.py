"""The one loader of our SQL: named ``.sql`` files, filled in, rendered once and cached.

Every statement statifier_oban runs against ``oban_jobs`` (and the DDL of its indexes)
is a file in ``statifier_oban/store/sql/``, written to be read by an operator. A file holds
SQL with psycopg parameters (``%(name)s``, bound at execution) and a few placeholders
in braces, filled here from a fixed table, never from a job row or a caller's data:

``{prefix}``
    the schema of oban's tables, checked by :func:`check_prefix` (a plain identifier,
    written unquoted, exactly as oban writes it);
``{timer_worker}``, ``{invoke_worker}``, ``{child_start_worker}``, ``{post_worker}``
    our worker names, as SQL string literals;
``{pending_states}``
    the job states a cancel reaches and a pending count counts, as a list of literals;
``{timer_dedup_index}`` and the other index names
    our index names (:data:`statifier_oban._names.INDEXES`);
``{scope_statistics}``
    the name of our planner statistics (:data:`statifier_oban._names.SCOPE_STATISTICS`);
``{announce_horizon_ms}``
    :data:`statifier_oban._names.ANNOUNCE_HORIZON_MS`, as an integer literal;
``{worker}``, ``{key}``
    chosen per use (the one cancel statement serves every worker, the one fan-out job
    insert both fan-out workers): one of our worker names, and the args key a cancel
    matches (``send_id`` or ``invoke_id``), as literals.
``{acked}``
    chosen per use of ``ack_jobs.sql``: the rows a batch of acks changes, by an array of
    ids (``ids``: the fragment ``acked_ids.sql``) or by the one id of a batch of one
    (``id``: ``acked_id.sql``, which PostgreSQL plans once).

Worker names and keys are literals in the text, never parameters: a partial index's
predicate (``worker = '...'``) and its expression (``args->>'send_id'``) must be provable
when a plan is built, including a generic plan of a prepared statement, or PostgreSQL
can neither use the index for a cancel nor infer it as an ``ON CONFLICT`` arbiter.

This is the only place statifier_oban builds SQL text from pieces (what ruff's ``S608``
guards against), and why that is safe: every piece filled in is our packaged file, the
prefix checked by :func:`check_prefix`, or a literal from the fixed tables above, escaped
by ``_literal``; values from callers and job rows always travel as bound parameters.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources
from typing import Final, LiteralString

from .._errors import InvalidPrefix, StatementError
from .._names import (
    ANNOUNCE_HORIZON_MS,
    CASCADE_WORKER,
    CHILD_START_DEDUP_INDEX,
    CHILD_START_WORKER,
    INVOKE_DEDUP_INDEX,
    INVOKE_PENDING_INDEX,
    INVOKE_WORKER,
    MESSAGE_WORKER,
    PENDING_STATES,
    POST_WORKER,
    SCOPE_STATISTICS,
    SETTLEMENT_WORKER,
    TIMER_DEDUP_INDEX,
    TIMER_PENDING_INDEX,
    TIMER_WORKER,
)

WORKERS: Final = frozenset(
    {
        TIMER_WORKER,
        INVOKE_WORKER,
        CHILD_START_WORKER,
        SETTLEMENT_WORKER,
        CASCADE_WORKER,
        MESSAGE_WORKER,
    }
)
"""The worker names a statement may be rendered for."""

CANCEL_KEYS: Final = frozenset({"send_id", "invoke_id"})
"""The args keys a cancel matches on (each backed by a pending index)."""

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_MAX_IDENTIFIER = 63  # NAMEDATALEN - 1

# SQL key words that cannot name a schema unquoted (pg_get_keywords() catcode 'R' and 'T',
# PostgreSQL 18). oban writes the prefix unquoted, so these would break its statements.
_NOT_SCHEMA_NAMES: Final = frozenset(
    """
    all analyse analyze and any array as asc asymmetric both case cast check collate column
    constraint create current_catalog current_date current_role current_time
    current_timestamp current_user default deferrable desc distinct do else end except false
    fetch for foreign from grant group having in initially intersect into lateral leading
    limit localtime localtimestamp not null offset on only or order placing primary
    references returning select session_user some symmetric system_user table then to
    trailing true union unique user using variadic when where window with
    authorization binary collation concurrently cross current_schema freeze full ilike inner
    is isnull join left like natural notnull outer overlaps right similar tablesample verbose
    """.split()  # noqa: SIM905 (a word list reads better as text)
)


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is a plain schema name oban can use unquoted; else InvalidPrefix.

    Plain means lowercase ASCII letters, digits and underscores, not starting with a digit,
    at most 63 characters, and not a reserved SQL key word. (oban interpolates the prefix
    into its SQL unquoted, which folds case, but checks its tables by exact name, so a
    prefix with capitals could never work.)
    """
    if not isinstance(prefix, str):
        raise InvalidPrefix(f"schema prefix must be a string, not {type(prefix).__name__}")
    if not _IDENTIFIER.fullmatch(prefix):
        raise InvalidPrefix(
            f"schema prefix {prefix!r} is not a plain identifier "
            "(lowercase letters, digits and underscores, not starting with a digit)"
        )
    if len(prefix) > _MAX_IDENTIFIER:
        raise InvalidPrefix(f"schema prefix {prefix!r} is longer than {_MAX_IDENTIFIER} characters")
    if prefix in _NOT_SCHEMA_NAMES:
        raise InvalidPrefix(f"schema prefix {prefix!r} is a reserved SQL key word")
    return prefix


def _literal(value: str) -> str:
    """``value`` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


_FIXED: Final = {
    "timer_worker": _literal(TIMER_WORKER),
    "invoke_worker": _literal(INVOKE_WORKER),
    "child_start_worker": _literal(CHILD_START_WORKER),
    "post_worker": _literal(POST_WORKER),
    "pending_states": ", ".join(_literal(state) for state in PENDING_STATES),
    "timer_dedup_index": TIMER_DEDUP_INDEX,
    "timer_pending_index": TIMER_PENDING_INDEX,
    "invoke_dedup_index": INVOKE_DEDUP_INDEX,
    "child_start_dedup_index": CHILD_START_DEDUP_INDEX,
    "invoke_pending_index": INVOKE_PENDING_INDEX,
    "scope_statistics": SCOPE_STATISTICS,
    "announce_horizon_ms": str(int(ANNOUNCE_HORIZON_MS)),
}
"""Placeholders with one value for every statement."""

_CHOICES: Final = {"worker": WORKERS, "key": CANCEL_KEYS, "acked": frozenset({"ids", "id"})}
"""Placeholders chosen per use, and the values each may take."""

_CHOSEN_FRAGMENTS: Final = {"acked": {"ids": "acked_ids", "id": "acked_id"}}
"""Placeholders chosen per use whose value names a fragment: the file filled in (without
its comment lines)."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

RENDERED_CACHE_SIZE: Final = 256
"""Rendered statements kept: (statement, prefix, choices) combinations, a few per prefix."""


def statement(name: str, prefix: str, **choices: str) -> LiteralString:
    """The text of ``sql/<name>.sql`` for schema ``prefix``, placeholders filled in.

    ``choices`` fill ``{worker}``, ``{key}`` and ``{acked}`` where a statement has them. Raises
    :class:`InvalidPrefix` for an unusable prefix and :class:`StatementError` for an
    unknown statement, an unknown placeholder, or a choice outside its allowed values.
    """
    check_prefix(prefix)
    for option, value in choices.items():
        allowed = _CHOICES.get(option)
        if allowed is None or value not in allowed:
            raise StatementError(f"{option}={value!r} is not a choice of statement {name!r}")
    return _render(name, prefix, tuple(sorted(choices.items())))


@lru_cache(maxsize=RENDERED_CACHE_SIZE)
def _render(name: str, prefix: str, choices: tuple[tuple[str, str], ...]) -> LiteralString:
    values = {
        **_FIXED,
        "prefix": prefix,
        **{
            k: _fragment(_CHOSEN_FRAGMENTS[k][v]) if k in _CHOSEN_FRAGMENTS else _literal(v)
            for k, v in choices
        },
    }

    def fill(match: re.Match[str]) -> str:
        placeholder = match.group(1)
        if placeholder not in values:
            raise StatementError(
                f"statement {name!r} has an unfilled placeholder {{{placeholder}}}"
            )
        return values[placeholder]

    # Our own packaged file, with only the checked prefix and constant literals filled in:
    # as trusted as a literal in the code, which is what LiteralString stands for.
    return _PLACEHOLDER.sub(fill, _source(name))


def _fragment(name: str) -> str:
    """A fragment file's SQL, its comment lines left out (it is filled in mid-clause)."""
    lines = _source(name).splitlines()
    return " ".join(line.strip() for line in lines if not line.lstrip().startswith("--"))


@cache
def _source(name: str) -> str:
    """The file's text as shipped (there are a dozen files; each is read once)."""
    if not _NAME.fullmatch(name):
        raise StatementError(f"{name!r} is not a statement name")
    try:
        folder = resources.files("statifier_oban.store")
        return folder.joinpath("sql", f"{name}.sql").read_text("utf-8")
    except FileNotFoundError:
        raise StatementError(f"no statement {name!r} (sql/{name}.sql is not installed)") from None
