"""The card-authorization chart written in Python (``card_authorization.scxml`` as SCXML).

Run from the repository root to print its SCXML::

    uv run python examples/card_authorization.py

The two forms are one chart: ``CHART.compile()`` and ``statifier.compile`` of the SCXML
file give the same identity, so an execution registered from either runs on one revision.
"""

from __future__ import annotations

import statifier
from statifier import build as sc

CHART = sc.chart(
    sc.data("captures", expr="0"),
    sc.state(
        "authorized",
        sc.on_entry(
            sc.send(id="hold", event="authorization.expired", delay="7d"),
            sc.log(label="authorized", expr="'hold armed for 7 days'"),
        ),
        sc.on_exit(sc.cancel("hold")),
        sc.transition(event="capture.requested", target="capturing"),
        sc.transition(event="authorization.expired", target="expired"),
    ),
    sc.state(
        "capturing",
        sc.on_entry(sc.assign("captures", expr="captures + 1")),
        sc.transition(event="capture.succeeded", target="settled"),
        sc.transition(event="capture.failed", cond="captures < 3", target="capturing"),
        sc.transition(event="capture.failed", target="expired"),
    ),
    sc.final("settled", sc.done_data(sc.param("captures", expr="captures"))),
    sc.final("expired"),
    name="card_authorization",
    initial="authorized",
    datamodel="python",
)
"""A card authorization held for seven days: captured in time, or expired exactly once."""

if __name__ == "__main__":
    print(statifier.export(CHART), end="")
