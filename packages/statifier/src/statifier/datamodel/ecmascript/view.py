"""The datamodel of an ECMAScript chart's state: plain values to read, the stored form to
keep (ADR 22).

A :class:`VariablesView` is what ``MachineState.datamodel`` holds for an ECMAScript chart: a
read-only mapping of the variables (system variables first, then the chart's, by name) whose
values are plain JSON data (:mod:`.plain`), decoded when first read. The stored form
(references, ``#objects``, tags) is what positions keep; only they read it, through
:meth:`VariablesView.stored` (``statifier.datamodel.stored_variables``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from statifier.datamodel.ecmascript.plain import HEAP, PlainDecoder

SYSTEM_VARIABLES: Final = ("_sessionid", "_name", "_ioprocessors", "_event")
"""Read-only variables the core binds (the engine exposes them through throwing setters)."""


class VariablesView(Mapping[str, Any]):
    """An ECMAScript chart's variables as a state holds them (see the module docstring).

    Values read are plain data shared with the view: treat them as read-only, as every
    datamodel's values. Two views are equal when their stored forms are; a view and any
    other mapping when their plain values are.
    """

    __slots__ = (
        "_decoder",
        "_names",
        "_plain",
        "_source",
        "_stored",
        "_system",
        "_typed",
        "_whole",
    )

    def __init__(
        self,
        system: dict[str, Any],
        names: frozenset[str],
        stored: dict[str, Any] | None,
        source: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._system: dict[str, Any] | None = system
        self._names = names
        self._stored = stored
        self._source = source
        """Gives the stored form when it is first needed (``stored`` None: the engine still
        holds the variables)."""
        self._whole: dict[str, Any] | None = None
        """The whole stored form (system variables too), once made or as a position gave it."""
        self._plain: dict[str, Any] | None = None
        """The plain values read so far (made on the first read)."""
        self._decoder: PlainDecoder | None = None
        self._typed = False
        """Whether the chart's variables' stored form is JSON the engine wrote (``engine_view``)."""

    # A view made from a whole stored form (``loaded_view``) holds only ``_whole``,
    # ``_system`` (None) and ``_typed`` until it is split: every read but ``stored`` asks
    # for ``system`` (or checks ``_system``) first, and the split sets the other slots.

    @classmethod
    def from_stored(cls, datamodel: dict[str, Any]) -> VariablesView:
        """The view of a stored datamodel (system variables and the stored form together,
        as a position holds it; the view keeps it as it is, so treat it as read-only).
        It is split into system and chart variables when first read: a state loaded only to
        be stepped or stored again never is."""
        return loaded_view(datamodel)

    def _split(self) -> dict[str, Any]:
        """The system variables, splitting the whole stored form (the first read of a view
        made from one)."""
        whole = self._whole
        assert whole is not None  # noqa: S101 - a view has its parts or the whole
        system: dict[str, Any] = {name: whole[name] for name in SYSTEM_VARIABLES if name in whole}
        user = {name: value for name, value in whole.items() if name not in system}
        self._stored = user
        self._names = frozenset(name for name in user if name != HEAP)
        self._source = self._decoder = self._plain = None
        self._system = system
        return system

    @property
    def system(self) -> dict[str, Any]:
        """The system variables' values (the core's: plain data)."""
        system = self._system
        return self._split() if system is None else system

    @property
    def names(self) -> frozenset[str]:
        """The chart's variables' names."""
        if self._system is None:
            self._split()
        return self._names

    def stored(self) -> dict[str, Any]:
        """The datamodel in the stored form, as a position keeps it (system variables
        included; made once: treat it as read-only)."""
        whole = self._whole
        if whole is None:
            whole = self._whole = {**self.system, **self.user_stored()}
        return whole

    @property
    def chart_json_typed(self) -> bool:
        """Whether every entry of :meth:`stored` but the system variables holds only exact
        JSON types under ``str`` keys because it was read from JSON text the engine wrote
        (a view of the engine's own state): ``position.dumps`` then checks the system
        variables alone. False for a view made from a stored form given to it."""
        return self._typed

    def user_stored(self) -> dict[str, Any]:
        """The chart's variables in the stored form (``#objects`` included): not a copy."""
        if self._system is None:
            self._split()
        stored = self._stored
        if stored is None:
            assert self._source is not None  # noqa: S101 - a view has one or the other
            stored = self._stored = self._source()
            self._source = None
        return stored

    # -- the mapping ---------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        system = self.system
        if name in system:
            return system[name]
        plain = self._plain
        if plain is None:
            plain = self._plain = {}
        elif name in plain:
            return plain[name]
        if name not in self.names:
            raise KeyError(name)
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = PlainDecoder(self.user_stored(), system)
        value = plain[name] = decoder.variable(name)
        return value

    def __contains__(self, name: object) -> bool:
        return name in self.system or name in self.names

    def __iter__(self) -> Iterator[str]:
        yield from self.system
        yield from sorted(self.names)

    def __len__(self) -> int:
        return len(self.system) + len(self.names)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, VariablesView):
            return self.stored() == other.stored()
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy (copy, deepcopy, pickle) holds the stored form, never a live engine.
        return (VariablesView.from_stored, (self.stored(),))


_new: Final = object.__new__


def loaded_view(datamodel: dict[str, Any]) -> VariablesView:
    """``VariablesView.from_stored``, without a class method's lookups: every position read
    of an ECMAScript chart makes one (``Datamodel.state_variables``), so it costs what
    handing the Python datamodel's ``dict`` back costs, within a few attribute stores."""
    view: VariablesView = _new(VariablesView)
    view._whole = datamodel
    view._system = None  # split on the first read (the other slots with it)
    view._typed = False
    return view


def engine_view(
    system: dict[str, Any], names: frozenset[str], source: Callable[[], dict[str, Any]]
) -> VariablesView:
    """The view of a state whose variables the engine still holds: ``source`` gives their
    stored form as ``json.loads`` reads the JSON text the engine writes (``JSON.stringify``
    and the stored form's encoder, which tag NaN and the infinities: never a bare
    ``NaN``), so the view vouches for its chart variables' types (``chart_json_typed``).
    ``system`` holds the system variables alone (the core's values, checked as ever)."""
    # Every step of a chart makes one: the slots stored here, without ``__init__``'s call.
    view: VariablesView = _new(VariablesView)
    view._system = system
    view._names = names
    view._source = source
    view._stored = view._whole = view._plain = view._decoder = None
    view._typed = True
    return view
