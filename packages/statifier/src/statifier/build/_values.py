"""Values written into a chart: JSON-like data (``value=``) and inline XML (``xml()``)."""

from __future__ import annotations

import json

from statifier.chart.xmltree import SCXML_NS, parse
from statifier.datamodel.python.values import is_value
from statifier.errors import ChartError
from statifier.values import brief

from ._origin import BuildError, Origin, caller
from ._tree import Markup

type JSONValue = bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None
"""What ``value=`` takes: the JSON-like values of the engine (``is_value``)."""


def value_text(value: JSONValue, origin: Origin) -> str:
    """``value`` as the inline text of ``<data>``, ``<assign>`` or ``<content>``: JSON, which
    every datamodel reads back as that value."""
    if not is_value(value):
        raise BuildError(
            origin,
            f"value {brief(value)} is not JSON-like (str, int, float, bool, None, list, "
            "dict with str keys)",
        )
    return json.dumps(value, ensure_ascii=False)


def xml(markup: str, /) -> Markup:
    """Inline XML for ``content``, ``data`` or ``assign`` (``markup=``), written as it would
    stand inside the element in an SCXML document: unprefixed names are in the SCXML
    namespace unless the markup says otherwise (``<books xmlns="">``).

    Parsed at once with the engine's hardened reader; raises ``BuildError`` naming the
    calling line when it is not well-formed.
    """
    origin = caller()
    try:
        root = parse(f'<content xmlns="{SCXML_NS}">{markup}</content>'.encode())
    except ChartError as exc:
        reason = exc.diagnostics[0].message if exc.diagnostics else str(exc)
        raise BuildError(origin, f"the markup is not well-formed XML: {reason}") from None
    return Markup(tuple(root.children), tuple(root.texts), origin)
