"""Writing history: the entry a transaction stores with the change it describes.

An entry is drafted before the statement that stores the change runs (its text is a
parameter of that statement, ``sql/journal.sql``), with the row's fields left open: the
statement gives it its ``seq`` and its time. A draft is the entry's JSON body as stored
(``HistoryEntry.to_json`` without the row's fields, the derived due times and the fields
at their defaults), written straight from what the transaction did: a step pays for one
dict and its text. The ``HistoryEntry`` a caller may ask for is read back from that text
(``HistoryEntry.from_json``) only when asked, so it is exactly what ``history`` reads
later. Everything in a draft is bounded as ``statifier_persistence.history`` says, so
what a chart or a caller controls can neither fail the step nor bloat the table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from statifier._slots import builder
from statifier.core import effects as fx
from statifier.core.events import Event
from statifier.core.state import MachineState
from statifier.values import json_value_text_utf8, read_json

from ._records import Execution, ExecutionStatus, utc_text
from .history import (
    MAX_ITEMS,
    EntryKind,
    HistoryEntry,
    Trigger,
    current_trigger,
    kept_value,
    text,
)

MAX_STATES: Final = 64
"""State ids an entry keeps per configuration (ancestors included)."""

_DEFAULT_TRIGGER: Final = Trigger()


@dataclasses.dataclass(frozen=True, slots=True)
class Draft:
    """An entry to store: its kind (a column) and its body (the ``entry`` column's text),
    for the execution ``execution_id``; the storing statement decides its ``seq`` and
    ``at``."""

    kind: EntryKind
    body: str
    execution_id: str

    def entry(self, seq: int, at: datetime) -> HistoryEntry:
        """The entry as stored under ``seq`` at ``at``, read back from its body."""
        fields = read_json(self.body)
        return HistoryEntry.from_json(
            {"execution_id": self.execution_id, "seq": seq, "at": utc_text(at), **fields}
        )


@dataclasses.dataclass(frozen=True, slots=True)
class StoredEntry:
    """The entry a committed transaction wrote, read from its draft when first asked."""

    draft: Draft
    seq: int
    at: datetime

    def read(self) -> HistoryEntry:
        """The entry (a new ``HistoryEntry`` at each call, equal each time)."""
        return self.draft.entry(self.seq, self.at)


def configuration(state: MachineState | None) -> tuple[tuple[str, ...], int]:
    """The active state ids of ``state`` (every active state, document order), bounded,
    and how many were left out."""
    if state is None:
        return (), 0
    machine = state.machine
    active = state.configuration
    # Most steps of a chart stand in a handful of configurations: each is worked out once.
    known = _CONFIGURATIONS.get((id(machine), active))
    if known is not None and known[0] is machine:
        return known[1]
    ids = state.configuration_ids()
    found = tuple(text(s) for s in ids[:MAX_STATES]), max(len(ids) - MAX_STATES, 0)
    if len(_CONFIGURATIONS) >= MAX_CONFIGURATIONS:
        _CONFIGURATIONS.clear()
    _CONFIGURATIONS[id(machine), active] = (machine, found)
    return found


MAX_CONFIGURATIONS: Final = 1024
"""Configurations :func:`configuration` remembers (all charts together); when full, it
forgets them all and starts again."""

_CONFIGURATIONS: Final[dict[tuple[int, Any], tuple[Any, tuple[tuple[str, ...], int]]]] = {}
"""``(id(machine), configuration)`` to ``(machine, configuration(...))``: the machine is
kept, so its id names no other machine while its entry lives."""


_DraftBuilder: Final = builder(Draft)


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
    body: dict[str, Any] = {"kind": kind}
    trigger = current_trigger()
    if trigger != _DEFAULT_TRIGGER:
        body["trigger"] = trigger.to_json()
    if key is not None:
        body["key"] = key
    if event is not None:
        data, clipped = kept_value(event.data)
        body["event"] = {"name": text(event.name), "data": data, "data_clipped": clipped}
    if transition_taken is not None:
        body["transition_taken"] = transition_taken
    if unmatched is not None:
        body["unmatched"] = text(unmatched)
    states_before, states_after, omitted = _configurations(before, after, ended)
    if states_before:
        body["configuration_before"] = states_before
    if states_after:
        body["configuration_after"] = states_after
    body["status_before"] = execution.status
    body["status"] = status
    did = _Did(refused)
    for effect in effects:
        did.add(effect)
    omitted += did.into(body)
    if detail:
        body["detail"] = {name: kept_value(value)[0] for name, value in detail.items()}
    if omitted:
        body["omitted"] = omitted
    # Every value in ``body`` is JSON: texts, counts, and values ``kept_value`` checked.
    made = _DraftBuilder()  # ``Draft(...)``, built fast: one a step
    made.kind = kind
    made.body = json_value_text_utf8(body)
    made.execution_id = execution.id
    made.__class__ = Draft
    built: Draft = made
    return built


def _configurations(
    before: MachineState | None, after: MachineState | None, ended: Sequence[str] | None
) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """The configurations before and after (``ended``: where a finished execution
    stopped), bounded, and how many ids were left out of both."""
    states_before, more_before = configuration(before)
    if ended is not None:
        states_after = tuple(text(s) for s in ended[:MAX_STATES])
        more_after = max(len(ended) - MAX_STATES, 0)
    elif (
        after is not None
        and before is not None
        and after.machine is before.machine
        and after.configuration == before.configuration
    ):
        # Most steps stay where they were (a counter, a re-armed timer): one list serves.
        states_after, more_after = states_before, more_before
    else:
        states_after, more_after = configuration(after)
    return states_before, states_after, more_before + more_after


_StoredEntryBuilder: Final = builder(StoredEntry)


def stored(draft: Draft | None, row: Execution) -> StoredEntry | None:
    """The entry as committed: the draft with the ``seq`` and time the row was given."""
    if draft is None:
        return None
    entry = _StoredEntryBuilder()  # ``StoredEntry(...)``, built fast: one a step
    entry.draft = draft
    entry.seq = row.history_seq
    entry.at = row.updated_at
    entry.__class__ = StoredEntry
    built: StoredEntry = entry
    return built


class _Did:
    """What a transaction did, collected from its effects as the entry's JSON items: each
    list keeps its first ``MAX_ITEMS`` items, ``omitted`` counts the rest."""

    __slots__ = (
        "_refused",
        "cancelled",
        "errors",
        "invocations",
        "logs",
        "omitted",
        "sends",
        "stopped",
        "timers",
    )

    def __init__(self, refused: frozenset[str]) -> None:
        self._refused = refused
        self.timers: list[dict[str, Any]] = []
        self.cancelled: list[str] = []
        self.sends: list[dict[str, Any]] = []
        self.invocations: list[dict[str, Any]] = []
        self.stopped: list[str] = []
        self.errors: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.omitted = 0

    def into(self, body: dict[str, Any]) -> int:
        """Put the lists that hold items into ``body``; how many items were left out."""
        for name, items in (
            ("timers_armed", self.timers),
            ("timers_cancelled", self.cancelled),
            ("sends", self.sends),
            ("invocations_started", self.invocations),
            ("invocations_cancelled", self.stopped),
            ("errors", self.errors),
            ("logs", self.logs),
        ):
            if items:
                body[name] = items
        return self.omitted

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
                        {
                            "send_id": text(effect.send_id),
                            "event": text(effect.event),
                            "target": _target(effect.target),
                            "delay_ms": effect.delay_ms,
                        }
                    )
            case fx.Cancel():
                if self._room(self.cancelled):
                    self.cancelled.append(text(effect.send_id))
            case fx.Send():
                if self._room(self.sends):
                    self.sends.append(
                        {"event": text(effect.event), "target": _target(effect.target)}
                    )
            case fx.Invoke() if effect.invoke_id not in self._refused:
                if self._room(self.invocations):
                    self.invocations.append(
                        {"invoke_id": text(effect.invoke_id), "type": text(effect.type)}
                    )
            case fx.CancelInvoke():
                if self._room(self.stopped):
                    self.stopped.append(text(effect.invoke_id))
            case fx.ErrorRaised():
                if self._room(self.errors):
                    self.errors.append(
                        {
                            "name": text(effect.name),
                            "message": text(effect.message),
                            "line": effect.line,
                        }
                    )
            case fx.Log():
                if self._room(self.logs):
                    value, clipped = kept_value(effect.value)
                    label = text(effect.label) if effect.label is not None else None
                    self.logs.append({"label": label, "value": value, "value_clipped": clipped})


def _target(target: str | None) -> str | None:
    return text(target) if target is not None else None
