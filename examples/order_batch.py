"""The fan-out batch chart written in Python (``order_batch.scxml`` as SCXML).

Run from the repository root to print its SCXML::

    uv run python examples/order_batch.py

``pricing`` invokes ``statifier:map`` over ``orders``: one child execution of the
registered chart ``price_order`` (``price_order.py``) per order, whose answers come back
as one list on ``done.invoke.price_all`` (``examples/fan_out.py`` runs it durably).
"""

from __future__ import annotations

import statifier
from statifier import build as sc

CHART = sc.chart(
    sc.data("orders", expr="[]"),
    sc.data("totals", expr="None"),
    sc.data("problem", expr="None"),
    sc.state(
        "pricing",
        sc.invoke(
            sc.param("items", expr="orders"),
            sc.param("chart", expr="'price_order'"),
            sc.param("on", expr="'first_error'"),
            id="price_all",
            type="statifier:map",
        ),
        sc.transition(
            sc.assign("totals", expr="_event.data"),
            event="done.invoke.price_all",
            target="priced",
        ),
        sc.transition(
            sc.assign("problem", expr="_event.data"),
            event="error.communication.invoke.price_all",
            target="needs_attention",
        ),
    ),
    sc.final("priced"),
    sc.final("needs_attention"),
    name="order_batch",
    initial="pricing",
    datamodel="python",
)
"""A batch of orders priced as child executions, settled once in the orders' order."""

if __name__ == "__main__":
    print(statifier.export(CHART), end="")
