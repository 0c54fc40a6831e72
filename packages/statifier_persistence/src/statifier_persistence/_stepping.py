"""The parts of one step, as ``Executions`` and a group commit (``_group``) pass them on.

A step locks its execution (a ``Locked`` read), checks that it takes the step and loads
its position (``Begun``), drives it, and has its row ready to store (``Ready``). A step
alone does all of it in its own transaction; a group commit does the locking and the
storing for several executions at once, and each step its own part in between.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from psycopg.types.numeric import Int8
from statifier._slots import builder
from statifier.core.state import MachineState

from ._drive import Drive
from ._journal import Draft
from ._records import Execution
from ._rows import StoredPosition

Locked = tuple[Execution, StoredPosition, bool]
"""A read row: the execution, its position, whether the step's key was applied to it."""


@dataclass(frozen=True, slots=True)
class Begun:
    """A locked execution that takes the step, with its loaded position."""

    execution: Execution
    persisted: StoredPosition
    state: MachineState
    routes: Any


@dataclass(frozen=True, slots=True)
class Ready:
    """A drive ready to be stored: its row of ``store_executions.sql`` (in
    ``STORE_ARRAYS`` order) and what the step's answer needs."""

    drive: Drive
    draft: Draft | None
    row: tuple[Any, ...]

    @property
    def failure(self) -> str | None:
        """The failure's JSON text the row stores (None: no failure)."""
        return self.row[_FAILURE]  # type: ignore[no-any-return]

    @property
    def outcome(self) -> str | None:
        """The outcome's JSON text the row stores (None: no outcome)."""
        return self.row[_OUTCOME]  # type: ignore[no-any-return]


_BegunBuilder: Final = builder(Begun)
_ReadyBuilder: Final = builder(Ready)


def begun_record(
    execution: Execution, persisted: StoredPosition, state: MachineState, routes: Any
) -> Begun:
    """``Begun(execution, persisted, state, routes)``, built fast (``statifier._slots``)."""
    made = _BegunBuilder()
    made.execution = execution
    made.persisted = persisted
    made.state = state
    made.routes = routes
    made.__class__ = Begun
    built: Begun = made
    return built


def ready_record(drive: Drive, draft: Draft | None, row: tuple[Any, ...]) -> Ready:
    """``Ready(drive, draft, row)``, built fast (``statifier._slots``)."""
    made = _ReadyBuilder()
    made.drive = drive
    made.draft = draft
    made.row = row
    made.__class__ = Ready
    built: Ready = made
    return built


STORE_ARRAYS: Final = (
    "ids",
    "positions",
    "macrosteps",
    "rounds",
    "armed",
    "statuses",
    "failures",
    "outcomes",
    "keys",
    "kinds",
    "entries",
)
"""The array parameters of ``store_executions.sql``, in the order of a ``Ready`` row."""

_FAILURE: Final = STORE_ARRAYS.index("failures")
_OUTCOME: Final = STORE_ARRAYS.index("outcomes")
_COUNTERS: Final = (STORE_ARRAYS.index("macrosteps"), STORE_ARRAYS.index("rounds"))


def one_row_values(row: tuple[Any, ...]) -> list[Any]:
    """The values ``stepped_row.sql`` binds for a ``Ready`` row stored alone
    (``STORE_ARRAYS``' order), its counters as bigint whatever their size: psycopg types a
    small int ``int2``, and each other combination of types would be a statement prepared
    and planned apart."""
    values = list(row)
    for index in _COUNTERS:
        values[index] = Int8(values[index])
    return values
