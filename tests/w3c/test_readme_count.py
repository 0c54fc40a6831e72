"""The README states the conformance count; it must match the ratchet."""

from __future__ import annotations

import re
from pathlib import Path

from tools.w3c.corpus import require_corpus
from tools.w3c.manifest import cases_by_id
from tools.w3c.passing import PASSING_FILE, read_passing

require_corpus()

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_states_the_ratchet_counts() -> None:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"(\d+) W3C tests pass \((\d+) of (\d+) mandatory automated", text)
    assert match, "README.md must say 'N W3C tests pass (M of T mandatory automated ...'"
    passing = read_passing(PASSING_FILE)
    cases = cases_by_id()
    mandatory = [i for i in passing if cases[i].conformance == "mandatory"]
    total_mandatory = sum(
        1 for c in cases.values() if c.conformance == "mandatory" and not c.manual
    )
    assert int(match.group(1)) == len(passing)
    assert int(match.group(2)) == len(mandatory)
    assert int(match.group(3)) == total_mandatory
