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
``oban._stager.Stager._loop``, ``_on_notification``, ``_notifier``, ``_stopping`` (issue 12)
    :class:`StagerBridge` replaces the Stager's loop (oban's sleeps a fixed interval after
    each step) with one that sleeps for as long as the step asks, can be roused earlier
    (:meth:`StagerBridge.rouse_at`), and listens on extra notifier channels
    (:meth:`StagerBridge.channels`). It still stops on the Stager's ``_stopping`` event,
    which oban's ``stop`` sets. oban's handler of the ``insert`` channel is wrapped so that
    a producer woken by a notification knows new jobs may be available.
``oban._executor.AckAction`` (its fields, read) and the key ``"query.ack_jobs"``
    How oban writes what its executor decided (complete, cancel, snooze, retry, discard)
    to the rows: ``Query.ack_jobs(acks)`` calls the ``query.ack_jobs`` extension with the
    ``Query`` and a list of ``AckAction`` (``id``, ``attempted_at``, ``state``,
    ``attempt_change``, ``schedule_in``, ``error``, ``meta``). oban 0.7.0 writes them with
    one ``UPDATE`` each inside a transaction; :func:`set_ack_writer` hands them to our
    writer as columns (:class:`AckColumns`) instead.
``oban.telemetry.core._handlers`` (read; issue 12)
    The handlers attached per event name. :func:`telemetry_handled` tells whether an event
    has any, so that a hot path (``schedule_many``: one ``timer.scheduled`` per timer)
    builds no event nobody receives; ``oban.telemetry`` has no public way to ask.
``oban._producer.Producer`` (``_limit``, ``_running_jobs``, ``_paused``, ``_queue``,
``_node``, ``_uuid``, ``_query``) and the key ``"producer.get_jobs"``
    How a producer fetches: ``Producer._get_jobs`` calls the ``producer.get_jobs``
    extension with the producer. :func:`set_job_fetcher` hands our fetcher a
    :class:`FetchRequest` (queue, node, uuid, demand, pool, prefix) and skips a fetch that
    cannot find anything: the producer's last fetch found fewer jobs than it asked for,
    and nothing has announced new jobs since (a staging NOTIFY, oban's insert NOTIFY, our
    stager finding available jobs). Only producers whose Stager is a :class:`StagerBridge`
    are ever skipped: that Stager is what announces new jobs to them.
``oban._executor.Executor`` (built with ``job`` and ``safe``, ``execute()``, ``action``) and
``Oban._query.ack_jobs`` (issue 23)
    How a producer runs one fetched job (``Producer._execute``: an ``Executor`` with
    ``safe=True``, whose ``action`` is the outcome) and writes the outcome (its
    ``Query.ack_jobs``, which calls the ``query.ack_jobs`` extension, our writer once
    ``latency.install`` ran). :func:`run_job` does the same for one job outside any
    producer: the time-skipping test environment (``statifier_oban.testing``) runs due jobs
    through it, one at a time, so they take the path a worker's jobs take.
``oban.oban._instances`` (issue 23)
    oban's registry of instances by name, which every ``Oban`` joins when it is built.
    :func:`forget_instance` takes a test environment's instance out when it closes.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import oban.oban as oban_module
from oban import Oban
from oban._executor import AckAction, Executor
from oban._extensions import get_ext, put_ext
from oban._producer import Producer as ObanProducer
from oban._producer import _get_jobs as oban_get_jobs
from oban._query import Query
from oban._query import _ack_jobs as oban_ack_jobs
from oban._stager import Stager, build_stager
from oban.job import Job
from oban.telemetry import core as telemetry_core
from psycopg_pool import AsyncConnectionPool

logger = logging.getLogger("statifier_oban.stager")

OBAN_VERSION_CHECKED = "0.7.0"
"""The oban release every item of the module docstring was checked against."""

STAGER_HOOK = "stager.build"
"""oban's extension key for building an ``Oban``'s Stager."""

ACK_HOOK = "query.ack_jobs"
"""oban's extension key for writing a batch of executor outcomes to the rows."""

FETCH_HOOK = "producer.get_jobs"
"""oban's extension key for a producer's fetch of available jobs."""


def pool_of(oban: Oban) -> AsyncConnectionPool[Any]:
    """The connection pool ``oban`` was built with."""
    pool: AsyncConnectionPool[Any] = oban._query._pool
    return pool


def prefix_of(oban: Oban) -> str:
    """The schema prefix ``oban`` was built with (unchecked: callers validate it)."""
    prefix: str = oban._prefix
    return prefix


async def run_job(oban: Oban, job: Job) -> str | None:
    """Run a fetched (``executing``) ``job`` as oban's producer does, its worker's errors
    caught and recorded by oban's executor, and write the outcome through ``oban``'s ack
    path. Returns the state written (``completed``, ``retryable``, ``scheduled`` for a
    snooze...), None when the executor decided nothing."""
    executor = await Executor(job=job, safe=True).execute()
    action = executor.action
    if action is None:
        return None
    await oban._query.ack_jobs([action])
    state: str = action.state
    return state


def forget_instance(oban: Oban) -> None:
    """Take ``oban`` out of oban's registry of instances by name (if it is still there)."""
    name: str = oban._name
    if oban_module._instances.get(name) is oban:
        del oban_module._instances[name]


def telemetry_handled(name: str) -> bool:
    """Whether any handler is attached to oban telemetry event ``name``."""
    return bool(telemetry_core._handlers.get(name))


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
        """Wake the producer of ``queue``, if this node runs it, telling it jobs may wait."""
        producer = self.producers.get(queue)
        if producer is not None:
            _announce(producer)
            producer.notify()


class StagerBridge(Stager):
    """oban's Stager with its staging step replaced by ``stage(round)``, which a subclass
    defines, and its loop by one that sleeps for as long as that step asks.

    ``stage`` returns how many seconds to rest before the next step (``None``: the
    Stager's interval; never more than the interval). :meth:`rouse_at` cuts a rest short,
    :meth:`channels` names extra notifier channels to listen on. Listening for inserts and
    stopping are oban's.
    """

    def __init__(self, **options: Any) -> None:
        """oban's Stager options (query, notifier, producers, interval, limit)."""
        super().__init__(**options)
        self._rest_until = 0.0
        self._roused = asyncio.Event()
        self._channel_tokens: list[str] = []
        for producer in self._producers.values():
            manage(producer)

    @property
    def interval(self) -> float:
        """The longest rest between two steps, in seconds."""
        interval: float = self._interval
        return interval

    def cap_interval(self, seconds: float) -> None:
        """Never rest longer than ``seconds`` (whatever interval the host configured)."""
        self._interval = min(self._interval, seconds)

    def runs(self, queue: object) -> bool:
        """Whether this node runs ``queue`` (it has a producer for it)."""
        return isinstance(queue, str) and queue in self._producers

    def channels(self) -> Mapping[str, Callable[[dict[str, Any]], None]]:
        """Extra notifier channels (short names, as oban's notifier takes them) and the
        callback of each; a subclass overrides this. Called once, when the Stager starts."""
        return {}

    def rouse_at(self, when: float) -> None:
        """End the current rest at event-loop time ``when`` if it would end later."""
        if when < self._rest_until:
            self._rest_until = when
            self._roused.set()

    async def start(self) -> None:
        """Start oban's Stager (our loop), then listen on :meth:`channels`."""
        await super().start()
        for channel, callback in self.channels().items():
            self._channel_tokens.append(
                await self._notifier.listen(channel, _sync_callback(callback), wait=False)
            )

    async def stop(self) -> None:
        """Stop listening, end the current rest, and let oban stop the loop."""
        for token in self._channel_tokens:
            await self._notifier.unlisten(token)
        self._channel_tokens.clear()
        self._stopping.set()
        self._roused.set()
        await super().stop()

    async def _on_notification(self, channel: str, payload: dict[str, Any]) -> None:
        queue = payload.get("queue")
        producer = self._producers.get(queue) if isinstance(queue, str) else None
        if producer is not None:
            _announce(producer)
        await super()._on_notification(channel, payload)

    async def _stage(self) -> None:
        await self._step()

    async def _step(self) -> float | None:
        query = self._query
        for producer in self._producers.values():
            manage(producer)  # queues started after the Stager was built
        return await self.stage(
            StagingRound(
                pool=query._pool,
                prefix=query._prefix,
                queues=list(self._producers),
                limit=self._limit,
                producers=self._producers,
            )
        )

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            rest: float | None = None
            try:
                rest = await self._step()
            except asyncio.CancelledError:
                break
            except Exception as error:
                logger.warning(
                    "the stager failed to stage jobs: %s",
                    error,
                    exc_info=True,
                    extra={"error": str(error)},
                )
                for producer in self._producers.values():
                    producer.notify()
            await self._rest(self._interval if rest is None else min(rest, self._interval))

    async def _rest(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self._rest_until = loop.time() + max(0.0, seconds)
        while not self._stopping.is_set():
            remaining = self._rest_until - loop.time()
            if remaining <= 0:
                return
            self._roused.clear()
            try:
                await asyncio.wait_for(self._roused.wait(), timeout=remaining)
            except TimeoutError:
                return

    if TYPE_CHECKING:
        # Declared, not defined: a subclass defines the step; our loop logs a failure.
        async def stage(self, round: StagingRound) -> float | None:
            """One staging step; returns the seconds to rest before the next one."""


def _sync_callback(
    callback: Callable[[dict[str, Any]], None],
) -> Callable[[str, dict[str, Any]], None]:
    """oban's notifier calls ``callback(channel, payload)``; ours take the payload only."""

    def call(_channel: str, payload: dict[str, Any]) -> None:
        callback(payload)

    return call


# -- producers: announcements and the fetch ----------------------------------------------------


@dataclass(slots=True)
class _FetchState:
    """What a managed producer's fetcher remembers between two fetches."""

    announced: int = 0
    """Announcements of new jobs so far (a counter, so one during a fetch is not lost)."""
    exhausted_at: int | None = None
    """``announced`` when the last fetch found fewer jobs than it asked for, else None."""
    limit: int = 0
    """The producer's limit at that fetch (a scale-up is worth a fetch)."""


_fetch_states: weakref.WeakKeyDictionary[object, _FetchState] = weakref.WeakKeyDictionary()
"""Producers run by a :class:`StagerBridge`: the only ones whose fetch may be skipped."""


def manage(producer: object) -> None:
    """Let the fetcher skip ``producer``'s fetches that cannot find anything."""
    if producer not in _fetch_states:
        _fetch_states[producer] = _FetchState()


def _announce(producer: object) -> None:
    """New jobs may be available to ``producer``: its next fetch runs."""
    state = _fetch_states.get(producer)
    if state is not None:
        state.announced += 1


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """One fetch of a producer: who asks, how many jobs, and where."""

    pool: AsyncConnectionPool[Any]
    """The pool of the producer's ``Oban``."""
    prefix: str
    """Its schema prefix (unchecked)."""
    queue: str
    """The producer's queue."""
    node: str
    """The producer's node (written to ``attempted_by`` with its uuid)."""
    uuid: str
    """The producer's uuid."""
    demand: int
    """How many jobs it can start (at least 1)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a fetch found: the jobs, now executing, and whether the queue ran dry."""

    jobs: list[Job]
    """The jobs to run."""
    exhausted: bool
    """True when fewer available jobs than the demand were there to take."""


type JobFetcher = Callable[[FetchRequest], Awaitable[Fetched]]
"""Our fetch: one request in, the jobs taken out."""


def set_job_fetcher(fetch: JobFetcher | None) -> None:
    """Make every producer fetch with ``fetch`` (None: oban's own fetch)."""
    if fetch is None:
        put_ext(FETCH_HOOK, oban_get_jobs)
        return

    async def get_jobs(producer: ObanProducer) -> list[Job]:
        demand = producer._limit - len(producer._running_jobs)
        if demand <= 0:
            return []
        state = _fetch_states.get(producer)
        if (
            state is not None
            and state.exhausted_at == state.announced
            and producer._limit <= state.limit
        ):
            return []  # nothing was announced since the queue ran dry
        announced = state.announced if state is not None else 0
        query = producer._query
        found = await fetch(
            FetchRequest(
                pool=query._pool,
                prefix=query._prefix,
                queue=producer._queue,
                node=producer._node,
                uuid=producer._uuid,
                demand=demand,
            )
        )
        if state is not None:
            state.exhausted_at = announced if found.exhausted else None
            state.limit = producer._limit
        return found.jobs

    get_jobs.statifier_fetch = fetch  # type: ignore[attr-defined]
    put_ext(FETCH_HOOK, get_jobs)


def job_fetcher() -> JobFetcher | None:
    """The fetch every producer uses (None: oban's own)."""
    current = get_ext(FETCH_HOOK, oban_get_jobs)
    found: JobFetcher | None = getattr(current, "statifier_fetch", None)
    return found


# -- acks --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AckColumns:
    """A batch of executor outcomes as columns, one entry per job, in oban's terms.

    ``states`` are oban job states (``completed``, ``cancelled``, ``scheduled`` for a
    snooze, ``retryable``, ``discarded``). An ack applies only while the row is still the
    attempt it was fetched as (``executing`` with that ``attempted_at``).
    """

    pool: AsyncConnectionPool[Any]
    """The pool of the ``Oban`` whose producer acks."""
    prefix: str
    """Its schema prefix (unchecked)."""
    ids: list[int | None]
    """The job ids (never None for a fetched job)."""
    attempted_at: list[datetime | None]
    """Each job's ``attempted_at`` as fetched (naive UTC, as the column stores it)."""
    states: list[str]
    """The state each job moves to."""
    attempt_changes: list[int | None]
    """Added to ``attempt`` (a snooze gives its attempt back: -1), or None."""
    schedule_in: list[int | None]
    """Seconds from now to the next ``scheduled_at`` (snooze, retry), or None."""
    errors: list[dict[str, Any] | None]
    """An error appended to ``errors`` (cancel, retry, discard), or None."""
    metas: list[dict[str, Any] | None]
    """Merged into ``meta`` (a snooze's count, a recorded result), or None."""


type AckWriter = Callable[[AckColumns], Awaitable[list[int]]]
"""Our ack: the batch in, the ids of the rows it changed out."""


def _naive_utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    # Built from its fields: ``replace(tzinfo=None)`` parses its keyword for longer.
    moment = value.astimezone(UTC)
    return datetime(
        moment.year,
        moment.month,
        moment.day,
        moment.hour,
        moment.minute,
        moment.second,
        moment.microsecond,
    )


def set_ack_writer(write: AckWriter | None) -> None:
    """Make every producer write its batch of outcomes with ``write`` (None: oban's own)."""
    if write is None:
        put_ext(ACK_HOOK, oban_ack_jobs)
        return

    async def ack_jobs(query: Query, acks: list[AckAction]) -> list[int]:
        if not acks:
            return []
        return await write(
            AckColumns(
                pool=query._pool,
                prefix=query._prefix,
                ids=[ack.id for ack in acks],
                attempted_at=[_naive_utc(ack.attempted_at) for ack in acks],
                states=[ack.state for ack in acks],
                attempt_changes=[ack.attempt_change for ack in acks],
                schedule_in=[ack.schedule_in for ack in acks],
                errors=[ack.error for ack in acks],
                metas=[ack.meta for ack in acks],
            )
        )

    ack_jobs.statifier_ack = write  # type: ignore[attr-defined]
    put_ext(ACK_HOOK, ack_jobs)


def ack_writer() -> AckWriter | None:
    """The ack writer every producer uses (None: oban's own)."""
    current = get_ext(ACK_HOOK, oban_ack_jobs)
    found: AckWriter | None = getattr(current, "statifier_ack", None)
    return found
