"""The pytest plugin of ``statifier_oban.testing`` (entry point ``pytest11``: loaded by
itself; ``-p no:statifier_oban`` turns it off).

Fixtures:

``statifier_postgres`` (session)
    The server: the one ``$DATABASE_URL`` names (its database is only used to create and
    drop others), else an embedded one (``statifier-oban[embedded]``) started once per run.
``statifier_schema_template`` (session)
    A template database with the full schema (``statifier_oban.schema.install``),
    installed once per run.
``statifier_database_url``
    A fresh copy of the template for the test, dropped after it.
``durable_env`` (async, pytest-asyncio)
    A ``DurableEnv`` on that database. When the test passed, errors its charts raised
    that it neither allowed nor expected fail it at teardown.

Override ``statifier_postgres`` or ``statifier_database_url`` in a ``conftest.py`` to use
databases of your own. Nothing of statifier_oban is imported until a fixture runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from statifier_oban.testing import DurableEnv, PostgresServer

_CALL = pytest.StashKey[pytest.TestReport]()
_ENVS = pytest.StashKey[list["DurableEnv"]]()


@pytest.fixture(scope="session")
def statifier_postgres() -> Iterator[PostgresServer]:
    """The PostgreSQL server of the run (``$DATABASE_URL``'s, or an embedded one)."""
    from statifier_oban.testing import postgres_server

    with postgres_server() as server:
        yield server


@pytest.fixture(scope="session")
def statifier_schema_template(statifier_postgres: PostgresServer) -> Iterator[str]:
    """A template database holding the full schema, dropped at the end of the run."""
    from statifier_oban.schema import install
    from statifier_oban.testing import SchemaTemplates

    templates = SchemaTemplates(statifier_postgres)
    try:
        yield templates.get("statifier_oban_testing", install)
    finally:
        templates.drop_all()


@pytest.fixture
def statifier_database_url(
    statifier_postgres: PostgresServer, statifier_schema_template: str
) -> Iterator[str]:
    """Conninfo of a fresh database with the schema installed, dropped after the test."""
    name = statifier_postgres.copy_database(statifier_schema_template, "statifier_test")
    try:
        yield statifier_postgres.url_for(name)
    finally:
        statifier_postgres.drop_database(name)


if find_spec("pytest_asyncio") is None:  # pragma: no cover - only without pytest-asyncio

    @pytest.fixture
    def durable_env(statifier_database_url: str) -> Any:
        """Needs pytest-asyncio (``pip install statifier-oban[testing]``)."""
        pytest.fail("the durable_env fixture needs pytest-asyncio (statifier-oban[testing])")

else:
    import pytest_asyncio

    @pytest_asyncio.fixture(name="durable_env")
    async def _durable_env(
        request: pytest.FixtureRequest, statifier_database_url: str
    ) -> AsyncIterator[DurableEnv]:
        """A ``DurableEnv`` on a fresh database; see the module docstring."""
        from statifier_oban.testing import DurableEnv

        async with DurableEnv.open(statifier_database_url) as env:
            request.node.stash.setdefault(_ENVS, []).append(env)
            yield env
            call = request.node.stash.get(_CALL, None)
            if call is not None and call.passed:
                env.check_errors("the test")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember how the test's call went (for ``durable_env``'s teardown), and add the
    environment's summary to a failed test's report."""
    report = yield
    if report.when == "call":
        item.stash[_CALL] = report
        if report.failed:
            for env in item.stash.get(_ENVS, []):
                report.sections.append(("statifier durable env", env.summary()))
    return report
