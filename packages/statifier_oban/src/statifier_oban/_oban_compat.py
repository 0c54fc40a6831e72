"""Every use of oban's private internals, in one place. Checked against oban 0.7.0.

oban-py 0.7.0 has no public way to do what follows, so this module reaches into it;
no other module of statifier_oban touches a name with a leading underscore from oban.
``pyproject.toml`` pins ``oban>=0.7.0,<0.8``. Before widening the pin, re-read each item
against the new oban's source and run ``test_oban_compat.py`` (in the package's tests),
which exercises every one of them on the installed oban.

``Oban._query._pool`` (an ``oban._query.Query``'s pool)
    The host's connection pool. Our own statements (insert-if-absent, the scoped cancel,
    the pending count; oban 0.7.0 has no unique jobs and no cancel-by-query) run on the
    pool the host built its ``Oban`` with, and ``Oban`` does not expose it.
``Oban._prefix``
    The schema holding the host's oban tables, written into those statements. ``Oban``
    takes it as ``prefix=`` and does not expose it either.
``oban._extensions.get_ext`` / ``put_ext``, key ``"stager.build"``
    The hook through which ``Oban.__init__`` builds its Stager (``use_ext("stager.build",
    build_stager, ...)``). Prompt staging (``statifier_oban.latency``, ADR 0006) installs
    its builder there, and restores oban's own ``oban._stager.build_stager`` to undo it.
``oban._stager.Stager``, its ``_stage`` method and its ``_query``, ``_producers`` and
``_limit`` attributes
    Prompt staging subclasses oban's Stager and replaces its staging step (``_stage``,
    called by the Stager's loop every interval). :class:`StagerBridge` does the
    replacing and hands the step what it needs (the pool and prefix of the Stager's
    ``Query``, the queues of its producers, its batch limit, a way to wake a producer)
    as a public :class:`StagingRound`.
``Oban._stager`` and a Stager's ``_interval`` (read, for checks only)
    Which Stager an ``Oban`` built, and its poll interval: :func:`stager_of` and
    :func:`interval_of`, for the tests and the timer benchmark to confirm that prompt
    staging is in effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from oban import Oban
from oban._extensions import get_ext, put_ext
from oban._stager import Stager, build_stager
from psycopg_pool import AsyncConnectionPool

OBAN_VERSION_CHECKED = "0.7.0"
"""The oban release every item of the module docstring was checked against."""

STAGER_HOOK = "stager.build"
"""oban's extension key for building an ``Oban``'s Stager."""


def pool_of(oban: Oban) -> AsyncConnectionPool[Any]:
    """The connection pool ``oban`` was built with."""
    pool: AsyncConnectionPool[Any] = oban._query._pool
    return pool


def prefix_of(oban: Oban) -> str:
    """The schema prefix ``oban`` was built with (unchecked: callers validate it)."""
    prefix: str = oban._prefix
    return prefix


def stager_builder() -> Callable[..., Any]:
    """The function oban will call to build the Stager of the next ``Oban``."""
    return get_ext(STAGER_HOOK, build_stager)


def set_stager_builder(build: Callable[..., Any] | None) -> None:
    """Make oban build the Stager of every later ``Oban`` with ``build`` (None: oban's own)."""
    put_ext(STAGER_HOOK, build if build is not None else build_stager)


def stager_of(oban: Oban) -> object:
    """The Stager ``oban`` built."""
    stager: object = oban._stager
    return stager


def interval_of(stager: object) -> float | None:
    """A Stager's poll interval in seconds (None if it is not an oban Stager)."""
    if not isinstance(stager, Stager):
        return None
    interval: float = stager._interval
    return interval


class Producer(Protocol):
    """The part of oban's per-queue producer a staging step uses."""

    def notify(self) -> None:
        """Wake the producer: it fetches available jobs now instead of at its next tick."""


@dataclass(frozen=True, slots=True)
class StagingRound:
    """What one staging step gets from oban's Stager: where to stage, and whom to wake."""

    pool: AsyncConnectionPool[Any]
    """The pool of the ``Oban`` that built the Stager."""
    prefix: str
    """Its schema prefix (unchecked)."""
    queues: list[str]
    """The queues this node runs."""
    limit: int
    """The most jobs to stage in one step (oban's ``stager={"limit": ...}``)."""
    producers: Mapping[str, Producer]
    """The producer of each queue."""

    def wake(self, queue: str) -> None:
        """Wake the producer of ``queue``, if this node runs it."""
        producer = self.producers.get(queue)
        if producer is not None:
            producer.notify()


class StagerBridge(Stager):
    """oban's Stager with its staging step replaced by ``stage(round)``, which a subclass
    defines. Everything else (the loop, the interval, listening for inserts, stopping) is oban's.
    """

    async def _stage(self) -> None:
        query = self._query
        await self.stage(
            StagingRound(
                pool=query._pool,
                prefix=query._prefix,
                queues=list(self._producers),
                limit=self._limit,
                producers=self._producers,
            )
        )

    if TYPE_CHECKING:
        # Declared, not defined: a subclass defines the step; oban's loop logs a failure.
        async def stage(self, round: StagingRound) -> None:
            """One staging step."""
