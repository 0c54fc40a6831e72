"""Pin sources: what still needs a chart revision before it may be retired.

A ``PinSource`` answers, for a revision and a page of its executions, how many things of
its kind still need the revision (``{"timers": 2}``). Retiring asks every source about
every execution of the revision (in pages): any count above zero refuses, and so does a
source that raises or answers something that is not a count: "could not count" is never
zero. ``ExecutionPins`` is ours (executions that are not finished);
``statifier_oban.executions.TimerPins`` counts pending timers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from psycopg import AsyncConnection

from ._db import transaction
from ._sql import statement

PIN_STATUSES: Final = ("active", "needs_migration")
"""Statuses of executions that pin their revision: they take (or will take) events."""

MAX_PIN_COUNT: Final = 2**62
"""A count above this is not a count a source could have made."""


@runtime_checkable
class PinSource(Protocol):
    """Counts what still needs a chart revision (see the module docstring).

    ``pins`` is called with the revision's identity and a page of the ids of its
    executions (every status; an empty page when it has none) and answers counts by kind,
    each an ``int`` >= 0. It raises when it cannot count. An optional ``name`` attribute
    labels its counts in reports (else its class name).
    """

    async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Mapping[str, int]:
        """Counts by kind for these executions of revision ``chart_identity``."""
        ...


@dataclass(frozen=True, slots=True)
class PinReport:
    """What the pin sources answered about one revision.

    ``counts`` maps each source's label to its counts summed over every page; a source
    that failed is named by ``failure`` (``(label, reason)``), and the sources after it
    were not asked. ``pinned`` is true when anything was counted or a source failed.
    """

    identity: str
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    failure: tuple[str, str] | None = None

    @property
    def pinned(self) -> bool:
        """Whether the revision may not be retired."""
        return self.failure is not None or any(
            n for counts in self.counts.values() for n in counts.values()
        )

    def describe(self) -> str:
        """One line: the failure, or the non-zero counts (``executions: active=2``)."""
        if self.failure is not None:
            label, reason = self.failure
            return f"pin source {label} {reason}"
        parts = []
        for label, counts in self.counts.items():
            found = ", ".join(f"{kind}={n}" for kind, n in counts.items() if n)
            if found:
                parts.append(f"{label}: {found}")
        return "; ".join(parts) or "nothing pins it"


class ExecutionPins:
    """Our pin source: the executions of the revision that are not finished, by status
    (``active``, ``needs_migration``).

    It reads through ``pool`` (an ``AsyncConnectionPool``) or ``conn``, and ``prefix`` is
    the schema of the tables (``Executions.pool`` and ``Executions.prefix``).
    """

    name = "executions"

    def __init__(
        self,
        pool: Any = None,
        *,
        prefix: str = "public",
        conn: AsyncConnection[Any] | None = None,
    ) -> None:
        self._pool = pool
        self._prefix = prefix
        self._conn = conn

    async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Mapping[str, int]:
        """``{"active": n, "needs_migration": m}`` among ``execution_ids``."""
        counts = dict.fromkeys(PIN_STATUSES, 0)
        if not execution_ids:
            return counts
        params = {"identity": chart_identity, "ids": list(execution_ids)}
        async with transaction(self._pool, self._conn) as db:
            cursor = await db.execute(statement("count_execution_pins", self._prefix), params)
            for status, count in await cursor.fetchall():
                counts[status] = int(count)
        return counts


def label_of(source: Any, taken: Mapping[str, Any]) -> str:
    """The label of ``source`` in a report: its ``name``, else its class name; made unique
    among ``taken`` with ``#2``, ``#3``..."""
    name = getattr(source, "name", None)
    base = name if isinstance(name, str) and name else type(source).__name__
    label, n = base, 1
    while label in taken:
        n += 1
        label = f"{base}#{n}"
    return label


async def ask(source: Any, identity: str, page: Sequence[str]) -> dict[str, int] | str:
    """The source's counts for one page, or why they are not counts (a raise, a bad answer)."""
    try:
        answer = await source.pins(identity, list(page))
    except Exception as exc:  # a raise is a refusal, never a zero: reported, not swallowed
        return f"raised {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    if not isinstance(answer, Mapping):
        return f"answered {type(answer).__name__}, not counts by kind"
    counts: dict[str, int] = {}
    for kind, count in answer.items():
        if not isinstance(kind, str) or not kind:
            return f"answered a kind that is not a name: {kind!r:.80}"
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_PIN_COUNT:
            return f"answered {count!r:.80} for {kind!r:.80}, not a count"
        counts[kind] = count
    return counts


class RevisionPins:
    """A pin source that counts about the revision itself, not its executions: one
    statement (``count_statement``, given the identity) counting ``kind``, asked on
    the first page only (0 after), so make one per question. It reads through ``conn`` in
    schema ``prefix``."""

    name = "revision"
    kind = "pins"
    count_statement = ""

    def __init__(self, *, prefix: str, conn: AsyncConnection[Any]) -> None:
        self._prefix = prefix
        self._conn = conn
        self._counted = False

    async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Mapping[str, int]:
        """``{kind: n}`` for ``chart_identity`` on the first page, ``{kind: 0}`` after."""
        if self._counted:
            return {self.kind: 0}
        self._counted = True
        cursor = await self._conn.execute(
            statement(self.count_statement, self._prefix), {"identity": chart_identity}
        )
        row = await cursor.fetchone()
        return {self.kind: int(row[0]) if row is not None else 0}


class LinkPins(RevisionPins):
    """The pin source of chart links (asked on every retirement): a revision that is not
    retired and whose ``<invoke type="scxml" src>`` is linked to this one may still start
    children on it (``{"revisions": n}``). Retire the invoking revisions first."""

    name = "invoked_by"
    kind = "revisions"
    count_statement = "count_link_pins"
