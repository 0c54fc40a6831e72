"""Chart identities are persisted (registry rows, positions), so they never change.

``golden/identities.json`` holds the identity of every example chart, the demo's chart,
the legacy golden chart and the edge-case charts in ``golden/identity/`` (foreign
markup, other encodings, CRLF, inline values, scripts, mixed text, astral characters,
the ECMAScript datamodel, a root that is not ``<scxml>``), as the ``scxml-c1`` rule
computed them when they were recorded. Any change to how the canonical form is built
(parsing, quoting, sorting, dedenting, value reading) must keep every one of them. The
file is a record, not a golden file to regenerate: an identity that differs is a bug.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import statifier
from statifier.chart.identity import canonical_text, chart_identity, identity_of
from statifier.errors import ChartError

REPO = Path(__file__).resolve().parents[3]
PINNED: dict[str, str] = json.loads(
    (Path(__file__).resolve().parent / "golden" / "identities.json").read_text("utf-8")
)


def test_the_record_covers_every_example_and_edge_case_chart() -> None:
    here = Path(__file__).resolve().parent
    charts = [
        *REPO.glob("examples/*.scxml"),
        *(here / "golden" / "identity").iterdir(),
    ]
    missing = sorted(
        str(p.relative_to(REPO)) for p in charts if str(p.relative_to(REPO)) not in PINNED
    )
    assert not missing, f"charts without a recorded identity: {missing}"


@pytest.mark.parametrize("chart", sorted(PINNED))
def test_the_identity_is_the_recorded_one(chart: str) -> None:
    raw = (REPO / chart).read_bytes()
    expected = PINNED[chart]
    assert chart_identity(raw) == expected
    assert identity_of(canonical_text(raw), None, None) == expected
    assert chart_identity(raw, "n", "7") == f"{expected};name=n;version=7"
    try:
        machine = statifier.compile(raw)
    except ChartError:
        return  # the identity of a chart that does not compile is still pinned above
    assert machine.identity == expected
