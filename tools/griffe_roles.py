"""A griffe extension: the Sphinx roles of our docstrings become cross-references.

Docstrings name other objects the way editors and ``help()`` read well, with Sphinx roles
(``:class:`Executions```, ``:meth:`~Session.start```, ``:func:`.use```). The API reference
renders docstrings as Markdown, where a role would show literally. So, when griffe has
loaded a package, every role in its docstrings becomes an autorefs cross-reference,
``[`Executions`][statifier_persistence._executions.Executions]``: the target is resolved
the way Python would resolve the name where the docstring is written (the object's own
members, then its parents', then the module's imports), and ``~`` shows only the last
part, as in Sphinx. mkdocs-autorefs then links it to the page that renders that object,
by its path or any alias of it, and ``mkdocs build --strict`` fails on a target no page
renders.

A target outside our packages (``asyncio.Task``) is shown as code without a link. A role
this extension cannot turn into a reference (an unknown role, a name that resolves
nowhere) is a warning, which fails the strict build: no role ever shows literally.
``tests/test_docs_reference.py`` checks every docstring of every package this way.
"""

from __future__ import annotations

import builtins
import re
import sys
from collections.abc import Iterator
from typing import Any

import griffe

PROJECT = frozenset(
    {"statifier", "statifier_oban", "statifier_persistence", "statifier_web", "statifier_demo"}
)
"""The top-level packages whose objects the reference renders: their names are linked."""

ROLES = frozenset({"func", "class", "meth", "attr", "mod", "exc", "data", "obj", "const"})
"""The Python-domain roles understood (with or without the ``py:`` domain)."""

ROLE = re.compile(r":(?:py:)?([a-z]+):`([^`]*)`")
"""A role as written: ``:kind:`target```, ``:kind:`~target```, ``:kind:`title <target>```."""

_TITLED = re.compile(r"^(.*?)\s*<([^<>]+)>$")


def convert(
    text: str, scope: griffe.Object | griffe.Alias, project: frozenset[str] = PROJECT
) -> tuple[str, list[str]]:
    """``text`` with every role made a cross-reference, and what could not be converted.

    Names resolve in ``scope`` (the object whose docstring ``text`` is); those in the
    packages of ``project`` are linked. The problems are messages, one per role left as
    it was written.
    """
    problems: list[str] = []

    def replace(match: re.Match[str]) -> str:
        kind, body = match.group(1), match.group(2)
        if kind not in ROLES:
            problems.append(f"unknown role :{kind}: in {match.group(0)!r}")
            return match.group(0)
        reference = _reference(body, scope, project)
        if reference is None:
            problems.append(f"cannot resolve {match.group(0)!r}")
            return match.group(0)
        return reference

    return ROLE.sub(replace, text), problems


def _reference(
    body: str, scope: griffe.Object | griffe.Alias, project: frozenset[str]
) -> str | None:
    """The Markdown a role's body becomes, or None when it names nothing."""
    title: str | None = None
    if titled := _TITLED.match(body):
        title, body = titled.group(1), titled.group(2)
    link = not body.startswith("!")
    body = body.lstrip("!")
    short = body.startswith("~")
    target = body.lstrip("~").removesuffix("()")
    if not target:
        return None
    shown = title or (target.lstrip(".").rsplit(".", 1)[-1] if short else target.lstrip("."))
    if body.endswith("()") and not title:
        shown += "()"
    path = resolve(target, scope)
    if path is None:
        return None
    if not link or path.split(".", 1)[0] not in project:
        return f"`{shown}`"
    return f"[`{shown}`][{path}]"


def resolve(target: str, scope: griffe.Object | griffe.Alias) -> str | None:
    """The full path ``target`` names where ``scope`` is written, or None.

    A dotted target resolves its first part in the scope and keeps the rest; a leading
    dot (``.use``) is the same search. A first part the scope does not know stands for
    itself when it is a built-in (``KeyError``), a module of the standard library
    (``asyncio.Task``) or, with more parts, any top-level package
    (``statifier_oban.executions.use``).
    """
    head, _, rest = target.lstrip(".").partition(".")
    try:
        path = scope.resolve(head)
    except griffe.NameResolutionError:
        known = hasattr(builtins, head) or head in sys.stdlib_module_names
        if not (known or rest):
            return None
        path = head
    return f"{path}.{rest}" if rest else path


def objects(root: griffe.Object) -> Iterator[griffe.Object]:
    """``root`` and every object defined under it (aliases are visited where defined)."""
    yield root
    for member in root.members.values():
        if not member.is_alias:
            yield from objects(member)  # type: ignore[arg-type]  # not an alias: an Object


class SphinxRoles(griffe.Extension):
    """Turn the Sphinx roles of every docstring of a loaded package into cross-references."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` once it is completely loaded."""
        for obj in objects(pkg):
            if obj.docstring is None:
                continue
            text, problems = convert(obj.docstring.value, obj)
            obj.docstring.value = text
            for problem in problems:
                griffe.logger.warning("%s: %s", obj.path, problem)
