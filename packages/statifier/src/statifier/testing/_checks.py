"""What the checks of ``ChartRun`` and of ``statifier_oban.testing``'s environment share:
naming a state the chart lacks, and comparing the variables a test cares about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from statifier.chart.model import Machine
from statifier.suggest import did_you_mean
from statifier.values import brief

_MISSING: Final = object()


def unknown_state(machine: Machine, state_ids: Iterable[str]) -> str | None:
    """``the chart has no state 'x'; did you mean 'y'?`` for the first id ``machine``
    lacks, or None when it has them all."""
    known = machine.state_ids
    for state_id in state_ids:
        if state_id not in known:
            return f"the chart has no state {state_id!r}{did_you_mean(state_id, known)}"
    return None


def subset_problem(what: str, actual: Any, wanted: Mapping[str, Any]) -> str | None:
    """Why ``actual`` (a mapping: a datamodel, a donedata) does not hold every key of
    ``wanted`` with its value, one line per difference; None when it does."""
    if not isinstance(actual, Mapping):
        return f"expected the {what} to hold {brief(dict(wanted))}: it is {brief(actual)}"
    wrong = []
    for name, value in wanted.items():
        found = actual.get(name, _MISSING)
        if found is _MISSING:
            known = did_you_mean(name, actual)
            wrong.append(f"{name}: missing (expected {brief(value)}){known}")
        elif found != value:
            wrong.append(f"{name}: expected {brief(value)}, found {brief(found)}")
    if not wrong:
        return None
    return f"the {what} differs:\n  " + "\n  ".join(wrong)


def ids(state_ids: Iterable[str]) -> str:
    """``'a', 'b'`` (``none`` for no id)."""
    return ", ".join(repr(i) for i in state_ids) or "none"
