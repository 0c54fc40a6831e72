"""The demo's chart: the card authorization, with a hold delay set at start.

The chart ships in this package (``statifier_demo/card_authorization.scxml``);
``examples/card_authorization.scxml`` in the repository is a link to it. It arms its
hold with ``<send id="hold" ... delay="7d"/>``. A demo cannot wait a week, so
:func:`scalable_source` rewrites that one attribute into ``delayexpr="hold_delay"`` and
declares ``<data id="hold_delay" expr="'7d'"/>``: left alone the variant still holds
for seven days, and a session started with ``datamodel={"hold_delay": "3s"}`` holds for
three seconds.

Why a ``delayexpr`` rather than compiling one variant per ``--hold`` with the delay
written in: the chart (and so its identity, which every stored position carries) is the
same whatever the hold, and the hold is data, stored in the position with the rest of
the datamodel. A position stored by one run resumes under the one chart in any other
process, whatever that process was told about the hold.

The rewrite is strict: if the example no longer has exactly one such ``<send>`` and one
``<datamodel>``, it raises instead of running a chart that means something else.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import statifier
from statifier.chart.durations import InvalidDuration, parse_duration

from ._errors import ChartNotFound

CHART_FILE = "card_authorization.scxml"
"""The chart's file name, in this package."""

HOLD_VARIABLE = "hold_delay"
"""The datamodel variable the rewritten ``<send id="hold">`` reads its delay from."""

_HOLD_SEND = re.compile(r"<send\b[^>]*\bid=\"hold\"[^>]*>")
_DELAY = re.compile(r"\bdelay=\"([^\"]*)\"")
_DATAMODEL = "<datamodel>"


def default_chart_path() -> Path:
    """The chart shipped in this package, as a file the phase processes can open."""
    path = Path(str(resources.files("statifier_demo").joinpath(CHART_FILE)))
    if not path.is_file():
        raise ChartNotFound(f"cannot find {CHART_FILE} at {path}; pass --chart PATH")
    return path


def declared_hold(source: str) -> str:
    """The delay the chart itself gives its hold (``7d`` in the example)."""
    return _hold_delay(source)[1]


def _hold_delay(source: str) -> tuple[str, str]:
    """The ``<send id="hold">`` tag and its ``delay``; ``ValueError`` unless exactly one."""
    sends = _HOLD_SEND.findall(source)
    if len(sends) != 1:
        raise ValueError(f'expected one <send id="hold">, found {len(sends)}')
    send = sends[0]
    delays = _DELAY.findall(send)
    if len(delays) != 1:
        raise ValueError(f'expected a delay="..." on {send}, found {len(delays)}')
    return send, delays[0]


def scalable_source(source: str) -> str:
    """The chart with the hold's ``delay`` turned into ``delayexpr`` over ``hold_delay``.

    Raises ``ValueError`` unless ``source`` has exactly one ``<send id="hold">`` with a
    ``delay`` attribute and exactly one ``<datamodel>`` element.
    """
    send, default = _hold_delay(source)
    if source.count(_DATAMODEL) != 1:
        raise ValueError(f"expected one {_DATAMODEL}, found {source.count(_DATAMODEL)}")
    parse_duration(default)  # the declared default must stay a valid delay
    rewritten = _DELAY.sub(f'delayexpr="{HOLD_VARIABLE}"', send)
    source = source.replace(send, rewritten)
    declaration = f'<data id="{HOLD_VARIABLE}" expr="\'{default}\'"/>'
    return source.replace(_DATAMODEL, f"{_DATAMODEL}\n    {declaration}", 1)


def load_machine(path: Path | None = None) -> statifier.Machine:
    """Compile the scalable variant of the card-authorization chart at ``path``."""
    chart = path if path is not None else default_chart_path()
    return statifier.compile(scalable_source(chart.read_text(encoding="utf-8")))


def hold_ms(hold: str) -> int:
    """The hold in milliseconds; ``ValueError`` for anything but a positive duration."""
    try:
        millis = parse_duration(hold)
    except InvalidDuration as exc:
        raise ValueError(str(exc)) from None
    if millis <= 0:
        raise ValueError(f"the hold must be longer than 0 ms, not {hold!r}")
    return millis


def seed(hold: str) -> dict[str, str]:
    """The ``datamodel=`` seed that sets the hold of a new session."""
    hold_ms(hold)
    return {HOLD_VARIABLE: hold}
