"""The command line's charts: a chart file compiled (:func:`load_chart`), and the ``src``
resolver that reads files beside it, and nothing else.

The library fetches nothing unless the host says how (``resolver=``). On the command line
the host is the user running their own chart, whose ``<script src>``, ``<data src>`` and
``<invoke src>`` name files next to it: ``lib.js``, ``data/config.json``,
``file:child.scxml``. Absolute paths, other URI schemes and paths that leave the chart's
directory are refused, and so are files larger than a chart may be.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

from statifier.chart.compiler import MAX_CHART_BYTES, Resolver, compile_chart
from statifier.chart.model import Machine
from statifier.datamodel.host import HostFunction, HostFunctionError
from statifier.errors import ChartError, Diagnostic


def load_chart(
    path: Path, functions: Mapping[str, HostFunction] | None
) -> Machine | list[Diagnostic]:
    """The compiled chart, or why it cannot be compiled (a file that cannot be read is a
    diagnostic at line 0, ``unreadable-file``)."""
    try:
        return compile_chart(path.read_bytes(), functions=functions, resolver=files_beside(path))
    except ChartError as exc:
        return sorted(exc.diagnostics, key=lambda d: d.line)
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
