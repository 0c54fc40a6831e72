"""The workspace is released as one: every package carries the same version, each requires
its siblings at that release line, and the changelog's newest release is that version.

A package bumped alone, a sibling requirement left open (which lets pip pair a new
``statifier-oban`` with an old ``statifier``), or a release without its changelog entry
fails here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted((ROOT / "packages").glob("*/pyproject.toml"))


def _project(path: Path) -> dict[str, Any]:
    with path.open("rb") as file:
        project: dict[str, Any] = tomllib.load(file)["project"]
    return project


def _release() -> Version:
    return Version(_project(ROOT / "pyproject.toml")["version"])


def test_every_package_carries_the_workspace_version() -> None:
    assert len(PACKAGES) == 5
    versions = {_project(path)["name"]: _project(path)["version"] for path in PACKAGES}
    assert set(versions.values()) == {str(_release())}, versions


def test_siblings_are_required_at_the_same_release_line() -> None:
    release = _release()
    siblings = {_project(path)["name"] for path in PACKAGES}
    next_minor = Version(f"{release.major}.{release.minor + 1}.0")
    seen = 0
    for path in PACKAGES:
        project = _project(path)
        optional = project.get("optional-dependencies", {}).values()
        for line in [*project.get("dependencies", []), *(d for group in optional for d in group)]:
            requirement = Requirement(line)
            if requirement.name not in siblings:
                continue
            seen += 1
            where = f"{project['name']}: {line}"
            assert requirement.specifier.contains(release), where
            assert not requirement.specifier.contains(Version("0.1.0")), where
            assert not requirement.specifier.contains(next_minor), where
    assert seen >= 10


def test_the_changelog_opens_with_this_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.MULTILINE)
    assert releases, "no release heading in CHANGELOG.md"
    assert releases[0][0] == str(_release())
    assert [version for version, _ in releases] == sorted(
        (version for version, _ in releases), key=Version, reverse=True
    )
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.MULTILINE)
    assert headings[0] == "Unreleased"
    for heading in headings:
        assert re.search(rf"^\[{re.escape(heading)}\]: https://", text, re.MULTILINE), heading
