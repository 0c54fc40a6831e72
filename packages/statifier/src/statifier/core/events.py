"""Events: what the interpreter consumes from its queues."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from statifier.chart.model import Machine

EventType = Literal["internal", "external", "platform"]

SCXML_EVENT_PROCESSOR = "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"
"""The type URI of the SCXML Event I/O Processor (origintype of every event we build)."""

BASIC_HTTP_EVENT_PROCESSOR = "http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"
"""The type URI of the BasicHTTP Event I/O Processor (SCXML C.2; origintype of the events
an HTTP POST to a session's location becomes)."""

MAX_NAME_LENGTH = 4096
"""The longest event name (or id) a chart may make: a ``<send>`` refuses longer ones."""


@dataclass(frozen=True, kw_only=True, init=False)
class Event:
    """One SCXML event.

    ``type`` is provenance only: internal and platform events share the internal queue.
    ``data`` is a JSON-like value or None. ``caller_context`` is an opaque host term that
    the core copies onto the effects of the macrostep the event starts and never reads;
    it is not visible to the chart (it is not part of ``_event``). ``raw`` is the message
    as it arrived, for events an I/O processor received (a BasicHTTP POST: its request
    line, content type and body); ``_event`` has the field only when it is set.
    """

    # A host builds one Event per event it feeds in, so construction is on the hot path.
    # Instances store only the fields that differ from their defaults (the class holds
    # the defaults): building ``Event(name=...)`` is then one dict store instead of eight
    # frozen-attribute writes. Reading, equality, hashing, ``replace`` and ``asdict`` see
    # every field as usual.

    name: str
    type: EventType = "external"
    data: Any = None
    sendid: str | None = None
    origin: str | None = None
    origintype: str | None = None
    invokeid: str | None = None
    caller_context: Any = None
    raw: str | None = None

    def __init__(
        self,
        *,
        name: str,
        type: EventType = "external",
        data: Any = None,
        sendid: str | None = None,
        origin: str | None = None,
        origintype: str | None = None,
        invokeid: str | None = None,
        caller_context: Any = None,
        raw: str | None = None,
    ) -> None:
        fields = self.__dict__
        fields["name"] = name
        if type != "external":
            fields["type"] = type
        if data is not None:
            fields["data"] = data
        if sendid is not None:
            fields["sendid"] = sendid
        if origin is not None:
            fields["origin"] = origin
        if origintype is not None:
            fields["origintype"] = origintype
        if invokeid is not None:
            fields["invokeid"] = invokeid
        if caller_context is not None:
            fields["caller_context"] = caller_context
        if raw is not None:
            fields["raw"] = raw

    def as_system_variable(self) -> dict[str, Any]:
        """The ``_event`` value the datamodel exposes while this event is processed."""
        # The defaults in their order, overlaid with the fields this instance stores (see
        # ``__init__``): one dict display merged in C instead of seven attribute reads (and
        # without the method calls of a copy and an update).
        variable = {**_SYSTEM_VARIABLE, **self.__dict__}
        if len(variable) != len(_SYSTEM_VARIABLE):
            variable.pop("caller_context", None)  # not part of ``_event``
        return variable


_SYSTEM_VARIABLE: dict[str, Any] = {
    "name": None,
    "type": Event.type,
    "sendid": Event.sendid,
    "origin": Event.origin,
    "origintype": Event.origintype,
    "invokeid": Event.invokeid,
    "data": Event.data,
}
"""``Event.as_system_variable`` of an event with every field at its default (name aside)."""


def external(name: str, data: Any = None, **fields: Any) -> Event:
    """Build an external event, the kind a host feeds into ``handle_event``."""
    return Event(name=name, type="external", data=data, **fields)


def name_matches(descriptors: tuple[str, ...], name: str) -> bool:
    """Spec 3.12.1 event-descriptor matching.

    A descriptor matches a name equal to it or a name that extends it at a ``.`` boundary;
    ``*`` (and ``.*``, its empty-prefix spelling) matches everything; a trailing ``.*`` or
    ``.`` on a descriptor is ignored.
    """
    for descriptor in descriptors:
        if descriptor == "*" or descriptor == name:
            return True
        if descriptor.endswith(".*"):
            descriptor = descriptor[:-2]
        elif descriptor.endswith("."):
            descriptor = descriptor[:-1]
        if not descriptor or name == descriptor or name.startswith(descriptor + "."):
            return True
    return False


class DescriptorIndex:
    """Which of many descriptor lists match an event name: for each name, the keys of
    the lists :func:`name_matches` says match it, in time that grows with the name and
    the answer, not with the lists (a chart's transitions, looked up per event name).

    With its ``.*`` or ``.`` ending taken off, a descriptor matches a name exactly when
    it is the whole name or the name up to one of its dots; ``*`` and a descriptor that
    is nothing but such an ending match every name."""

    __slots__ = ("_by_prefix", "_every", "_lengths")

    def __init__(self, entries: Iterable[tuple[int, tuple[str, ...]]] = ()) -> None:
        self._every: set[int] = set()
        self._by_prefix: dict[str, set[int]] = {}
        self._lengths: set[int] = set()
        """The lengths of the descriptors held: only a name's prefixes of those lengths
        are looked up (a name of thousands of dots would otherwise cost its length
        squared in slices)."""
        for key, descriptors in entries:
            self.add(key, descriptors)

    def add(self, key: int, descriptors: tuple[str, ...]) -> None:
        """Index one more list of descriptors under ``key``."""
        for descriptor in descriptors:
            if descriptor == "*":
                self._every.add(key)
                continue
            if descriptor.endswith(".*"):
                descriptor = descriptor[:-2]
            elif descriptor.endswith("."):
                descriptor = descriptor[:-1]
            if descriptor:
                self._by_prefix.setdefault(descriptor, set()).add(key)
                self._lengths.add(len(descriptor))
            else:
                self._every.add(key)

    def __len__(self) -> int:
        """How many descriptors (less their endings) it holds, those that match every name
        counted as one."""
        return len(self._by_prefix) + (1 if self._every else 0)

    def matching(self, name: str) -> frozenset[int]:
        """The keys whose descriptors match ``name``."""
        by_prefix = self._by_prefix
        lengths = self._lengths
        found = set(self._every)
        # The prefixes up to a dot that have a descriptor's length: read from the dots or
        # from the lengths, whichever are fewer.
        if name.count(".") <= len(lengths):
            ends: Iterable[int] = _dots(name)
        else:
            size = len(name)
            ends = [n for n in lengths if n < size and name[n] == "."]
        for end in ends:
            if end in lengths:
                keys = by_prefix.get(name[:end])
                if keys:
                    found |= keys
        keys = by_prefix.get(name)
        if keys:
            found |= keys
        return frozenset(found)


def _dots(name: str) -> Iterator[int]:
    """Where the dots of ``name`` are."""
    dot = name.find(".")
    while dot >= 0:
        yield dot
        dot = name.find(".", dot + 1)


_TRANSITION_INDEX: Final = "descriptors"
"""The machine cache's key of its ``transition_index``."""


def transition_index(machine: Machine) -> DescriptorIndex:
    """``machine``'s transitions (by index) under their event descriptors, built once per
    machine and kept in its cache: what the interpreter selects by and what the notice
    for an unmatched event asks (``statifier.chart.matching``)."""
    cache = machine._cache
    index: DescriptorIndex | None = cache.get(_TRANSITION_INDEX)
    if index is None:
        index = cache[_TRANSITION_INDEX] = DescriptorIndex(
            (t.index, t.events) for t in machine.transitions if t.events
        )
    return index
