"""The process-wide session registry: ``session_id`` -> live ``Session``.

A session registers when it starts and unregisters when it stops; a halted session
(done, cancelled, budget exhausted) stays registered until its owner stops it, so a
durable delivery can tell "halted" from "gone" (the two-step liveness check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statifier.errors import StatifierError

if TYPE_CHECKING:
    from statifier.runtime.session import Session

_SESSIONS: dict[str, Session] = {}


class DuplicateSession(StatifierError):
    """A session with this id is already registered in this process."""


def register(session: Session) -> None:
    """Make ``session`` reachable by its id. Refuses an id already in use."""
    if session.session_id in _SESSIONS:
        raise DuplicateSession(f"session {session.session_id!r} is already running")
    _SESSIONS[session.session_id] = session


def unregister(session_id: str) -> None:
    """Forget a session (a no-op if it is not registered)."""
    _SESSIONS.pop(session_id, None)


def lookup(session_id: str) -> Session | None:
    """The live session with this id, or None."""
    return _SESSIONS.get(session_id)


def session_ids() -> list[str]:
    """Ids of every registered session."""
    return list(_SESSIONS)


class Routes:
    """A reachability view over the registry for the core's ``routes`` snapshot.

    Membership is answered from the registry at the moment the core asks, so building
    it costs nothing however many sessions run in the process.
    """

    __slots__ = ("_has_parent",)

    def __init__(self, has_parent: bool) -> None:
        self._has_parent = has_parent

    def __contains__(self, target: object) -> bool:
        if target == "#_parent":
            return self._has_parent
        if isinstance(target, str) and target.startswith("#_scxml_"):
            return target[len("#_scxml_") :] in _SESSIONS
        return False
