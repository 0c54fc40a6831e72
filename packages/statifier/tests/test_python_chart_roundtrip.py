"""Every chart survives SCXML -> Python builder code -> SCXML with its identity.

``engine_support.builder_code`` writes the builder calls of a parsed chart as a Python
module; the module is imported from a file (so its elements have real origins) and its
chart exported again. The identity must not move: for every W3C corpus chart rendered for
the Python datamodel and for the ECMAScript datamodel, and for random charts. A chart that
compiles compiles from its built form to the same identity; one that does not fails with
the same diagnostics, located in the generated module.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import statifier
from hypothesis import given, settings
from statifier import build as sc
from statifier.errors import ChartError

from engine_support.builder_code import builder_code
from engine_support.chartgen import charts
from tools.w3c.corpus import require_corpus
from tools.w3c.transform import transform

CORPUS = require_corpus()
PINNED: dict[str, dict[str, str]] = json.loads(
    (Path(__file__).resolve().parents[3] / "tests" / "w3c" / "identities.json").read_text("utf-8")
)
RENDERINGS = sorted(
    (profile, name)
    for name, found in PINNED.items()
    for profile in ("python", "ecmascript")
    if not found[profile].startswith("error:")
)


def built(source: str, directory: Path, name: str) -> sc.Chart:
    """The chart of ``source`` built by its generated builder code, imported from a file."""
    path = directory / f"{name}.py"
    path.write_text(builder_code(source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"built_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    chart = module.CHART
    assert isinstance(chart, sc.Chart)
    return chart


def test_every_chart_but_the_xpath_ones_is_rendered_in_both_profiles() -> None:
    assert sum(profile == "python" for profile, _ in RENDERINGS) == 207
    assert sum(profile == "ecmascript" for profile, _ in RENDERINGS) == 207


@pytest.mark.parametrize(("profile", "template"), RENDERINGS)
def test_a_w3c_chart_round_trips_through_builder_code(
    profile: str, template: str, tmp_path: Path
) -> None:
    rendered = transform((CORPUS / template).read_text(encoding="utf-8"), profile)
    chart = built(rendered, tmp_path, template.removesuffix(".txml"))
    exported = statifier.export(chart)
    assert statifier.chart_identity(exported) == PINNED[template][profile]
    try:
        parsed = statifier.compile(rendered)
    except ChartError as exc:
        expected = [d.code for d in exc.diagnostics]
    else:
        assert chart.compile().identity == parsed.identity
        return
    with pytest.raises(ChartError) as info:
        chart.compile()
    assert [d.code for d in info.value.diagnostics] == expected
    assert {d.file for d in info.value.diagnostics} == {str(tmp_path / f"{template[:-5]}.py")}


@settings(max_examples=60, deadline=None)
@given(source=charts())
def test_a_random_chart_round_trips_through_builder_code(
    source: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    chart = built(source, tmp_path_factory.mktemp("random"), "random_chart")
    assert chart.compile().identity == statifier.compile(source).identity
