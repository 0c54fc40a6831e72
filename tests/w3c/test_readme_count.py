"""The README states the conformance counts of both profiles; they must match the ratchets."""

from __future__ import annotations

import re
from pathlib import Path

from tools.w3c.corpus import require_corpus
from tools.w3c.manifest import SKIP_HTTP, cases_by_id, skip_reason
from tools.w3c.passing import BASICHTTP_FILES, PASSING_FILES, read_passing

require_corpus()

README = Path(__file__).resolve().parents[2] / "README.md"

_PYTHON = re.compile(
    r"(\d+) W3C tests pass in the Python profile \((\d+) of (\d+) mandatory automated"
)
_ECMASCRIPT = re.compile(
    r"(\d+) W3C tests pass in the ECMAScript profile \((\d+) of (\d+) mandatory automated"
    r"[^)]*?plus (\d+) of the (\d+) ECMAScript-profile tests"
)

_BASICHTTP = re.compile(
    r"Of the (\d+) tests of the BasicHTTP I/O processor, (\d+) pass in the Python profile"
    r" and (\d+) in the ECMAScript profile"
)


def _counts(profile: str) -> tuple[int, int, int, int, int]:
    passing = read_passing(PASSING_FILES[profile])
    cases = cases_by_id()
    mandatory = sum(1 for i in passing if cases[i].mandatory)
    total_mandatory = sum(1 for c in cases.values() if c.mandatory and not c.manual)
    ecma = sum(1 for i in passing if cases[i].specnum == "C.2")
    total_ecma = sum(1 for c in cases.values() if c.specnum == "C.2" and not c.manual)
    return len(passing), mandatory, total_mandatory, ecma, total_ecma


def test_readme_states_the_python_counts() -> None:
    match = _PYTHON.search(" ".join(README.read_text(encoding="utf-8").split()))
    assert match, "README.md must say 'N W3C tests pass in the Python profile (M of T ...'"
    total, mandatory, total_mandatory, _, _ = _counts("python")
    assert tuple(int(g) for g in match.groups()) == (total, mandatory, total_mandatory)


def test_readme_states_the_ecmascript_counts() -> None:
    match = _ECMASCRIPT.search(" ".join(README.read_text(encoding="utf-8").split()))
    assert match, (
        "README.md must say 'N W3C tests pass in the ECMAScript profile (M of T mandatory"
        " automated ... plus E of the C ECMAScript-profile tests'"
    )
    assert tuple(int(g) for g in match.groups()) == _counts("ecmascript")


def test_readme_states_the_basichttp_counts() -> None:
    match = _BASICHTTP.search(" ".join(README.read_text(encoding="utf-8").split()))
    assert match, (
        "README.md must say 'Of the T tests of the BasicHTTP I/O processor, P pass in the"
        " Python profile and E in the ECMAScript profile'"
    )
    suite = sum(1 for c in cases_by_id().values() if skip_reason(c) == SKIP_HTTP)
    passing = (len(read_passing(BASICHTTP_FILES[p])) for p in ("python", "ecmascript"))
    assert tuple(int(g) for g in match.groups()) == (suite, *passing)
