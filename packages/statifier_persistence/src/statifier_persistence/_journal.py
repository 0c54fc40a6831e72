"""Writing history: the entry a transaction stores with the change it describes.

An entry is drafted before the statement that stores the change runs (its text is a
parameter of that statement, ``sql/journal.sql``), with the row's fields left open: the
statement gives it its ``seq`` and its time, and :func:`stored` fills them in from the
row it returns. Everything in a draft is bounded as ``statifier_persistence.history``
says, so what a chart or a caller controls can neither fail the step nor bloat the table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.core.state import MachineState

from ._records import Execution, ExecutionStatus
from .history import (
    MAX_ITEMS,
    ArmedTimer,
    EntryKind,
    EventRecord,
    HistoryEntry,
    LogLine,
    RaisedError,
    SentEvent,
    StartedInvocation,
    current_trigger,
    kept_value,
    storage_body,
    text,
)

MAX_STATES: Final = 64
"""State ids an entry keeps per configuration (ancestors included)."""

_UNSTORED: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The time of a draft: the statement storing it gives the entry its own."""


@dataclasses.dataclass(frozen=True, slots=True)
class Draft:
    """An entry to store: its kind (a column), its body (the ``entry`` column's text) and
    the entry itself, whose ``seq`` and ``at`` the storing statement decides."""

    kind: EntryKind
    body: str
    entry: HistoryEntry


def configuration(state: MachineState | None) -> tuple[tuple[str, ...], int]:
    """The active state ids of ``state`` (every active state, document order), bounded,
    and how many were left out."""
    if state is None:
        return (), 0
    ids = state.configuration_ids()
    return tuple(text(s) for s in ids[:MAX_STATES]), max(len(ids) - MAX_STATES, 0)


def draft(
    execution: Execution,
    kind: EntryKind,
    *,
    key: str | None = None,
    event: Event | None = None,
    transition_taken: bool | None = None,
    unmatched: str | None = None,
    before: MachineState | None = None,
    after: MachineState | None = None,
    status: ExecutionStatus,
    ended: Sequence[str] | None = None,
    effects: Iterable[fx.Effect] = (),
    refused: frozenset[str] = frozenset(),
    detail: Mapping[str, Any] | None = None,
) -> Draft:
    """The draft of an entry about ``execution`` (the row as it was before the change).

    ``effects`` are what the transaction performed, in order; ``refused`` the send and
    invoke ids whose timer or invocation the executor refused (not armed, not started).
    ``ended`` are the states active when the execution ended, its configuration after (a
    finished position has none).
    """
    did = _Did(refused)
    for effect in effects:
        did.add(effect)
    states_before, more_before = configuration(before)
    if (
        after is not None
        and before is not None
        and after.machine is before.machine
        and after.configuration == before.configuration
    ):
        # Most steps stay where they were (a counter, a re-armed timer): one list serves.
        states_after, more_after = states_before, more_before
    else:
        states_after, more_after = configuration(after)
    if ended is not None:
        states_after = tuple(text(s) for s in ended[:MAX_STATES])
        more_after = max(len(ended) - MAX_STATES, 0)
    entry = HistoryEntry(
        execution_id=execution.id,
        seq=0,
        at=_UNSTORED,
        kind=kind,
        trigger=current_trigger(),
        key=key,
        event=_event_record(event) if event is not None else None,
        transition_taken=transition_taken,
        unmatched=text(unmatched) if unmatched is not None else None,
        configuration_before=states_before,
        configuration_after=states_after,
        status_before=execution.status,
        status=status,
        timers_armed=tuple(did.timers),
        timers_cancelled=tuple(did.cancelled),
        sends=tuple(did.sends),
        invocations_started=tuple(did.invocations),
        invocations_cancelled=tuple(did.stopped),
        errors=tuple(did.errors),
        logs=tuple(did.logs),
        detail={name: kept_value(value)[0] for name, value in (detail or {}).items()},
        omitted=did.omitted + more_before + more_after,
    )
    return Draft(kind, storage_body(entry), entry)


def stored(draft: Draft | None, row: Execution) -> HistoryEntry | None:
    """The entry as committed: the draft with the ``seq`` and time the row was given."""
    if draft is None:
        return None
    return draft.entry.stored_as(row.history_seq, row.updated_at)


def _event_record(event: Event) -> EventRecord:
    data, clipped = kept_value(event.data)
    return EventRecord(text(event.name), data, clipped)


class _Did:
    """What a transaction did, collected from its effects: each list keeps its first
    ``MAX_ITEMS`` items, ``omitted`` counts the rest."""

    def __init__(self, refused: frozenset[str]) -> None:
        self._refused = refused
        self.timers: list[ArmedTimer] = []
        self.cancelled: list[str] = []
        self.sends: list[SentEvent] = []
        self.invocations: list[StartedInvocation] = []
        self.stopped: list[str] = []
        self.errors: list[RaisedError] = []
        self.logs: list[LogLine] = []
        self.omitted = 0

    def _room(self, items: list[Any]) -> bool:
        if len(items) < MAX_ITEMS:
            return True
        self.omitted += 1
        return False

    def add(self, effect: fx.Effect) -> None:  # noqa: C901 - one branch per effect kind
        match effect:
            case fx.SendDelayed() if effect.send_id not in self._refused:
                if self._room(self.timers):
                    self.timers.append(
                        ArmedTimer(
                            text(effect.send_id),
                            text(effect.event),
                            _target(effect.target),
                            effect.delay_ms,
                        )
                    )
            case fx.Cancel():
                if self._room(self.cancelled):
                    self.cancelled.append(text(effect.send_id))
            case fx.Send():
                if self._room(self.sends):
                    self.sends.append(SentEvent(text(effect.event), _target(effect.target)))
            case fx.Invoke() if effect.invoke_id not in self._refused:
                if self._room(self.invocations):
                    self.invocations.append(
                        StartedInvocation(text(effect.invoke_id), text(effect.type))
                    )
            case fx.CancelInvoke():
                if self._room(self.stopped):
                    self.stopped.append(text(effect.invoke_id))
            case fx.ErrorRaised():
                if self._room(self.errors):
                    self.errors.append(
                        RaisedError(text(effect.name), text(effect.message), effect.line)
                    )
            case fx.Log():
                if self._room(self.logs):
                    value, clipped = kept_value(effect.value)
                    label = text(effect.label) if effect.label is not None else None
                    self.logs.append(LogLine(label, value, clipped))


def _target(target: str | None) -> str | None:
    return text(target) if target is not None else None
