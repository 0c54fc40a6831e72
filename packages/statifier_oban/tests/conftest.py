"""Fixtures of the statifier_oban tests: the schema template, and Oban instances.

The shared database fixtures (``pg_server``, ``schema_templates``, ``make_database``,
``database_url``, ``pool``) are in ``packages/conftest.py``. Here:

* ``template_database`` (session): a database with the full schema
  (``statifier_oban.schema.install``), from which every test database is copied.
* ``oban_client`` (function, async): a client-mode ``Oban`` on ``pool`` (not started).
* ``start_oban`` (function, async): factory ``await start_oban(queues, **options) -> Oban``
  starting server-mode instances that are all stopped at teardown.
* ``statifier_schema_template``: the pytest plugin's (``statifier_oban.testing``)
  template is ``template_database``, so ``durable_env`` and ``statifier_database_url``
  install the schema no second time (the server is the plugin's already: ``pg_server``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.schema import install

from oban_support.common import StartOban, forget_instance, unique

STAGER_INTERVAL_S = 0.1
"""Stager poll interval of instances from ``start_oban`` (oban's default is 1 s)."""


@pytest.fixture(scope="session")
def template_database(schema_templates: Any) -> str:
    """Name of a database holding the full schema, copied for every test's database."""
    return str(schema_templates.get("statifier_oban", install))


@pytest.fixture(scope="session")
def statifier_schema_template(template_database: str) -> str:
    """The plugin's template is this run's full-schema template."""
    return template_database


@pytest_asyncio.fixture
async def oban_client(pool: AsyncConnectionPool) -> AsyncIterator[Oban]:
    """A client-mode ``Oban`` (no queues, never started) on ``pool``, uniquely named."""
    client = Oban(pool=pool, name=unique("client"))
    try:
        yield client
    finally:
        forget_instance(client)


@pytest_asyncio.fixture
async def start_oban(pool: AsyncConnectionPool) -> AsyncIterator[StartOban]:
    """Factory starting server-mode ``Oban`` instances; all are stopped at teardown.

    ``await start_oban({"timers": 5}, **options)`` starts an instance on the test's
    ``pool`` (or ``pool=``) with a unique ``name`` and ``node``, ``stager`` polling every
    0.1 s, ``lifeline`` checking every 0.5 s (rescuing after oban's default 300 s) and a
    1 s ``shutdown_grace_period``; any ``Oban(...)`` keyword in ``options`` overrides these.
    """
    started: list[Oban] = []

    async def start(
        queues: dict[str, Any], *, pool: AsyncConnectionPool | None = None, **options: Any
    ) -> Oban:
        name = unique("server")
        config: dict[str, Any] = {
            "name": name,
            "node": f"{name}.node",
            "stager": {"interval": STAGER_INTERVAL_S},
            "lifeline": {"interval": 0.5},
            "shutdown_grace_period": 1.0,
        }
        config.update(options)
        instance = Oban(pool=pool or default_pool, queues=queues, **config)
        try:
            await instance.start()
        except BaseException:
            await instance.stop()
            forget_instance(instance)
            raise
        started.append(instance)
        return instance

    default_pool = pool
    yield start
    errors: list[BaseException] = []
    for instance in reversed(started):
        try:
            await instance.stop()
        except Exception as exc:  # stop the others anyway
            errors.append(exc)
        finally:
            forget_instance(instance)
    if errors:
        raise errors[0]
