"""The W3C tests of the BasicHTTP Event I/O processor (SCXML D.2, and test 201) against the
real app on loopback, as durable executions and as live sessions.

Every case listed in ``tests/w3c/passing_basichttp.txt`` (Python profile) and
``tests/w3c/passing_basichttp_ecmascript.txt`` (ECMAScript profile) runs twice, against
the app served by uvicorn on loopback, whose address is the base of every location:

* as an execution of an ``Executions`` while a server-mode Oban in this process runs the
  jobs: its POSTs are ``PostWorker`` jobs that reach the app, whose route steps them back
  in; its timers are timer jobs;
* as a live session of this process, which POSTs with a ``BasicHTTPClient`` and is
  reached by the app's route through the process registry (a session's capability).

The allow-list lets these charts reach loopback, and only here. The cases run at once,
durable then live; each must end ``completed`` (``done`` for a session) in ``pass``. The
lists only grow.

The suite's other BasicHTTP tests (``NOT_PASSING``) run too, through the same judge, and
must end in ``fail``: what they test is known not to hold (ADR 33 says why), and the
judge that keeps the ratchets is seen to catch a test that does not pass. One of them
starting to pass fails here as well, so it moves into its ratchet.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier.basichttp import BasicHTTP
from statifier.basichttp.client import BasicHTTPClient
from statifier.runtime.session import Session

from tools.w3c.corpus import corpus_dir, require_corpus
from tools.w3c.manifest import SKIP_HTTP, cases_by_id, skip_reason
from tools.w3c.passing import BASICHTTP_FILES, read_passing
from tools.w3c.transform import transform_file
from web_support.basichttp import LOOPBACK, BasicHTTPRig, basichttp_rig

require_corpus()

DEADLINE_S = 20.0
"""How long a case may take (the tests' own timeouts are 3 s and 30 s: a listed case that
does not pass fails here first)."""

NOT_PASSING = {
    "python": {
        "201": "sends itself `timeout` with no delay right after its POST",
        "520": "expects <content> text percent-encoded in the body",
        "567": 'expects the form value "2" to equal the number 2',
    },
    "ecmascript": {
        "201": "sends itself `timeout` with no delay right after its POST",
        "520": "expects <content> text percent-encoded in the body",
    },
}
"""The suite's BasicHTTP tests that do not pass, per profile, and why (ADR 33)."""

RATE = 1000.0
"""The app's bound on POSTs a second per location (and its burst), wide enough for every
case at once."""


@dataclasses.dataclass(frozen=True)
class Run:
    """How one start document of a case ended: ``passed`` when it stopped in ``pass``."""

    label: str
    status: str
    configuration: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return self.status in ("completed", "done") and "pass" in self.configuration

    @property
    def failed_as_written(self) -> bool:
        """Ended in the chart's own ``fail`` state (not stuck, not broken)."""
        return self.status in ("completed", "done") and "fail" in self.configuration


Runner = Callable[[BasicHTTPRig, str, str], Awaitable[Run]]


def listed(profile: str) -> list[str]:
    """The ids in the profile's BasicHTTP ratchet."""
    return read_passing(BASICHTTP_FILES[profile])


def starts(profile: str, ids: list[str]) -> list[tuple[str, str]]:
    """``(profile, start document)`` of every start of the cases ``ids``."""
    cases = cases_by_id()
    return [(profile, start) for case_id in ids for start in cases[case_id].starts]


def _chart(profile: str, start: str) -> statifier.Machine:
    return statifier.compile(transform_file(corpus_dir() / start, profile))


def _name(kind: str, profile: str, start: str) -> str:
    return f"w3c_{kind}_{profile}_{start.removesuffix('.txml')}"


async def durable_run(rig: BasicHTTPRig, profile: str, start: str) -> Run:
    """``start`` as an execution, until it ends or the deadline passes."""
    execution_id = _name("durable", profile, start)
    await rig.executions.create(_chart(profile, start), execution_id=execution_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while True:
        execution = await rig.executions.get(execution_id)
        if execution.status != "active" or loop.time() > deadline:
            break
        await asyncio.sleep(0.05)
    ended = tuple((execution.outcome or {}).get("configuration", ()))
    return Run(f"durable {profile} {start}", execution.status, ended)


async def live_run(rig: BasicHTTPRig, profile: str, start: str) -> Run:
    """``start`` as a live session of this process, until it halts or the deadline."""
    async with BasicHTTPClient(LOOPBACK) as client:
        session = await Session.start(
            _chart(profile, start),
            session_id=_name("live", profile, start),
            basichttp=BasicHTTP(client=client, locations=rig.locations),
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(session.wait_halted(), DEADLINE_S)
        status = session.status()
        await session.stop()
    return Run(f"live {profile} {start}", status.status, tuple(status.configuration))


async def run_all(pool: AsyncConnectionPool, runs: list[tuple[str, str]]) -> list[Run]:
    """Every ``(profile, start)`` of ``runs`` on one app: all as durable executions at
    once, then all as live sessions at once (the cases' own 3 s timeouts leave no room
    to run both sets together on a loaded machine)."""
    runners: tuple[Runner, ...] = (durable_run, live_run)
    results: list[Run] = []
    async with basichttp_rig(pool, basichttp_rate=RATE, basichttp_burst=int(RATE)) as rig:
        for run in runners:
            results += await asyncio.gather(*(run(rig, *each) for each in runs))
    return results


@pytest.mark.parametrize("profile", sorted(BASICHTTP_FILES))
def test_a_ratchet_lists_basichttp_tests_once(profile: str) -> None:
    ids = listed(profile)
    assert len(ids) == len(set(ids)), "an id is listed twice"
    cases = cases_by_id()
    for case_id in ids:
        assert skip_reason(cases[case_id], profile=profile) == SKIP_HTTP, case_id


@pytest.mark.parametrize("profile", sorted(BASICHTTP_FILES))
def test_every_basichttp_test_is_listed_or_known_not_to_pass(profile: str) -> None:
    cases = cases_by_id()
    suite = {i for i, case in cases.items() if skip_reason(case, profile=profile) == SKIP_HTTP}
    ratchet, known = set(listed(profile)), set(NOT_PASSING[profile])
    assert not ratchet & known, "a test is both listed and known not to pass"
    assert ratchet | known == suite


def test_the_ecmascript_ratchet_covers_the_python_one() -> None:
    missing = sorted(set(listed("python")) - set(listed("ecmascript")), key=int)
    assert not missing, f"pass in the Python profile only: {missing}"


@pytest.mark.timeout(90)
async def test_the_basichttp_tests_pass_against_the_app(pool: AsyncConnectionPool) -> None:
    runs = [run for profile in sorted(BASICHTTP_FILES) for run in starts(profile, listed(profile))]
    assert len(runs) >= 19, "the BasicHTTP ratchets are unexpectedly small"
    results = await run_all(pool, runs)
    assert len(results) == 2 * len(runs)
    failed = [result for result in results if not result.passed]
    assert not failed, f"BasicHTTP tests failed: {failed}"


@pytest.mark.timeout(90)
async def test_the_tests_known_not_to_pass_fail_as_written(pool: AsyncConnectionPool) -> None:
    runs = [
        run
        for profile in sorted(NOT_PASSING)
        for run in starts(profile, sorted(NOT_PASSING[profile]))
    ]
    results = await run_all(pool, runs)
    assert len(results) == 2 * len(runs) == 10
    # The judge the ratchet uses catches each; each ran to its own verdict.
    assert not [result for result in results if result.passed]
    unexpected = [result for result in results if not result.failed_as_written]
    assert not unexpected, f"ended other than in fail: {unexpected}"
