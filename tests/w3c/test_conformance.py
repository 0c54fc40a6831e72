"""The W3C SCXML conformance ratchets: every id listed must pass in its profile.

``passing.txt`` lists the cases that pass rendered for the Python datamodel,
``passing_ecmascript.txt`` those that pass rendered for the ECMAScript datamodel (the suite's
own rendering). ``statifier`` is imported lazily (inside :func:`tools.w3c.harness.run_start`),
so these tests collect, and the list checks run, while the engine is still incomplete.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tools.w3c.corpus import require_corpus
from tools.w3c.harness import DEFAULT_TIMEOUT, run_case_guarded
from tools.w3c.manifest import cases_by_id, skip_reason
from tools.w3c.passing import PASSING_FILES, read_passing

require_corpus()

LISTED = {profile: read_passing(path) for profile, path in PASSING_FILES.items()}


@pytest.mark.parametrize(
    ("profile", "case_id"),
    [(profile, case_id) for profile, ids in LISTED.items() for case_id in ids],
)
def test_listed_case_passes(profile: str, case_id: str) -> None:
    """A listed case passes: every start document ends done with ``pass`` active."""
    case = cases_by_id().get(case_id)
    if case is None:
        pytest.fail(f"{case_id} in the {profile} ratchet is not a test id of the manifest")
    result = run_case_guarded(case, timeout=DEFAULT_TIMEOUT, profile=profile, warm=True)
    assert result.passed, result.describe()


@pytest.mark.parametrize("profile", sorted(LISTED))
def test_passing_list_has_no_duplicates(profile: str) -> None:
    """No id is listed twice."""
    duplicates = sorted(i for i, n in Counter(LISTED[profile]).items() if n > 1)
    assert not duplicates, f"duplicate ids in the {profile} ratchet: {duplicates}"


@pytest.mark.parametrize("profile", sorted(LISTED))
def test_passing_list_names_runnable_cases(profile: str) -> None:
    """Every listed id is a real automated case that the profile runs."""
    cases = cases_by_id()
    listed = LISTED[profile]
    unknown = [i for i in listed if i not in cases]
    manual = [i for i in listed if i in cases and cases[i].manual]
    skipped = [
        i
        for i in listed
        if i in cases and not cases[i].manual and skip_reason(cases[i], profile=profile)
    ]
    assert not unknown, f"ids in the {profile} ratchet that are not in the manifest: {unknown}"
    assert not manual, f"manual cases cannot be in the {profile} ratchet: {manual}"
    assert not skipped, f"cases the {profile} profile does not run: {skipped}"


def test_ecmascript_ratchet_covers_the_python_one() -> None:
    """Every case that passes in the Python profile passes in the ECMAScript one too."""
    missing = sorted(set(LISTED["python"]) - set(LISTED["ecmascript"]), key=int)
    assert not missing, f"pass in the Python profile only: {missing}"
