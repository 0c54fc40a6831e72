"""The public API of a release, written down so that a later one can be held to it.

A release's public API is the root ``__all__`` of each package and the names of every
module its API reference rendered (``docs/reference/*.md``, the ``::: module`` lines):
for each module, its public names, and for each public class, its public attributes.
``tests/public_api/<version>.json`` keeps that of each release, and
``tests/test_public_api.py`` fails when a name it lists is gone from the current code
(a name renamed since keeps a deprecation alias).

Write a release's file from its commit (the code is read from a copy of that commit,
imported in a fresh interpreter, never from the working tree)::

    uv run python -m tools.public_api --write 0.1.0 1d344b6
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "tests" / "public_api"
PACKAGES = ("statifier", "statifier_oban", "statifier_persistence", "statifier_web")
"""The library's packages (the demo is not a library)."""

_DIRECTIVE = re.compile(r"^:::\s+([\w.]+)\s*$")
_OPTION = re.compile(r"^(\s+)(\w+):\s*(.*)$")

Snapshot = dict[str, dict[str, list[str]]]
"""module -> public name -> its public attributes (empty for anything but a class)."""


@dataclass(frozen=True)
class Directive:
    """A ``::: target`` line of a reference page, with the options that choose members."""

    target: str
    line: int
    members: list[str] | bool | None = None
    """The ``members`` option: the names rendered, in order; False for none; None: all."""
    filters: tuple[str, ...] = ()
    """The ``filters`` option: ``!regex`` leaves out the names it matches."""


def directives(text: str) -> list[Directive]:
    """The mkdocstrings directives of a page, with their ``members`` and ``filters``."""
    lines = text.splitlines()
    found: list[Directive] = []
    for number, line in enumerate(lines):
        if match := _DIRECTIVE.match(line):
            block = []
            for option in lines[number + 1 :]:
                if not option.startswith("    "):
                    break
                block.append(option)
            found.append(Directive(match.group(1), number + 1, *_options(block)))
    return found


def _options(block: list[str]) -> tuple[list[str] | bool | None, tuple[str, ...]]:
    """The ``members`` and ``filters`` of a directive's indented options block."""
    members: list[str] | bool | None = None
    filters: tuple[str, ...] = ()
    for index, option in enumerate(block):
        if not (key := _OPTION.match(option)):
            continue
        indent, name, value = key.groups()
        if name == "filters":
            filters = tuple(ast.literal_eval(value))
        elif name == "members" and value in ("false", "true"):
            members = value == "true"
        elif name == "members" and value:
            members = [m.strip() for m in value.strip("[]").split(",") if m.strip()]
        elif name == "members":
            members = _listed(block[index + 1 :], len(indent))
    return members, filters


def _listed(lines: list[str], indent: int) -> list[str]:
    """The items of a YAML block list (``- name`` lines indented deeper than ``indent``)."""
    items: list[str] = []
    for line in lines:
        if len(line) - len(line.lstrip()) <= indent or not line.strip().startswith("- "):
            break
        items.append(line.strip()[2:].strip())
    return items


def documented_modules(pages: list[str]) -> dict[str, list[str] | None]:
    """The modules the reference pages render, each with the members it lists, if any.

    A module rendered whole anywhere counts whole. A directive naming an object
    (``::: statifier_oban.DurableTimers``) is kept too; ``snapshot`` leaves it out, since
    the module it belongs to holds it.
    """
    found: dict[str, list[str] | None] = {}
    for text in pages:
        for directive in directives(text):
            name, members = directive.target, directive.members
            if not isinstance(members, list) or found.get(name, []) is None:
                found[name] = None
            else:
                found[name] = [*(found.get(name) or []), *members]
    return found


def defined_names(module: ModuleType) -> list[str]:
    """The public names ``module`` offers: its ``__all__``, else what its source defines."""
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return [name for name in exported if not name.startswith("_")]
    tree = ast.parse(inspect.getsource(module))
    names: list[str] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names.extend(t.id for t in targets if isinstance(t, ast.Name))
    return [name for name in dict.fromkeys(names) if not name.startswith("_")]


def attributes(obj: object) -> list[str]:
    """The public attributes of a class (fields and annotations included); else none."""
    if not inspect.isclass(obj):
        return []
    names = {name for name in dir(obj) if not name.startswith("_")}
    if dataclasses.is_dataclass(obj):
        names |= {field.name for field in dataclasses.fields(obj)}
    for klass in obj.__mro__:
        names |= set(vars(klass).get("__annotations__", {}))
    return sorted(name for name in names if not name.startswith("_"))


def snapshot(modules: dict[str, list[str] | None], packages: list[str]) -> Snapshot:
    """The public names of ``packages`` and ``modules`` (as imported now), with their
    classes' attributes."""
    result: Snapshot = {}
    for name in sorted({*packages, *modules}):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue  # an object, not a module: its module's names hold it
        listed = modules.get(name)
        names = sorted(set(defined_names(module)) | set(listed or []))
        result[name] = {member: attributes(getattr(module, member)) for member in names}
    return result


def missing(recorded: Snapshot) -> list[str]:
    """What the current code lacks of ``recorded``, one ``module.name[.attribute]`` each.

    A name reachable only through a deprecation alias (a module ``__getattr__`` that
    warns) is not missing.
    """
    gone: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for module_name, names in recorded.items():
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                gone.append(module_name)
                continue
            for name, members in names.items():
                if not hasattr(module, name):
                    gone.append(f"{module_name}.{name}")
                    continue
                have = set(attributes(getattr(module, name)))
                gone.extend(f"{module_name}.{name}.{m}" for m in members if m not in have)
    return gone


def load(version: str) -> Snapshot:
    """The recorded public API of release ``version``."""
    data: Snapshot = json.loads((SNAPSHOTS / f"{version}.json").read_text(encoding="utf-8"))
    return data


def _release_tree(commit: str, into: Path) -> None:
    """Extract the packages and the reference pages of ``commit`` into ``into``."""
    archive = subprocess.run(  # noqa: S603 - git with a fixed argument list
        ["git", "archive", "--format=tar", commit, "packages", "docs/reference"],  # noqa: S607
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def write(version: str, commit: str) -> Path:
    """Record the public API of ``commit`` as release ``version``'s."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        _release_tree(commit, tree)
        sources = sorted(str(p) for p in (tree / "packages").glob("*/src"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sources)}
        out = subprocess.run(  # noqa: S603 - this interpreter, this module
            [sys.executable, "-m", "tools.public_api", "--print", str(tree)],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    SNAPSHOTS.mkdir(parents=True, exist_ok=True)
    path = SNAPSHOTS / f"{version}.json"
    path.write_text(out, encoding="utf-8")
    return path


def _print(tree: Path) -> None:
    """Print the snapshot of the release extracted at ``tree`` (its packages imported)."""
    pages = [p.read_text("utf-8") for p in sorted((tree / "docs" / "reference").rglob("*.md"))]
    packages = [p for p in PACKAGES if list((tree / "packages").glob(f"*/src/{p}"))]
    data: Any = snapshot(documented_modules(pages), packages)
    sys.stdout.write(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> None:
    """``--write VERSION COMMIT`` records a release; ``--print TREE`` is its helper."""
    parser = argparse.ArgumentParser(prog="python -m tools.public_api")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", nargs=2, metavar=("VERSION", "COMMIT"))
    group.add_argument("--print", metavar="TREE")
    args = parser.parse_args(argv)
    if args.print:
        _print(Path(args.print))
    else:
        print(write(*args.write).relative_to(ROOT))


if __name__ == "__main__":
    main()
