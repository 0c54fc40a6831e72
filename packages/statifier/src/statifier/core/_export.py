"""Export and import of a position by state id: how an execution crosses chart revisions.

A position (``statifier.core.position``) names states by their index in one compiled
chart, so it only loads against that chart. ``export_position`` writes the same position
with state ids instead, as a plain JSON-like structure; ``import_position`` reads it
against another revision of the chart, renaming states through ``state_map`` and
changing variables through ``datamodel``. The result passes the same meaning checks as
``loads`` (a legal configuration, history records of the right kind, invocations of
active states...), or the import is refused with a typed error and nothing is made.

Public through ``statifier.core.position``; see its ``export_position`` and
``import_position``.
"""

from __future__ import annotations

import copy
from collections.abc import Container, Iterable, Mapping
from typing import Any, Final

from statifier.budget import DEFAULT_LIMITS, MacrostepLimits
from statifier.budget import FIELDS as LIMIT_FIELDS
from statifier.chart.model import Machine
from statifier.core._payload import CorruptPosition, decode_payload
from statifier.core.state import MachineState
from statifier.datamodel import Datamodel, datamodel_for, stored_variables, variables_of
from statifier.errors import PositionError
from statifier.values import brief, same_data

EXPORT_FORMAT: Final = "statifier-export-1"
"""The ``format`` of every export; ``import_position`` reads only this one."""

_COUNTERS: Final = ("invoke", "send", "timer", "macrostep", "microstep", "round")
_KEYS: Final = frozenset(
    {
        "format",
        "identity",
        "session_id",
        "configuration",
        "entered",
        "states_to_invoke",
        "history",
        "invocations",
        "datamodel",
        "counters",
        "running",
        "status",
        "trace",
        "max_macrostep_rounds",
        "limits",
    }
)
_STORED: Final = "stored_datamodel"
"""The optional key of an export holding the datamodel's own stored form (ADR 22)."""
_INVOCATION_KEYS: Final = frozenset({"state", "index", "node_id", "id"})
_UNNAMED_PREFIX: Final = "__state"


class NotQuiescent(PositionError):
    """The position cannot be exported: events wait in its internal queue.

    Only a position at rest (after a macrostep) crosses revisions; step it first.
    """


class ImportRefused(PositionError):
    """An export cannot become a position of this chart; nothing was made.

    The base of the typed refusals below; raised as it is for an export that is not one
    (``format``, keys, types) and for a result the meaning checks of ``loads`` refuse.
    """


class UnknownStates(ImportRefused):
    """States of the export that the chart does not have, and ``state_map`` does not map.

    ``state_ids`` names all of them (export ids; unnamed states as ``__state<index>``).
    """

    def __init__(self, state_ids: Iterable[str]) -> None:
        self.state_ids = tuple(sorted(set(state_ids)))
        super().__init__(
            "states no longer in the chart (map them with state_map): " + ", ".join(self.state_ids)
        )


class UnknownInvocations(ImportRefused):
    """Live invocations whose ``<invoke>`` the chart no longer has where they were.

    ``invocations`` lists ``(state_id, invoke_id)`` of each (state ids as exported).
    """

    def __init__(self, invocations: Iterable[tuple[str, str]]) -> None:
        self.invocations = tuple(sorted(set(invocations)))
        names = ", ".join(f"{invoke_id} (in {state})" for state, invoke_id in self.invocations)
        super().__init__(f"live invocations with no <invoke> in the chart any more: {names}")


class MissingVariables(ImportRefused):
    """Variables the chart declares that the position has no value for (pass them in
    ``datamodel``). ``names`` lists them."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(sorted(set(names)))
        super().__init__(
            "variables the chart declares have no value (pass them in datamodel): "
            + ", ".join(self.names)
        )


# -- export ------------------------------------------------------------------------------


def export_position(state: MachineState) -> dict[str, Any]:
    """The position as a plain structure keyed by state ids (JSON-compatible, a copy).

    Keys: ``format`` (``EXPORT_FORMAT``), ``identity`` (the chart's, for provenance
    only), ``session_id``, ``configuration``, ``entered`` and ``states_to_invoke`` (state
    ids in document order, the root left out), ``history`` (history state id -> the state
    ids it recorded), ``invocations`` (``{"state", "index", "node_id", "id"}``: the
    invoking state's id, the ``<invoke>``'s place in it, its authored id or None, the live
    invoke id), ``datamodel`` (the variables as plain data, as ``state.datamodel`` reads),
    ``counters`` (``invoke``, ``send``, ``timer``, ``macrostep``, ``microstep``,
    ``round``), ``running``, ``status``, ``trace``, ``max_macrostep_rounds`` and
    ``limits``; for a datamodel that keeps a stored form of its own (ECMAScript, ADR 22),
    ``stored_datamodel`` too: the variables as a position keeps them, which lets an import
    keep what plain data cannot say (shared objects, the chart's functions). The opaque
    ``caller_context`` of the last macrostep is not exported.

    Raises ``NotQuiescent`` while the internal queue holds events.
    """
    if state.internal_queue:
        raise NotQuiescent(
            f"execution {state.session_id}: {len(state.internal_queue)} events wait in the "
            "internal queue; export a position at rest"
        )
    states = state.machine.states

    def ids(indexes: Iterable[int]) -> list[str]:
        return [states[i].id for i in sorted(indexes)]

    invocations = [
        {
            "state": states[s].id,
            "index": n,
            "node_id": states[s].invokes[n].id,
            "id": invoke_id,
        }
        for (s, n), invoke_id in sorted(state.invocations.items())
    ]
    exported = {
        "format": EXPORT_FORMAT,
        "identity": state.machine.identity,
        "session_id": state.session_id,
        "configuration": ids(state.configuration),
        "entered": ids(state.entered),
        "states_to_invoke": [states[i].id for i in state.states_to_invoke],
        "history": {states[h].id: ids(recorded) for h, recorded in sorted(state.history.items())},
        "invocations": invocations,
        "datamodel": copy.deepcopy(dict(state.datamodel)),
        "counters": {
            "invoke": state.invoke_counter,
            "send": state.send_counter,
            "timer": state.timer_counter,
            "macrostep": state.macrostep,
            "microstep": state.microstep,
            "round": state.round,
        },
        "running": state.running,
        "status": state.status,
        "trace": state.trace,
        "max_macrostep_rounds": state.max_macrostep_rounds,
        "limits": {name: getattr(state.limits, name) for name in LIMIT_FIELDS},
    }
    if type(state.datamodel) is not dict:
        exported[_STORED] = copy.deepcopy(stored_variables(state.datamodel))
    return exported


# -- import ------------------------------------------------------------------------------


def import_position(
    exported: Mapping[str, Any],
    machine: Machine,
    *,
    state_map: Mapping[str, str] | None = None,
    datamodel: Mapping[str, Any] | None = None,
    invoke_types: Iterable[str] | None = None,
    routes: Container[str] | None = None,
    max_limits: MacrostepLimits = DEFAULT_LIMITS,
) -> MachineState:
    """The position ``exported`` describes, as a position of ``machine``.

    Each exported state id names the state of ``machine`` with that id, or with the id
    ``state_map`` maps it to (an unnamed state is exported as ``__state<index>`` and
    must be mapped). ``entered`` drops states that are gone (nothing can enter them
    again); every other state that is gone and not mapped refuses the import with
    ``UnknownStates``, naming all of them. A live invocation keeps its invoke id when its
    state has the ``<invoke>`` still (by authored id, else by its place in the state),
    else ``UnknownInvocations``. The variables are the export's ``datamodel``; for a
    datamodel with a stored form of its own, a variable whose plain value is what the
    export's ``stored_datamodel`` holds comes from there (so it keeps what plain data cannot
    say), and one changed in ``datamodel`` is taken as the data it now is. ``datamodel``
    sets variables (added or replaced; system
    variables, starting with ``_``, cannot be set); every variable the chart declares must
    have a value then (``MissingVariables``), except those of states not entered yet under
    late binding. ``_name`` becomes ``machine``'s name; the session id, counters and
    budgets are kept, so timers and invocations keep their keys.

    ``invoke_types``, ``routes`` and ``max_limits`` are as for ``loads``; the result
    passes ``loads``' meaning checks or the import raises ``ImportRefused``.
    """
    fields = _fields(exported)
    mapping = _state_map(state_map)
    lookup = _StateLookup(machine, mapping)
    states = machine.states

    configuration = lookup.indexes(_ids(fields, "configuration"))
    states_to_invoke = lookup.indexes(_ids(fields, "states_to_invoke"), keep_order=True)
    history: list[list[Any]] = []
    for history_id, recorded in sorted(_history(fields).items()):
        key = lookup.index(history_id)
        values = lookup.indexes(recorded)
        if key is not None:
            history.append([key, values])
    entered = sorted(
        {
            i
            for i in (lookup.index(s, required=False) for s in _ids(fields, "entered"))
            if i is not None
        }
        | set(configuration)
    )
    invocations, gone = _invocations(fields, lookup)
    lookup.refuse_unknown()
    if gone:
        raise UnknownInvocations(gone)

    variables = _datamodel(fields, datamodel, machine)
    variables["_name"] = machine.name
    missing = []
    for data in machine.data:
        if data.id in variables:
            continue
        if machine.late_binding and data.state != 0 and data.state not in entered:
            variables[data.id] = None  # as initialize does: bound on first entry
        else:
            missing.append(data.id)
    if missing:
        raise MissingVariables(missing)

    counters = fields["counters"]
    if not isinstance(counters, dict) or set(counters) != set(_COUNTERS):
        raise ImportRefused(f"counters must name exactly {', '.join(_COUNTERS)}")
    payload = {
        "session_id": fields["session_id"],
        "configuration": sorted(set(configuration)),
        "internal_queue": [],
        "history": sorted(history, key=lambda pair: pair[0]),
        "entered": entered,
        "states_to_invoke": states_to_invoke,
        "invocations": sorted(invocations),
        "invoke_counter": counters["invoke"],
        "send_counter": counters["send"],
        "timer_counter": counters["timer"],
        "caller_context": None,
        "datamodel": variables,
        "running": fields["running"],
        "status": fields["status"],
        "macrostep": counters["macrostep"],
        "microstep": counters["microstep"],
        "round": counters["round"],
        "trace": fields["trace"],
        "max_macrostep_rounds": fields["max_macrostep_rounds"],
        "limits": fields["limits"],
    }
    frozen = None if invoke_types is None else frozenset(invoke_types)
    try:
        return decode_payload(payload, machine, frozen, routes, max_limits)
    except CorruptPosition as exc:
        reason = str(exc).removeprefix("invalid payload: ")
        raise ImportRefused(
            f"the position would not be valid in chart {states[0].id!r}: {reason}"
        ) from None
    except RecursionError:
        raise ImportRefused("a value of the datamodel is nested too deeply") from None


def _fields(exported: Any) -> dict[str, Any]:
    if not isinstance(exported, Mapping):
        raise ImportRefused(f"an export is a mapping, not a {type(exported).__name__}")
    if exported.get("format") != EXPORT_FORMAT:
        raise ImportRefused(f"format {brief(exported.get('format'))} is not {EXPORT_FORMAT!r}")
    keys = set(exported) - {_STORED}
    if keys != _KEYS:
        raise ImportRefused(
            f"export keys: missing {sorted(_KEYS - keys)}, unexpected {sorted(keys - _KEYS)}"
        )
    return dict(exported)


def _state_map(state_map: Mapping[str, str] | None) -> dict[str, str]:
    if state_map is None:
        return {}
    if not isinstance(state_map, Mapping):
        raise TypeError(f"state_map is a mapping of state ids, not {type(state_map).__name__}")
    for old, new in state_map.items():
        if not isinstance(old, str) or not isinstance(new, str):
            raise TypeError(f"state_map maps state ids to state ids, not {old!r} to {new!r}")
    return dict(state_map)


def _ids(fields: dict[str, Any], key: str) -> list[str]:
    value = fields[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImportRefused(f"{key} must be a list of state ids")
    return value


def _history(fields: dict[str, Any]) -> dict[str, list[str]]:
    value = fields["history"]
    if not isinstance(value, dict) or not all(
        isinstance(recorded, list) and all(isinstance(s, str) for s in recorded)
        for recorded in value.values()
    ):
        raise ImportRefused("history must map history state ids to lists of state ids")
    return value


def _datamodel(
    fields: dict[str, Any], changes: Mapping[str, Any] | None, machine: Machine
) -> dict[str, Any]:
    variables = fields["datamodel"]
    if not isinstance(variables, dict) or not all(isinstance(k, str) for k in variables):
        raise ImportRefused("datamodel must be an object with variable names as keys")
    model = datamodel_for(machine.datamodel)
    if variables_of(machine) is None:
        result = copy.deepcopy(variables)
    else:
        result = _kept(variables, fields.get(_STORED), model)
    if changes is None:
        return result
    if not isinstance(changes, Mapping):
        raise TypeError(f"datamodel is a mapping of variables, not {type(changes).__name__}")
    stored = model.stored_form
    for name, value in changes.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"a variable name is a non-empty string, not {name!r}")
        if name.startswith("_"):
            raise ImportRefused(f"system variable {name!r} cannot be set")
        # An operator's value is data: the datamodel writes it in its stored form, where
        # nothing it holds can read as anything else (ADR 22).
        result[name] = stored(copy.deepcopy(value))
    return result


def _kept(plain: dict[str, Any], kept: Any, model: Datamodel) -> dict[str, Any]:
    """The stored form of an export's variables for a datamodel with one of its own: from
    ``stored_datamodel`` where ``datamodel`` still reads as it does, else from the data."""
    if kept is not None and (
        not isinstance(kept, dict) or not all(isinstance(k, str) for k in kept)
    ):
        raise ImportRefused(f"{_STORED} must be an object with variable names as keys")
    unchanged = model.state_variables(kept) if kept is not None else {}
    result: dict[str, Any] = {}
    from_stored = False
    for name, value in plain.items():
        if name.startswith("_"):
            result[name] = copy.deepcopy(value)  # system variables are stored as they are
        elif not model.is_identifier(name):
            raise ImportRefused(f"datamodel: {brief(name)} is not a variable name")
        elif name in unchanged and same_data(unchanged[name], value):
            result[name] = copy.deepcopy(kept[name])  # type: ignore[index]
            from_stored = True
        else:
            result[name] = model.stored_form(copy.deepcopy(value))
    if from_stored:
        # The stored form's own entries (ECMAScript's ``#objects``: objects stored once).
        for name, value in kept.items():  # type: ignore[union-attr]
            if not name.startswith("_") and not model.is_identifier(name):
                result[name] = copy.deepcopy(value)
    return result


def _invocations(
    fields: dict[str, Any], lookup: _StateLookup
) -> tuple[list[list[Any]], list[tuple[str, str]]]:
    """``[state, invoke_index, invoke_id]`` triples of the live invocations that carry
    over, and ``(state_id, invoke_id)`` of those whose ``<invoke>`` is gone."""
    value = fields["invocations"]
    if not isinstance(value, list):
        raise ImportRefused("invocations must be a list")
    carried: list[list[Any]] = []
    gone: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or set(item) != _INVOCATION_KEYS
            or not isinstance(item["state"], str)
            or not isinstance(item["id"], str)
            or not isinstance(item["node_id"], str | None)
            or type(item["index"]) is not int
        ):
            raise ImportRefused(f"invocations[{i}] is not {{state, index, node_id, id}}")
        state = lookup.index(item["state"])
        if state is None:
            continue  # named by refuse_unknown
        invokes = lookup.machine.states[state].invokes
        node_id = item["node_id"]
        if node_id is not None:
            found = [inv.index for inv in invokes if inv.id == node_id]
        else:
            index = item["index"]
            found = [index] if 0 <= index < len(invokes) and invokes[index].id is None else []
        if not found:
            gone.append((item["state"], item["id"]))
            continue
        carried.append([state, found[0], item["id"]])
    return carried, gone


class _StateLookup:
    """Export state ids to ``machine``'s indexes, through ``state_map``; remembers what
    it could not place so that one refusal names every such state."""

    def __init__(self, machine: Machine, mapping: dict[str, str]) -> None:
        self.machine = machine
        self.mapping = mapping
        self.unknown: set[str] = set()

    def index(self, state_id: str, *, required: bool = True) -> int | None:
        """The index of the state ``state_id`` becomes (None, remembered if required)."""
        target = self.mapping.get(state_id)
        if target is None:
            target = None if state_id.startswith(_UNNAMED_PREFIX) else state_id
        found = None if target is None else self._find(target)
        if found is None and required:
            self.unknown.add(state_id)
        return found

    def indexes(self, state_ids: Iterable[str], *, keep_order: bool = False) -> list[int]:
        """The indexes of the states that can be placed (sorted unless ``keep_order``)."""
        found = [i for i in (self.index(s) for s in state_ids) if i is not None]
        return found if keep_order else sorted(set(found))

    def refuse_unknown(self) -> None:
        """Raise ``UnknownStates`` naming every state that could not be placed."""
        if self.unknown:
            raise UnknownStates(self.unknown)

    def _find(self, state_id: str) -> int | None:
        index = self.machine.state_ids.get(state_id)
        if index is not None:
            return index
        # An unnamed state of the new chart can be a target by its synthesized id.
        suffix = state_id.removeprefix(_UNNAMED_PREFIX)
        if suffix != state_id and suffix.isdigit():
            candidate = int(suffix)
            states = self.machine.states
            if 0 < candidate < len(states) and states[candidate].id == state_id:
                return candidate
        return None
