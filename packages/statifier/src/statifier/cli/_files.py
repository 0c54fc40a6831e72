"""The command line's charts: a CHART argument read (:func:`chart_source`) and compiled
(:func:`load_chart`), and the ``src`` resolver that reads files beside it, and nothing else.

A CHART is an SCXML file, or ``MODULE:NAME`` naming a chart written in Python
(``statifier.build``), imported by the one rule of ``statifier.cli.kit`` (``--path``). An
existing file wins over a name that looks like ``MODULE:NAME``.

The library fetches nothing unless the host says how (``resolver=``). On the command line
the host is the user running their own chart, whose ``<script src>``, ``<data src>`` and
``<invoke src>`` name files next to it (next to the module, for a chart written in
Python): ``lib.js``, ``data/config.json``, ``file:child.scxml``. Absolute paths, other URI
schemes and paths that leave the chart's directory are refused, and so are files larger
than a chart may be.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from statifier.build import Chart, Exported
from statifier.chart.compiler import MAX_CHART_BYTES, Resolver, compile_chart
from statifier.chart.model import Machine
from statifier.cli import kit
from statifier.datamodel.host import HostFunction, HostFunctionError
from statifier.errors import ChartError, Diagnostic

_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True, slots=True)
class ChartSource:
    """What a CHART argument names: an SCXML file, or a chart written in Python.

    ``name`` is the argument as given (what messages call the chart), ``path`` the SCXML
    file or the module's file (``src`` names files beside it), ``built`` the chart written
    in Python and ``exported`` its SCXML with the Python origin of every element.
    """

    name: str
    path: Path
    built: Chart | None = None
    exported: Exported | None = None

    def resolver(self) -> Resolver:
        """The ``src`` resolver: files beside the chart (or its module)."""
        return files_beside(self.path)

    def locate(self, diagnostic: Diagnostic) -> Diagnostic:
        """``diagnostic`` about the chart's SCXML, at the Python line that made its element
        for a chart written in Python."""
        return diagnostic if self.exported is None else self.exported.locate(diagnostic)

    def place(self, line: int) -> str:
        """Where line ``line`` of the chart's SCXML is, as a message names it:
        ``chart.scxml:12``, or the Python ``file:line`` that made the element there."""
        if self.exported is None:
            return f"{self.name}:{line}"
        origin = self.exported.origin_at(line)
        return f"{origin.file}:{origin.line}"


def chart_source(text: str) -> ChartSource:
    """The CHART argument ``text``: an existing file, else ``MODULE:NAME`` imported from the
    path ``kit.set_import_path`` set (``CommandError`` when it does not import or is not a
    chart), else a file (which :func:`load_chart` reports as unreadable)."""
    path = Path(text)
    if path.exists() or not _SPEC.match(text):
        return ChartSource(text, path)
    module_name, _, attribute = text.partition(":")
    module = kit.import_module(module_name, "CHART")
    if not hasattr(module, attribute):
        raise kit.CommandError(f"CHART {text}: module {module_name!r} has no {attribute!r}")
    chart = getattr(module, attribute)
    if not isinstance(chart, Chart):
        raise kit.CommandError(
            f"CHART {text}: {module_name}.{attribute} is of type {type(chart).__name__}, not "
            "a chart written with statifier.build"
        )
    where = getattr(module, "__file__", None)
    base = Path(where) if where else Path.cwd() / f"{module_name}.py"
    return ChartSource(text, base, chart, chart.export())


def load_chart(
    source: ChartSource, functions: Mapping[str, HostFunction] | None
) -> Machine | list[Diagnostic]:
    """The compiled chart, or why it cannot be compiled (a file that cannot be read is a
    diagnostic at line 0, ``unreadable-file``)."""
    try:
        if source.built is not None:
            return source.built.compile(functions=functions, resolver=source.resolver())
        return compile_chart(
            source.path.read_bytes(), functions=functions, resolver=source.resolver()
        )
    except ChartError as exc:
        return sorted(exc.diagnostics, key=lambda d: (d.file or "", d.line))
    except OSError as exc:
        return [Diagnostic("unreadable-file", str(exc.strerror or exc))]
    except HostFunctionError as exc:
        return [Diagnostic("host-functions", str(exc))]


def files_beside(chart: Path) -> Resolver:
    """A resolver reading ``src`` URIs as paths relative to ``chart``'s directory."""
    base = chart.resolve().parent

    def resolve(uri: str) -> str:
        path = _relative_path(uri)
        target = (base / path).resolve()
        if not target.is_relative_to(base):
            raise LookupError(f"{uri!r} is outside the chart's directory")
        with target.open("rb") as file:
            raw = file.read(MAX_CHART_BYTES + 1)
        if len(raw) > MAX_CHART_BYTES:
            raise LookupError(f"{uri!r} is larger than {MAX_CHART_BYTES} bytes")
        return raw.decode("utf-8")

    return resolve


def _relative_path(uri: str) -> PurePosixPath:
    parts = urlsplit(uri)
    if parts.scheme not in ("", "file") or parts.netloc or parts.query or parts.fragment:
        raise LookupError(f"{uri!r} is not a file beside the chart")
    path = PurePosixPath(unquote(parts.path))
    if not path.parts or path.is_absolute():
        raise LookupError(f"{uri!r} is not a relative path")
    return path
