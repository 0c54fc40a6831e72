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

    __slots__ = ("_decoder", "_names", "_plain", "_source", "_stored", "_system")

    def __init__(
        self,
        system: dict[str, Any],
        names: frozenset[str],
        stored: dict[str, Any] | None,
        source: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._system = system
        self._names = names
        self._stored = stored
        self._source = source
        """Gives the stored form when it is first needed (``stored`` None: the engine still
        holds the variables)."""
        self._plain: dict[str, Any] = {}
        self._decoder: PlainDecoder | None = None

    @classmethod
    def from_stored(cls, datamodel: Mapping[str, Any]) -> VariablesView:
        """The view of a stored datamodel (system variables and the stored form together,
        as a position holds it)."""
        system = {name: datamodel[name] for name in SYSTEM_VARIABLES if name in datamodel}
        user = {name: value for name, value in datamodel.items() if name not in system}
        return cls(system, frozenset(name for name in user if name != HEAP), user)

    @property
    def system(self) -> dict[str, Any]:
        """The system variables' values (the core's: plain data)."""
        return self._system

    def stored(self) -> dict[str, Any]:
        """The datamodel in the stored form, as a position keeps it (a new dict)."""
        return {**self._system, **self.user_stored()}

    def user_stored(self) -> dict[str, Any]:
        """The chart's variables in the stored form (``#objects`` included): not a copy."""
        stored = self._stored
        if stored is None:
            assert self._source is not None  # noqa: S101 - a view has one or the other
            stored = self._stored = self._source()
            self._source = None
        return stored

    # -- the mapping ---------------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        system = self._system
        if name in system:
            return system[name]
        plain = self._plain
        if name in plain:
            return plain[name]
        if name not in self._names:
            raise KeyError(name)
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = PlainDecoder(self.user_stored(), system)
        value = plain[name] = decoder.variable(name)
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._system or name in self._names

    def __iter__(self) -> Iterator[str]:
        yield from self._system
        yield from sorted(self._names)

    def __len__(self) -> int:
        return len(self._system) + len(self._names)

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
