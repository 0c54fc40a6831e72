"""statifier_demo: the card-authorization demo of durable executions (``statifier-oban demo``).

Not part of the library: a program that shows ``statifier``, ``statifier_persistence``
and ``statifier_oban`` at work. Card authorizations run as durable executions in
PostgreSQL; their hold timers are oban jobs served by plain ``statifier-oban worker``
processes, one of which is killed mid-flight and all of which are deployed while holds
are pending; every hold is applied exactly once. ``statifier-oban demo`` (or
``python -m statifier_demo``) runs it; :func:`main` is the entry point both use. The
chart ships in this package (``card_authorization.scxml``).
"""

from __future__ import annotations

from ._run import main

__all__ = ["main"]
