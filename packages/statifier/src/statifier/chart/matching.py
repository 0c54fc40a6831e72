"""Which events a chart accepts where, and the notice for an event nothing took.

``statifier run`` and the durable executions' steps both tell a user when an external
event matched no transition (most often a misspelt name); this is the one wording of that
notice, with a "did you mean" over the events the states accept.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from statifier.chart.model import Machine
from statifier.core.events import name_matches, transition_index
from statifier.suggest import NearSpellings, bounded_did_you_mean

LISTED_EVENTS: Final = 10
"""Accepted events a notice lists when it has no close spelling to suggest."""

_DESCRIPTORS: Final = "event descriptors"
"""The machine cache's key of every event descriptor it has."""

_SPELLINGS: Final = "event spellings"
"""The machine cache's key of the ``NearSpellings`` of those descriptors."""


def accepted_events(machine: Machine, configuration: Collection[int]) -> tuple[str, ...]:
    """The event descriptors of the transitions of the states in ``configuration`` (state
    indexes, ancestors included as a configuration has them), sorted."""
    states = machine.states
    transitions = machine.transitions
    return tuple(
        sorted(
            {
                descriptor
                for s in configuration
                for t in states[s].transitions
                for descriptor in transitions[t].events
            }
        )
    )


def unmatched_notice(
    machine: Machine, name: str, configuration: Collection[int] | None = None
) -> str:
    """The notice for external event ``name`` that matched no transition.

    When a transition for ``name`` exists (in the active states with ``configuration``,
    else anywhere in the chart), none of them was enabled; otherwise the notice suggests
    the closest event the active states accept (every event of the chart without
    ``configuration``), or lists what they accept when none is close.

    Its cost does not grow with the chart past the active states' events: whether any
    transition takes ``name`` is one lookup in the chart's index of descriptors, and the
    suggestion is ``suggest.bounded_did_you_mean``'s.
    """
    notice = f"no transition matched external event {name!r}"
    anywhere = bool(transition_index(machine).matching(name))
    if configuration is None:
        if anywhere:
            return notice + ": no transition for it is enabled in the active states"
        return notice + _suggestion(machine, name, _descriptors(machine))
    accepted = accepted_events(machine, configuration)
    if name_matches(accepted, name):
        return notice + ": no transition for it is enabled in the active states"
    if anywhere:
        notice += ": the active states take no such event"
    suggestion = _suggestion(machine, name, accepted)
    if suggestion or not accepted:
        return notice + suggestion
    listed = ", ".join(accepted[:LISTED_EVENTS])
    more = f" and {len(accepted) - LISTED_EVENTS} more" if len(accepted) > LISTED_EVENTS else ""
    return f"{notice}; the active states accept {listed}{more}"


def _suggestion(machine: Machine, name: str, known: Collection[str]) -> str:
    return bounded_did_you_mean(name, known, lambda: _spellings(machine))


def _descriptors(machine: Machine) -> frozenset[str]:
    """Every event descriptor of ``machine``, read once per machine (kept in its cache)."""
    cache = machine._cache
    every: frozenset[str] | None = cache.get(_DESCRIPTORS)
    if every is None:
        every = cache[_DESCRIPTORS] = frozenset(d for t in machine.transitions for d in t.events)
    return every


def _spellings(machine: Machine) -> NearSpellings:
    """The ``NearSpellings`` of ``_descriptors``, made once per machine when a notice
    first needs it (kept in its cache)."""
    cache = machine._cache
    spellings: NearSpellings | None = cache.get(_SPELLINGS)
    if spellings is None:
        spellings = cache[_SPELLINGS] = NearSpellings(_descriptors(machine))
    return spellings
