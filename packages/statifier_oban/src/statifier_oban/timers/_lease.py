"""One writer per live session: an ownership lease with a fencing epoch (ADR 14).

Two processes resuming the same session id would both run it: their timers merge into one
row, events reach either process, the last position saved wins. A :class:`SessionLease`
is a row of ``statifier_session_leases`` per session id: taking it refuses a second
owner while it is held (:class:`LeaseHeld`), or takes it over (``takeover=True``, or once
it has expired) by raising the epoch. Every write under the lease checks the epoch first,
in its own transaction (:meth:`SessionLease.fence`), so once another owner took over, the
first one's writes are refused (:class:`LeaseLost`): ``DurableTimers(config, lease=...)``
does so for timer jobs, a host does so for its position saves.

Expiry only decides whether a second owner must ask to take over; safety comes from the
epoch, so a lease that lapsed while its owner was busy costs nothing until someone else
takes it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection

from .._config import Config
from .._errors import LeaseHeld, LeaseLost, StoreUnavailable
from ..store import _statements

logger = logging.getLogger("statifier_oban.lease")

DEFAULT_TTL_S = 30.0
"""How long a lease lasts unless renewed (``keep_alive`` renews it three times as often)."""


def default_owner() -> str:
    """A name for this owner, unique per lease taken: ``host.pid.random``."""
    return f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"


class SessionLease:
    """This process's ownership of one session id, at one epoch.

    Take one with :meth:`acquire`. ``scope`` is the session id, ``epoch`` the fencing
    token (it grows with every new owner), ``owner`` a name for logs and errors.
    """

    def __init__(
        self, config: Config, scope: str, owner: str, epoch: int, ttl_s: float, expires_at: Any
    ) -> None:
        self.config = config
        self.scope = scope
        self.owner = owner
        self.epoch = epoch
        self.ttl_s = ttl_s
        self.expires_at: datetime = expires_at

    def __repr__(self) -> str:
        """Scope, owner and epoch."""
        return f"<SessionLease {self.scope!r} epoch={self.epoch} owner={self.owner!r}>"

    @classmethod
    async def acquire(
        cls,
        config: Config,
        scope: str,
        *,
        owner: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        takeover: bool = False,
    ) -> SessionLease:
        """Own ``scope`` from now on, at a new epoch.

        Raises :class:`LeaseHeld` when another owner holds an unexpired lease and
        ``takeover`` is False; with ``takeover`` the other owner's writes are refused from
        the moment this returns. ``StoreUnavailable`` when the database cannot answer.
        """
        if not isinstance(scope, str) or not scope:
            raise ValueError(f"a lease needs a session id, not {scope!r}")
        if not 0 < ttl_s < 1e7:
            raise ValueError(f"ttl_s must be a positive number of seconds, not {ttl_s!r}")
        owner = owner or default_owner()
        params = {"scope": scope, "owner": owner, "ttl_s": ttl_s, "takeover": takeover}
        try:
            async with _statements.connection(config.oban, None) as db:
                cursor = await db.execute(
                    _statements.statement(config.oban, "lease_acquire"), params
                )
                row = await cursor.fetchone()
                if row is None:
                    held = await db.execute(
                        _statements.statement(config.oban, "lease_holder"), params
                    )
                    holder = await held.fetchone()
        except psycopg.Error as exc:
            raise StoreUnavailable(f"taking the lease of {scope!r} failed: {exc}") from exc
        if row is None:
            other, until, epoch = holder if holder is not None else ("?", None, None)
            raise LeaseHeld(
                f"session {scope!r} is owned by {other!r} (epoch {epoch}) until {until}",
                scope=scope,
                owner=other,
            )
        lease = cls(config, scope, owner, int(row[0]), ttl_s, row[1])
        logger.info(
            "lease of %s taken: epoch %d, owner %s",
            scope,
            lease.epoch,
            owner,
            extra={"scope": scope, "epoch": lease.epoch},
        )
        return lease

    async def fence(self, conn: AsyncConnection[Any]) -> None:
        """Check, in ``conn``'s current transaction, that this lease still owns the session.

        Run it first in every transaction that writes for the session (a position save):
        it holds a share lock on the lease row until that transaction ends, so a takeover
        waits for the write. Raises :class:`LeaseLost` (the caller should roll back).
        """
        cursor = await conn.execute(
            _statements.statement(self.config.oban, "lease_fence"), {"scope": self.scope}
        )
        row = await cursor.fetchone()
        if row is None or int(row[0]) != self.epoch:
            now = f"{row[1]!r} at epoch {row[0]}" if row is not None else "nobody"
            raise LeaseLost(
                f"session {self.scope!r} is no longer owned at epoch {self.epoch}: owned by {now}",
                scope=self.scope,
                epoch=self.epoch,
            )

    async def renew(self) -> None:
        """Extend the lease by ``ttl_s``; :class:`LeaseLost` if it was taken over."""
        params = {"scope": self.scope, "epoch": self.epoch, "ttl_s": self.ttl_s}
        try:
            async with _statements.connection(self.config.oban, None) as db:
                cursor = await db.execute(
                    _statements.statement(self.config.oban, "lease_renew"), params
                )
                row = await cursor.fetchone()
        except psycopg.Error as exc:
            raise StoreUnavailable(f"renewing the lease of {self.scope!r} failed: {exc}") from exc
        if row is None:
            raise LeaseLost(
                f"session {self.scope!r} was taken over (this owner had epoch {self.epoch})",
                scope=self.scope,
                epoch=self.epoch,
            )
        self.expires_at = row[0]

    async def release(self) -> bool:
        """Let the lease expire now (a no-op if it was taken over); whether it was ours."""
        params = {"scope": self.scope, "epoch": self.epoch}
        try:
            async with _statements.connection(self.config.oban, None) as db:
                cursor = await db.execute(
                    _statements.statement(self.config.oban, "lease_release"), params
                )
                row = await cursor.fetchone()
        except psycopg.Error as exc:
            raise StoreUnavailable(f"releasing the lease of {self.scope!r} failed: {exc}") from exc
        return row is not None

    def keep_alive(self, on_lost: Callable[[], Awaitable[object] | object]) -> asyncio.Task[None]:
        """Renew the lease every third of ``ttl_s`` until it is lost; then call ``on_lost``.

        A renewal the database cannot answer is logged and tried again (the epoch keeps
        writes safe meanwhile). Cancel the returned task to stop renewing.
        """
        return asyncio.create_task(self._renewing(on_lost), name=f"lease:{self.scope}")

    async def _renewing(self, on_lost: Callable[[], Awaitable[object] | object]) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                await self.renew()
            except LeaseLost as exc:
                logger.error("lease of %s lost: %s", self.scope, exc, extra={"scope": self.scope})
                outcome = on_lost()
                if inspect.isawaitable(outcome):
                    await outcome
                return
            except StoreUnavailable as exc:
                logger.warning(
                    "renewing the lease of %s failed: %s",
                    self.scope,
                    exc,
                    extra={"scope": self.scope},
                )
