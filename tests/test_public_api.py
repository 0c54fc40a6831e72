"""Nothing public of a release disappears: a renamed name keeps a deprecation alias.

``tests/public_api/<version>.json`` records a release's public API (each package's root
``__all__`` and the modules its API reference rendered, with their classes' public
attributes), written by ``uv run python -m tools.public_api --write VERSION COMMIT``.
"""

from __future__ import annotations

import sys
import types
import warnings
from dataclasses import dataclass

import pytest

from tools import public_api

RELEASES = sorted(path.stem for path in public_api.SNAPSHOTS.glob("*.json"))


def test_the_first_release_is_recorded() -> None:
    assert "0.1.0" in RELEASES
    recorded = public_api.load("0.1.0")
    assert {"statifier", "statifier_oban", "statifier_persistence"} <= set(recorded)
    assert "step" in recorded["statifier_persistence"]["Executions"]


@pytest.mark.parametrize("version", RELEASES)
def test_nothing_public_of_a_release_is_gone(version: str) -> None:
    gone = public_api.missing(public_api.load(version))
    assert not gone, f"public in {version}, gone now (add a deprecation alias): {gone}"


@dataclass(frozen=True)
class Kept:
    """A class of the made-up module below."""

    field: int
    other: str = ""


def _module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A module with a class, a function and a deprecation alias, imported as ``fake_api``."""
    module = types.ModuleType("fake_api")
    module.Kept = Kept  # type: ignore[attr-defined]
    module.run = lambda: None  # type: ignore[attr-defined]

    def __getattr__(name: str) -> object:
        if name == "OldKept":
            warnings.warn("OldKept is Kept", DeprecationWarning, stacklevel=2)
            return Kept
        raise AttributeError(name)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "fake_api", module)
    return module


def test_a_removed_name_a_removed_attribute_and_a_removed_module_are_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _module(monkeypatch)
    recorded: public_api.Snapshot = {
        "fake_api": {"Kept": ["field", "other", "gone_field"], "run": [], "walk": []},
        "fake_api_gone": {"x": []},
    }
    assert public_api.missing(recorded) == [
        "fake_api.Kept.gone_field",
        "fake_api.walk",
        "fake_api_gone",
    ]


def test_a_name_kept_as_a_deprecation_alias_is_not_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _module(monkeypatch)
    assert public_api.missing({"fake_api": {"OldKept": ["field", "other"]}}) == []


def test_a_dataclass_field_without_a_default_counts_as_an_attribute() -> None:
    assert public_api.attributes(Kept) == ["field", "other"]


def test_the_reference_directives_are_read_with_their_member_lists() -> None:
    pages = [
        "# A\n\n::: pkg.mod\n    options:\n      members: [a, b]\n\n::: pkg.whole\n",
        "::: pkg.mod\n    options:\n      members: [c]\n\n::: pkg.whole\n"
        "    options:\n      members: [d]\n",
    ]
    assert public_api.documented_modules(pages) == {
        "pkg.mod": ["a", "b", "c"],
        "pkg.whole": None,
    }
