"""The chart registry: every chart an execution runs, stored by identity so that any node
can compile it, and compiled machines cached in this process (bounded, by identity).

A chart is registered with its source, name and version (which together make its
identity) and the documents its ``src`` attributes resolved to when it was compiled, so a
node without the host's resolver compiles the very same machine. A stored source is
untrusted: it is size-checked, compiled, and the compiled identity must be the one asked
for, or the machine is refused.

Every node compiles registered charts with the same host functions (``Executions
(functions=...)``): a chart that calls one this node was not given does not compile, so
``register`` refuses it before any execution runs on it.

A chart is found by its identity or by the identity of its source bytes (what identities
were before canonical forms, ADR 16): rows and positions written under the old identity
keep finding their chart. A retired revision is refused to anything that would start
executions on it.

``<invoke type="scxml" src="NAME">`` names a registered chart by its name, and a revision
pins what its ``src`` values start (``statifier_chart_links``): a ``src`` written in the
chart is linked when the revision is first registered (to the newest revision of that name
that is not retired; none refuses the registration), a ``srcexpr``'s value at its first
use. Inline ``<content>`` charts are registered by identity only, without their name, so a
chart's author cannot make them what a name resolves to.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from psycopg import AsyncConnection
from statifier import ChartError, Machine
from statifier import compile as compile_chart
from statifier.chart.identity import identity_suffix
from statifier.core import planner
from statifier.datamodel.host import HostFunctions

from ._errors import (
    ChartConflict,
    ChartNotRegistered,
    ChartRetired,
    ChartUnusable,
    IdentityMismatch,
)
from ._limits import MAX_IDENTITY_LENGTH, Limits
from ._rows import encode_json_object
from ._sql import statement


class MachineCache:
    """Compiled machines by chart identity; the least recently used goes beyond ``size``."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._machines: OrderedDict[str, Machine] = OrderedDict()

    def get(self, identity: str) -> Machine | None:
        """The cached machine of ``identity`` (now the most recently used), or None."""
        machine = self._machines.get(identity)
        if machine is not None:
            self._machines.move_to_end(identity)
        return machine

    def put(self, machine: Machine, identity: str | None = None) -> None:
        """Remember ``machine`` under ``identity`` (default its own), evicting beyond the
        bound."""
        key = machine.identity if identity is None else identity
        self._machines[key] = machine
        self._machines.move_to_end(key)
        while len(self._machines) > self._size:
            self._machines.popitem(last=False)

    def __len__(self) -> int:
        return len(self._machines)


class Charts:
    """Registers charts and compiles registered ones, through one ``MachineCache``."""

    def __init__(self, prefix: str, limits: Limits, functions: HostFunctions | None) -> None:
        self._prefix = prefix
        self._limits = limits
        self._functions = functions
        self.cache = MachineCache(limits.max_cached_charts)

    async def register(
        self, conn: AsyncConnection[Any], machine: Machine, *, named: bool = True
    ) -> None:
        """Store ``machine``'s chart unless its identity is registered already, linking the
        ``src`` of its ``<invoke type="scxml">``s when it is new (see the module docstring).

        Raises ``ChartConflict`` when that identity is registered with other resolved
        ``src`` documents, ``ChartUnusable`` when the source is over the bound, does not
        compile here as it is registered (a host function this node lacks) or invokes a
        ``src`` no chart is registered as, ``ChartRetired`` when the revision is retired.
        A registered revision is locked against retirement (``FOR SHARE``) until the
        caller's transaction ends. ``named=False`` stores it without its name (an inline
        ``<content>`` chart: found by identity only).
        """
        if len(machine.identity) > MAX_IDENTITY_LENGTH:
            raise ChartUnusable(machine.identity[:80], "the identity is too long")
        resolved = encode_json_object(
            machine.resolved_sources, "resolved src documents", self._limits.max_chart_source_bytes
        )
        size = len(machine.source) + len(resolved.encode("utf-8"))
        if size > self._limits.max_chart_source_bytes:
            raise ChartUnusable(
                machine.identity,
                f"{size} bytes of source, over the {self._limits.max_chart_source_bytes} limit",
            )
        params = {
            "identity": machine.identity,
            "name": machine.name if named else None,
            "version": machine.version,
            "source": machine.source,
            "resolved": resolved,
            "source_identity": machine.source_identity or None,
        }
        if self.cache.get(machine.identity) is None:
            # What a worker will do with the row: compile it from the registry's fields
            # with this node's functions. Once per identity and process.
            self._compile(
                machine.identity,
                machine.source,
                machine.name,
                machine.version,
                machine.identity,
                machine.resolved_sources,
            )
        cursor = await conn.execute(statement("register_chart", self._prefix), params)
        if await cursor.fetchone() is None:
            stored = await self._share(conn, machine.identity)
            if stored != machine.resolved_sources:
                raise ChartConflict(machine.identity)
        else:
            for src in invoked_sources(machine):
                problem = src_problem(src)
                if problem is not None:
                    raise ChartUnusable(machine.identity, problem)
                if await self.link(conn, machine.identity, src) is None:
                    raise ChartUnusable(
                        machine.identity,
                        f"it invokes src {src!r}, but no chart is registered under the name"
                        f" {src!r} (or every revision of it is retired): register it first",
                    )
        self.cache.put(machine)

    async def link(self, conn: AsyncConnection[Any], identity: str, src: str) -> str | None:
        """The revision ``<invoke src>`` of revision ``identity`` starts: its link, made now
        (to the newest revision named ``src`` that is not retired) if it has none; None
        when no revision of that name that is not retired is registered."""
        params = {"identity": identity, "src": src}
        for name in ("select_link", "link_chart", "select_link"):
            cursor = await conn.execute(statement(name, self._prefix), params)
            row = await cursor.fetchone()
            if row is not None:
                return str(row[0])
        return None

    def compile_text(self, source: str, identity_hint: str) -> Machine:
        """Compile a chart given as text (an inline ``<content>``) as registered charts are
        compiled here: with this node's functions, nothing resolved. ``ChartUnusable``
        (naming ``identity_hint``) if it does not compile."""
        try:
            return compile_chart(source, functions=self._functions)
        except ChartError as exc:
            raise ChartUnusable(identity_hint, f"it does not compile: {exc}") from exc

    async def _share(self, conn: AsyncConnection[Any], identity: str) -> dict[str, str]:
        """The resolved documents of a registered revision, locked against retirement."""
        params = {"identity": identity, "max_source": self._limits.max_chart_source_bytes}
        cursor = await conn.execute(statement("share_chart", self._prefix), params)
        row = await cursor.fetchone()
        if row is None:
            raise ChartNotRegistered(identity)
        resolved_text, retired = row
        if retired:
            raise ChartRetired(identity)
        if resolved_text is None:
            raise ChartUnusable(identity, "its resolved src documents are over the bound")
        return _resolved(identity, resolved_text)

    async def latest(self, conn: AsyncConnection[Any], name: str) -> str:
        """The identity of the most recently registered revision of the chart ``name`` that
        is not retired (``ChartNotRegistered`` if there is none)."""
        cursor = await conn.execute(statement("latest_chart", self._prefix), {"name": name})
        row = await cursor.fetchone()
        if row is None:
            raise ChartNotRegistered(name)
        return str(row[0])

    async def machine(
        self, conn: AsyncConnection[Any], identity: str, execution_id: str
    ) -> Machine:
        """The compiled machine of ``identity`` (its canonical or its source identity): from
        the cache, else from the registry."""
        machine = self.cache.get(identity)
        if machine is None:
            machine = await self._load(conn, identity)
            if identity not in (machine.identity, machine.source_identity):
                raise IdentityMismatch(execution_id, identity, machine.identity)
            self.cache.put(machine, identity)
        return machine

    async def _fetch(
        self, conn: AsyncConnection[Any], identity: str
    ) -> tuple[Any, bytes, dict[str, str]]:
        """``(row, source, resolved src documents)`` of a registered chart, checked."""
        params = {"identity": identity, "max_source": self._limits.max_chart_source_bytes}
        cursor = await conn.execute(statement("select_chart", self._prefix), params)
        row = await cursor.fetchone()
        if row is None:
            raise ChartNotRegistered(identity)
        _, _, size, source, resolved_text, _ = row
        if source is None or resolved_text is None:
            raise ChartUnusable(
                identity,
                f"{size} bytes of source, over the {self._limits.max_chart_source_bytes} limit",
            )
        return row, bytes(source), _resolved(identity, resolved_text)

    async def _load(self, conn: AsyncConnection[Any], identity: str) -> Machine:
        row, source, resolved = await self._fetch(conn, identity)
        return self._compile(identity, source, row[0], row[1], row[5], resolved)

    def _compile(
        self,
        identity: str,
        source: str | bytes,
        name: str | None,
        version: str | None,
        registered_as: str,
        resolved: dict[str, str],
    ) -> Machine:
        # A machine's name is the compile-time name or else the chart's own name attribute,
        # and only a compile-time name is part of the identity (as its suffix, which no
        # digest contains): compile as it was compiled.
        if name is not None and not str(registered_as).endswith(identity_suffix(name, version)):
            name = None

        def resolver(src: str) -> str:
            if src not in resolved:
                raise LookupError(f"{src!r} was not resolved when the chart was registered")
            return resolved[src]

        try:
            return compile_chart(
                source,
                name=name,
                version=version,
                resolver=resolver,
                functions=self._functions,
            )
        except ChartError as exc:
            raise ChartUnusable(identity, f"it does not compile here: {exc}") from exc


def src_problem(src: str) -> str | None:
    """Why ``src`` cannot name a registered chart (None: it can): a chart name is at most
    ``MAX_IDENTITY_LENGTH`` characters, without NUL (which PostgreSQL text cannot hold)."""
    if len(src) > MAX_IDENTITY_LENGTH:
        return f"src is {len(src)} characters: no chart name is longer than {MAX_IDENTITY_LENGTH}"
    if "\x00" in src:
        return "src holds a NUL character: no chart name does"
    return None


def invoked_sources(machine: Machine) -> list[str]:
    """The ``src`` values written in ``machine``'s ``<invoke>``s of the ``scxml`` type, in
    document order, each once (a ``srcexpr`` or a ``typeexpr`` is known only at run time)."""
    found: dict[str, None] = {}
    for state in machine.states:
        for invoke in state.invokes:
            scxml = invoke.type is None or invoke.type in planner.SCXML_INVOKE_TYPES
            if invoke.src is not None and invoke.typeexpr is None and scxml:
                found.setdefault(invoke.src, None)
    return list(found)


def _resolved(identity: str, text: Any) -> dict[str, str]:
    """Resolved src documents read from the registry: a JSON object of text, checked."""
    try:
        resolved = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ChartUnusable(identity, f"its resolved src documents are not JSON: {exc}") from None
    if not isinstance(resolved, dict) or not all(
        isinstance(value, str) for value in resolved.values()
    ):
        raise ChartUnusable(identity, "its resolved src documents are not a map of text")
    return resolved
