"""What an execution has armed: its pending delayed sends and its invocations' generations.

A timer job that was already running when a step cancelled its send (the cancel skips
executing jobs) fires anyway, and so does a job a worker fetched just before the cancel
committed. SCXML 6.3 says a cancelled send is never delivered, whatever the timing, so
the execution itself keeps the list of what is armed, in its row (``armed``), updated by
the same transaction that arms or cancels (ADR 12):

* a delayed send is armed when the executor stored its timer; ``<cancel>`` disarms every
  send of its send id (all were sent before it: ordinals come from one counter); firing
  disarms the one that fired. ``Executions.fire`` drives a send only while it is armed,
  checked under the row lock; any other is declined (:data:`CANCELLED`);
* an invocation is armed with its generation (the macrostep that started it) while it is
  live in the position, so the answer of an earlier generation of a re-entered state's
  invoke id is told from the live one's without asking the executor;
* an invocation that is a child execution (``<invoke type="scxml">``) is armed with that
  execution's id too (``children``): a message from any other execution under its invoke
  id is from a cancelled or superseded child, and declined. A child that finished before
  its invocation was stopped (its ``done`` was waiting when the state was left) keeps its
  messages, as in live sessions: it moves to ``finished`` until its ``done`` is applied.

Rows stored before executions kept this list (the column is null), and rows whose
position was last written by such a version during a rolling upgrade, have an unknown
past: a send with an ordinal up to the position's ``timer_counter`` then (``since``) is
driven unless a ``<cancel>`` of its send id ran since (``cut``), and everything armed
from then on is checked.

The column is JSON an operator can read (``since`` and ``cut`` only on such rows)::

    {"sends": {"hold": [7]}, "invocations": {"charge": 3, "kid": 4},
     "children": {"kid": "inv_6f1c..."}, "finished": {"old": "inv_90ab..."},
     "since": 5, "cut": ["ping"]}

(``children`` and ``finished`` only when not empty.)

It is bounded by ``Limits.max_armed_sends`` (a chart arming more hears
``error.communication``) and, as everything read from storage, checked on the way in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from statifier.core.effects import SendDelayed
from statifier.values import json_value_text_utf8, read_json

from ._limits import MAX_ID_LENGTH

CANCELLED: Final = "cancelled"
"""The reason a fired delayed send that is no longer armed is declined: it was cancelled
(by a ``<cancel>``, by leaving its state, by a re-arm's cancel) since it was armed."""


class Armed:
    """One execution's armed sends and invocations, changed by its drive (see the module
    docstring). ``since``: ordinals up to it predate the list; ``cut``: send ids whose
    sends up to ``since`` were cancelled since."""

    __slots__ = ("_sends", "children", "cut", "finished", "invocations", "sends", "since")

    def __init__(
        self,
        sends: dict[str, list[int]] | None = None,
        invocations: dict[str, int] | None = None,
        since: int = 0,
        cut: set[str] | None = None,
        children: dict[str, str] | None = None,
        finished: dict[str, str] | None = None,
    ) -> None:
        self._sends: dict[str, list[int]] = sends if sends is not None else {}
        self.invocations: dict[str, int] = invocations if invocations is not None else {}
        self.children: dict[str, str] = children if children is not None else {}
        """Invoke id -> the id of the child execution it started (``<invoke type="scxml">``)."""
        self.finished: dict[str, str] = finished if finished is not None else {}
        """Invoke id -> a child that finished before its invocation stopped (its ``done``
        is still to be applied)."""
        self.since = since
        self.cut: set[str] = cut if cut is not None else set()
        count = 0
        for ordinals in self._sends.values():
            count += len(ordinals)
        self.sends = count
        """How many delayed sends are armed."""

    def arm(self, effect: SendDelayed) -> None:
        """The executor stored ``effect``'s timer."""
        self._sends.setdefault(effect.send_id, []).append(effect.ordinal)
        self.sends += 1

    def cancel(self, send_id: str) -> None:
        """A ``<cancel>`` of ``send_id`` ran: every send of that id armed so far is off."""
        self.sends -= len(self._sends.pop(send_id, ()))
        if self.since:
            self.cut.add(send_id)

    def fire(self, effect: SendDelayed) -> bool:
        """Whether ``effect`` is armed (then it is disarmed: it fires now)."""
        if effect.ordinal <= self.since:
            return effect.send_id not in self.cut
        ordinals = self._sends.get(effect.send_id)
        if ordinals is None or effect.ordinal not in ordinals:
            return False
        ordinals.remove(effect.ordinal)
        self.sends -= 1
        if not ordinals:
            del self._sends[effect.send_id]
        return True

    def invoked(self, invoke_id: str, generation: int) -> None:
        """The executor started invocation ``invoke_id`` in macrostep ``generation``."""
        self.invocations[invoke_id] = generation

    def send_ids(self) -> list[str]:
        """The send ids of every armed delayed send (ordinals past ``since`` only)."""
        return sorted(self._sends)

    def generation(self, invoke_id: str) -> int | None:
        """The generation of the live invocation ``invoke_id`` (None: not known here)."""
        return self.invocations.get(invoke_id)

    def clear(self) -> None:
        """The execution is terminal: nothing it armed can fire into it any more."""
        self._sends.clear()
        self.invocations.clear()
        self.children.clear()
        self.finished.clear()
        self.since = 0
        self.cut.clear()
        self.sends = 0

    def encode(self, live_invocations: Iterable[str]) -> str:
        """The column's JSON text; invocations no longer live in the position are left out."""
        live = set(live_invocations)
        document: dict[str, Any] = {
            "sends": self._sends,
            "invocations": {k: v for k, v in self.invocations.items() if k in live},
        }
        children = {k: v for k, v in self.children.items() if k in live}
        if children:
            document["children"] = children
        if self.finished:
            document["finished"] = self.finished
        if self.since:
            document["since"] = self.since
            document["cut"] = sorted(self.cut)
        return json_value_text_utf8(document)  # ids, counts and lists of them: JSON


def decode_armed(text: str, corrupt: Callable[[str], Exception]) -> Armed:
    """The ``armed`` column read back (its size is bounded by the read); ``corrupt(message)``
    is raised when it is not what a step writes: storage is as untrusted as a caller."""
    try:
        document = read_json(text)
    except (ValueError, RecursionError) as exc:
        raise corrupt(f"the armed list is not valid JSON: {exc}") from None
    if type(document) is not dict or not document.keys() <= _FIELDS:
        raise corrupt(
            "the armed list is not an object of sends, invocations, children, finished, since"
            " and cut"
        )
    sends = document.get("sends", {})
    invocations = document.get("invocations", {})
    since = document.get("since", 0)
    cut = document.get("cut", [])
    children = document.get("children", {})
    finished = document.get("finished", {})
    # Loops, and all() over the cut only when it has items: this reads every step's
    # row, whose lists are short or empty, and a generator costs more than their check.
    if (
        type(sends) is not dict
        or type(invocations) is not dict
        or not _ids(children)
        or not _ids(finished)
        or not _count(since, 0)
        or type(cut) is not list
        or (cut and not all(type(send_id) is str for send_id in cut))
    ):
        raise corrupt("the armed list has a field of the wrong type")
    for ordinals in sends.values():
        if type(ordinals) is not list or not ordinals:
            raise corrupt("an armed send id holds no list of ordinals")
        for ordinal in ordinals:
            if not _count(ordinal, 1):
                raise corrupt("an armed ordinal is not an integer >= 1")
    for generation in invocations.values():
        if not _count(generation, 0):
            raise corrupt("an armed invocation's generation is not an integer >= 0")
    return Armed(sends, invocations, since, set(cut), children, finished)


_FIELDS: Final = frozenset({"sends", "invocations", "since", "cut", "children", "finished"})


def _ids(value: Any) -> bool:
    """Whether ``value`` maps invoke ids to execution ids."""
    if type(value) is not dict:
        return False
    for child in value.values():
        if type(child) is not str or not 0 < len(child) <= MAX_ID_LENGTH:
            return False
    return True


def _count(value: Any, minimum: int) -> bool:
    """Whether ``value`` is an integer (never a boolean) of at least ``minimum``."""
    return type(value) is int and value >= minimum
