"""The W3C invoke tests (spec 6.4) on live asyncio sessions, with real delays.

The ratchet runs every case on the virtual clock; invocation is also exercised here
through ``statifier.runtime.session.Session``, child sessions and the process registry, so the
live driver cannot drift from the virtual one. The cases run concurrently in one event
loop, so the whole set takes about as long as its slowest case.
"""

from __future__ import annotations

import asyncio
import contextlib

import statifier
from statifier.runtime.session import Session

from tools.w3c.corpus import corpus_dir, require_corpus
from tools.w3c.manifest import cases_by_id
from tools.w3c.passing import PASSING_FILE, read_passing
from tools.w3c.resolver import make_resolver
from tools.w3c.transform import transform_file

require_corpus()

INVOKE_SECTION = "6.4"
DEADLINE_S = 20.0


def _invoke_starts() -> list[str]:
    cases = cases_by_id()
    starts: list[str] = []
    for case_id in read_passing(PASSING_FILE):
        case = cases[case_id]
        if case.specnum == INVOKE_SECTION:
            starts.extend(case.starts)
    return starts


async def _run_live(start: str) -> tuple[str, str, tuple[str, ...]]:
    directory = corpus_dir()
    resolver = make_resolver(directory)
    machine = statifier.compile(transform_file(directory / start), resolver=resolver)
    session = await Session.start(machine, resolver=resolver)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(session.wait_halted(), DEADLINE_S)
    status = session.status()
    await session.stop()
    return start, status.status, status.configuration


async def test_invoke_section_passes_on_live_sessions() -> None:
    starts = _invoke_starts()
    assert len(starts) >= 25, "the invoke section of the ratchet is unexpectedly small"
    results = await asyncio.gather(*(_run_live(start) for start in starts))
    failed = [
        (s, status, conf) for s, status, conf in results if "pass" not in conf or status != "done"
    ]
    assert not failed, f"live sessions failed: {failed}"
