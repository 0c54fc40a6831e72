"""The API reference renders every public name, and no docstring role shows literally.

The reference pages (``docs/reference/``) are ``::: target`` directives of mkdocstrings,
one page per part, in a reader's order; so nothing is rendered unless a page names it.
These tests hold the pages to the code: every name of each package's root ``__all__`` is
on a page, and a directive that lists its members lists every public one (or another
page renders it). Docstrings name objects with Sphinx roles, which
``tools/griffe_roles.py`` turns into cross-references; a role it cannot turn (an unknown
role, a name that resolves nowhere) fails here, and ``mkdocs build --strict`` fails on a
reference to something no page renders.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import griffe
import pytest

from tools import griffe_roles, public_api

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "reference").rglob("*.md"))
PACKAGES = public_api.PACKAGES


def _directives() -> list[tuple[Path, public_api.Directive]]:
    return [(page, d) for page in PAGES for d in public_api.directives(page.read_text("utf-8"))]


def _target(path: str) -> object:
    """The object a directive names: a module, or an attribute of one."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


def _documented(module: ModuleType) -> list[str]:
    """The names mkdocstrings renders of ``module`` as a whole: its ``__all__``, else the
    names its source defines with a docstring."""
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return [name for name in exported if not name.startswith("_")]
    names: list[str] = []
    body = ast.parse(inspect.getsource(module)).body
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if ast.get_docstring(node):
                names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _is_docstring(after):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.extend(t.id for t in targets if isinstance(t, ast.Name))
    return [name for name in names if not name.startswith("_")]


def _is_docstring(node: ast.stmt | None) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _own_attributes(cls: type) -> list[str]:
    """The public attributes a class and its bases of our packages define."""
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in griffe_roles.PROJECT:
            names.update(dict.fromkeys(n for n in vars(klass) if not n.startswith("_")))
    return list(names)


def _public(target: object) -> list[str]:
    if isinstance(target, ModuleType):
        return _documented(target)
    if inspect.isclass(target):
        return _own_attributes(target)
    return []


def _rendered(directive: public_api.Directive) -> Iterator[tuple[str, object]]:
    """The (name, object) pairs a directive renders."""
    target = _target(directive.target)
    yield directive.target.rpartition(".")[2], target
    if directive.members is False:
        return
    names = directive.members if isinstance(directive.members, list) else _public(target)
    excluded = [re.compile(f[1:]) for f in directive.filters if f.startswith("!")]
    for name in names:
        if not any(pattern.search(name) for pattern in excluded) and hasattr(target, name):
            yield name, getattr(target, name)


def _everything_rendered() -> list[tuple[str, object]]:
    return [pair for _, directive in _directives() for pair in _rendered(directive)]


def _is_rendered(name: str, obj: object, rendered: list[tuple[str, object]]) -> bool:
    return any(n == name and o is obj for n, o in rendered)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_a_package_exports_is_on_a_reference_page(package: str) -> None:
    module = importlib.import_module(package)
    rendered = _everything_rendered()
    missing = [n for n in module.__all__ if not _is_rendered(n, getattr(module, n), rendered)]
    assert not missing, f"{package}: put these on a page of docs/reference/: {missing}"


def test_a_directive_that_lists_members_leaves_none_out() -> None:
    rendered = _everything_rendered()
    left_out: list[str] = []
    for page, directive in _directives():
        if not isinstance(directive.members, list):
            continue
        target = _target(directive.target)
        for name in _public(target):
            if name not in directive.members and not _is_rendered(
                name, getattr(target, name), rendered
            ):
                left_out.append(f"{page.relative_to(ROOT)}:{directive.line}: {name}")
    assert not left_out, f"public, listed nowhere: {left_out}"


def test_a_listed_member_exists() -> None:
    unknown = [
        f"{page.relative_to(ROOT)}:{directive.line}: {directive.target}.{name}"
        for page, directive in _directives()
        if isinstance(directive.members, list)
        for name in directive.members
        if not hasattr(_target(directive.target), name)
    ]
    assert not unknown


@pytest.mark.parametrize("package", PACKAGES)
def test_every_role_in_a_docstring_becomes_a_reference(package: str) -> None:
    loaded = griffe.load(package)
    assert isinstance(loaded, griffe.Module)
    problems: list[str] = []
    for obj in griffe_roles.objects(loaded):
        if obj.docstring is not None:
            text, found = griffe_roles.convert(obj.docstring.value, obj)
            problems.extend(f"{obj.path}: {problem}" for problem in found)
            assert not griffe_roles.ROLE.search(text) or found, obj.path
    assert not problems


_MODULE = '''
"""A module. See :class:`Kept` and :func:`~pkg.run`."""
from statifier import Machine
import asyncio


class Kept:
    """Kept, with :meth:`go` and :meth:`~Kept.go` and :attr:`size`."""

    size: int = 0
    """The size; a :class:`Machine` runs it."""

    def go(self) -> None:
        """Go, then :meth:`stop` (:class:`KeyError` if not; :class:`asyncio.Task`)."""

    def stop(self) -> None:
        """See :func:`statifier_oban.executions.use` and :mod:`asyncio`."""


def run() -> None:
    """Titled: :class:`the kept one <Kept>`; not linked: :func:`!run`."""
'''


def _converted(code: str) -> dict[str, str]:
    project = griffe_roles.PROJECT | {"pkg"}
    with griffe.temporary_visited_module(code, module_name="pkg") as module:
        return {
            obj.path: griffe_roles.convert(obj.docstring.value, obj, project)[0]
            for obj in griffe_roles.objects(module)
            if obj.docstring is not None
        }


def test_roles_resolve_where_the_docstring_is_written() -> None:
    assert _converted(_MODULE) == {
        "pkg": "A module. See [`Kept`][pkg.Kept] and [`run`][pkg.run].",
        "pkg.Kept": "Kept, with [`go`][pkg.Kept.go] and [`go`][pkg.Kept.go] and "
        "[`size`][pkg.Kept.size].",
        "pkg.Kept.size": "The size; a [`Machine`][statifier.Machine] runs it.",
        "pkg.Kept.go": "Go, then [`stop`][pkg.Kept.stop] (`KeyError` if not; `asyncio.Task`).",
        "pkg.Kept.stop": "See [`statifier_oban.executions.use`][statifier_oban.executions.use] "
        "and `asyncio`.",
        "pkg.run": "Titled: [`the kept one`][pkg.Kept]; not linked: `run`.",
    }


@pytest.mark.parametrize(
    ("docstring", "problem"),
    [
        (":class:`Nowhere`", "cannot resolve ':class:`Nowhere`'"),
        (":func:`.nowhere`", "cannot resolve ':func:`.nowhere`'"),
        (":ref:`a-label`", "unknown role :ref: in ':ref:`a-label`'"),
        (":class:``", "cannot resolve ':class:``'"),
    ],
)
def test_a_role_that_names_nothing_is_reported_and_left_as_written(
    docstring: str, problem: str
) -> None:
    with griffe.temporary_visited_module(f'"""{docstring}"""', module_name="pkg") as module:
        assert griffe_roles.convert(docstring, module) == (docstring, [problem])
