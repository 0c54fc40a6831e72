"""One order of a batch, priced as a child execution, written in Python
(``price_order.scxml`` as SCXML).

Run from the repository root to print its SCXML::

    uv run python examples/price_order.py

The fan-out seeds ``item`` with the order; a durable timer prices it once, and the
donedata is the order's entry in the batch's list of totals.
"""

from __future__ import annotations

from datetime import timedelta

import statifier
from statifier import build as sc

CHART = sc.chart(
    sc.data("item", expr="None"),
    sc.data("total_cents", expr="None"),
    sc.state(
        "quoting",
        sc.on_entry(sc.send(event="quoted", delay=timedelta(milliseconds=300))),
        sc.transition(
            sc.assign("total_cents", expr="item['qty'] * item['unit_cents']"),
            event="quoted",
            target="priced",
        ),
    ),
    sc.final(
        "priced",
        sc.done_data(
            sc.param("order", expr="item['order']"),
            sc.param("total_cents", expr="total_cents"),
        ),
    ),
    name="price_order",
    initial="quoting",
    datamodel="python",
)
"""An order priced on a durable timer, reporting its total."""

if __name__ == "__main__":
    print(statifier.export(CHART), end="")
