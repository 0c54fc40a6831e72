"""The identities of the W3C corpus charts never change (they are persisted).

``identities.json`` records, for every ``.txml`` template, the identity of the template
itself (its canonical form read with the Python datamodel: templates carry foreign
``conf:`` markup) and of its rendering in each datamodel profile, as the ``scxml-c1``
rule computed them when they were recorded (``error:<code>`` where the rendering names a
datamodel that is not supported). An identity that differs is a bug, not a file to
regenerate; only a deliberate change to ``tools/w3c/transform.py``'s rendering moves the
rendered entries, and those are then re-recorded with the engine before the change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import statifier
from statifier import datamodel as dm
from statifier.chart.identity import canonical_form, chart_identity, identity_of
from statifier.chart.xmltree import parse
from statifier.errors import ChartError

from tools.w3c.corpus import require_corpus
from tools.w3c.transform import PROFILES, TransformError, transform

CORPUS = require_corpus()
PINNED: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).resolve().parent / "identities.json").read_text("utf-8")
)


def test_the_record_covers_the_whole_corpus() -> None:
    assert sorted(PINNED) == sorted(p.name for p in CORPUS.glob("*.txml"))


@pytest.mark.parametrize("template", sorted(PINNED))
def test_the_identities_are_the_recorded_ones(template: str) -> None:
    txml = (CORPUS / template).read_text(encoding="utf-8")
    expected = PINNED[template]
    found = {"template": identity_of(canonical_form(parse(txml.encode()), dm.PYTHON), None, None)}
    for profile in sorted(PROFILES):
        try:
            rendered = transform(txml, profile)
        except TransformError:
            continue
        try:
            found[profile] = chart_identity(rendered)
        except ChartError as exc:
            found[profile] = "error:" + exc.diagnostics[0].code
            continue
        try:
            compiled = statifier.compile(rendered).identity
        except ChartError:
            continue
        assert compiled == found[profile], f"{template} ({profile}): compile disagrees"
    assert found == expected
