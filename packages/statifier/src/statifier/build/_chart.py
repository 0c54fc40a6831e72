"""``chart()``: the ``<scxml>`` root of a built chart, exported as SCXML and compiled to the
``Machine`` its SCXML compiles to."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from statifier.chart.compiler import Resolver, compile_chart
from statifier.chart.model import Machine
from statifier.chart.xmltree import XNode
from statifier.datamodel.host import HostFunction
from statifier.errors import ChartError

from ._actions import Script
from ._data import Data
from ._expressions import words
from ._origin import caller
from ._scxml import Exported, write
from ._states import Final, Parallel, State
from ._tree import Node, Tree

DatamodelName = Literal["python", "ecmascript", "null"]
"""The datamodels a chart may name (``statifier.datamodel.DATAMODEL_NAMES``)."""

Binding = Literal["early", "late"]
"""When ``data`` of states other than the root get their values: at start, or on entry."""

type ChartChild = State | Parallel | Final | Data | Script
"""What a ``chart`` holds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart(Node):
    """A chart written in Python: the ``<scxml>`` root and everything in it, immutable.

    ``export()`` writes it as SCXML; ``compile()`` compiles that SCXML, with every
    diagnostic at the Python line that made its element.
    """

    name: str | None = None
    initial: str | None = None
    datamodel: DatamodelName | None = None
    binding: Binding | None = None
    children: tuple[ChartChild, ...] = ()

    def _element(self, tree: Tree) -> XNode:
        attrs = {
            "version": "1.0",
            "name": self.name,
            "initial": self.initial,
            "datamodel": self.datamodel,
            "binding": self.binding,
        }
        return tree.element(self.origin, "scxml", attrs, self.children)

    def export(self) -> Exported:
        """The chart as SCXML text, with the Python origin of every element in it."""
        tree = Tree()
        root = self._element(tree)
        return write(root, tree.origins, tree.verbatim)

    def compile(
        self,
        *,
        name: str | None = None,
        version: str | None = None,
        resolver: Resolver | None = None,
        functions: Mapping[str, HostFunction] | None = None,
    ) -> Machine:
        """The ``Machine`` of the exported SCXML, as ``statifier.compile`` makes it (the
        keywords are its own: ``name`` and ``version`` are the compile-time revision names
        that suffix the identity, not the chart's ``name``).

        Raises ``ChartError`` whose diagnostics (``file``, ``line``) name the Python line
        that made each faulty element; the machine's ``warnings`` name them too.
        """
        exported = self.export()
        try:
            machine = compile_chart(
                exported.text, name=name, version=version, resolver=resolver, functions=functions
            )
        except ChartError as exc:
            raise ChartError([exported.locate(d) for d in exc.diagnostics]) from None
        if not machine.warnings:
            return machine
        warnings = tuple(exported.locate(w) for w in machine.warnings)
        return dataclasses.replace(machine, warnings=warnings)


def chart(
    *children: ChartChild,
    name: str | None = None,
    initial: str | Sequence[str] | None = None,
    datamodel: DatamodelName | None = None,
    binding: Binding | None = None,
) -> Chart:
    """``<scxml>``: a chart of ``children`` (states, ``data``, top-level ``script``).

    ``name`` is the chart's ``name`` attribute, ``initial`` its initial state(s) (the first
    state by default), ``datamodel`` ``"python"`` (the default when None leaves the
    attribute out), ``"ecmascript"`` or ``"null"``, ``binding`` ``"early"`` or ``"late"``.
    Expressions anywhere in the chart are text in that datamodel.
    """
    return Chart(
        origin=caller(),
        name=name,
        initial=words(initial),
        datamodel=datamodel,
        binding=binding,
        children=children,
    )


def export(chart: Chart, /) -> str:
    """The SCXML text of a built chart: what ``statifier.compile`` compiles to the same
    ``Machine`` (and identity) as ``chart.compile()``."""
    return chart.export().text
