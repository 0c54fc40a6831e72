"""Testing durable executions: real PostgreSQL, real workers, a clock the test moves.

``DurableEnv`` gives a test a real ``statifier_persistence.Executions`` on oban jobs, on
a database of its own, and runs the due jobs itself through the code a worker runs.
``await env.advance("7d")`` lets seven days pass in milliseconds: every timer, retry and
snoozed job due on the way fires, in due order, and whatever it leads to (the steps, the
invocations, a fan-out's children and their settlement) runs before it returns. Charts
are the production charts, unchanged. ``env.invocations("payments:capture")`` answers an
invoke type from the test: at once (``answer(Ok(...))``, ``answer(Error(...))``), or
later (the default: runs are held until ``release``), so a timeout can be tested.

With pytest, statifier_oban's plugin (loaded by itself once statifier-oban is installed,
entry point ``statifier_oban``; install ``statifier-oban[testing]`` for pytest-asyncio and
the embedded server) gives the fixtures ``durable_env``, ``statifier_database_url`` and
``statifier_postgres``: an embedded PostgreSQL started once per run, or the server
``$DATABASE_URL`` names, and a fresh database per test. ``Clock`` moves the due times
alone, for a host whose own ``Oban`` runs the queues (the examples do that). The pure
side, charts on a virtual clock without a database, is ``statifier.testing``. ADR 26 says
how the clock works and why.
"""

from __future__ import annotations

from ._clock import Clock, Move
from ._env import DEFAULT_MAX_JOBS, DUE_TOLERANCE_MS, DurableEnv, RanJob, StepRecord
from ._postgres import PostgresServer, SchemaTemplates, postgres_server
from ._scripts import Answer, InvocationRun, ScriptedHandler, ScriptedInvocations

__all__ = [
    "DEFAULT_MAX_JOBS",
    "DUE_TOLERANCE_MS",
    "Answer",
    "Clock",
    "DurableEnv",
    "InvocationRun",
    "Move",
    "PostgresServer",
    "RanJob",
    "SchemaTemplates",
    "ScriptedHandler",
    "ScriptedInvocations",
    "StepRecord",
    "postgres_server",
]
