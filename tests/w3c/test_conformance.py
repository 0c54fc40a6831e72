"""The W3C SCXML conformance ratchet: every id in ``passing.txt`` must pass on the engine.

``statifier`` is imported lazily (inside :func:`tools.w3c.harness.run_start`), so these
tests collect, and the list checks run, while the engine is still incomplete.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tools.w3c.corpus import require_corpus
from tools.w3c.harness import DEFAULT_TIMEOUT, run_case_guarded
from tools.w3c.manifest import cases_by_id
from tools.w3c.passing import PASSING_FILE, read_passing

require_corpus()

PASSING = read_passing(PASSING_FILE)


@pytest.mark.parametrize("case_id", PASSING)
def test_listed_case_passes(case_id: str) -> None:
    """A listed case passes: every start document ends done with ``pass`` active."""
    case = cases_by_id().get(case_id)
    if case is None:
        pytest.fail(f"{case_id} in passing.txt is not a test id of the manifest")
    result = run_case_guarded(case, timeout=DEFAULT_TIMEOUT)
    assert result.passed, result.describe()


def test_passing_list_has_no_duplicates() -> None:
    """No id is listed twice."""
    duplicates = sorted(i for i, n in Counter(PASSING).items() if n > 1)
    assert not duplicates, f"duplicate ids in passing.txt: {duplicates}"


def test_passing_list_names_automated_cases() -> None:
    """Every listed id is a real automated (mandatory or optional, not manual) case."""
    cases = cases_by_id()
    unknown = [i for i in PASSING if i not in cases]
    manual = [i for i in PASSING if i in cases and cases[i].manual]
    assert not unknown, f"ids in passing.txt that are not in the manifest: {unknown}"
    assert not manual, f"manual cases cannot be in passing.txt: {manual}"
