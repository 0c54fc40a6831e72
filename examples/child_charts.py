"""Charts invoking charts, durably: an order starts its payment as a child execution.

Run from the repository root::

    uv run python examples/child_charts.py

The ``payment`` chart is registered under its name; the ``order`` chart's ``<invoke
type="scxml" src="payment">`` starts it as a child execution, in the order's own step,
seeded with the ``<param>``s it declares. The child asks its parent for approval
(``#_parent``), the order answers (``#_payment``), and the child's donedata comes back as
``done.invoke.payment``: each of those a message delivered by a job that this process
runs. Order 2 is abandoned while its payment waits for approval, which cancels its child.
It starts a throwaway PostgreSQL of its own and removes it at the end.
"""

from __future__ import annotations

import asyncio

import statifier
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.embedded import EmbeddedPostgres
from statifier_oban.executions import ObanExecutor, execution_config, use
from statifier_oban.schema import install
from statifier_persistence import Executions

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'

payment = statifier.compile(
    f"""<scxml {NS} initial="authorizing">
  <datamodel><data id="amount" expr="0"/></datamodel>
  <state id="authorizing">
    <onentry>
      <send target="#_parent" event="approval.needed"><param name="amount" expr="amount"/></send>
    </onentry>
    <transition event="approved" target="charged"/>
  </state>
  <final id="charged"><donedata><param name="charged" expr="amount"/></donedata></final>
</scxml>""",
    name="payment",
)

order = statifier.compile(
    f"""<scxml {NS} initial="paying">
  <datamodel><data id="total" expr="0"/><data id="charged" expr="None"/></datamodel>
  <state id="paying">
    <invoke id="payment" type="scxml" src="payment"><param name="amount" expr="total"/></invoke>
    <transition event="approval.needed" cond="_event.data['amount'] &lt;= 100">
      <send target="#_payment" event="approved"/>
    </transition>
    <transition event="done.invoke.payment" target="paid">
      <assign location="charged" expr="_event.data['charged']"/>
    </transition>
    <transition event="abandon" target="abandoned"/>
  </state>
  <final id="paid"/>
  <final id="abandoned"/>
</scxml>""",
    name="order",
)


async def main(url: str) -> None:
    """The story, on the PostgreSQL database at ``url``."""
    await install(url)
    async with AsyncConnectionPool(url, open=False) as pool:
        oban = Oban(pool=pool, queues={"timers": 10})  # runs the message jobs too
        executions = Executions(
            pool, executor=ObanExecutor(execution_config(oban, timers_queue="timers"))
        )
        use(executions)
        await oban.start()

        await executions.register(payment)  # first: the order's src names it
        await executions.create(order, execution_id="order_1", datamodel={"total": 40})
        await executions.create(order, execution_id="order_2", datamodel={"total": 500})
        while (await executions.get("order_1")).status == "active":
            await asyncio.sleep(0.05)  # approval.needed, approved, done.invoke.payment
        _, state = await executions.load("order_1")
        print("order_1 charged", state.datamodel["charged"])  # order_1 charged 40

        (child,) = (await executions.list(parent="order_2")).executions
        print(child.chart_name, child.status)  # payment active (waiting for approval)
        await executions.step("order_2", statifier.Event(name="abandon"))
        while (await executions.get(child.id)).status == "active":
            await asyncio.sleep(0.05)  # leaving "paying" sent the child its cancel
        print(child.chart_name, (await executions.get(child.id)).status)  # payment cancelled
        await oban.stop()


if __name__ == "__main__":
    server = EmbeddedPostgres.start()  # a throwaway PostgreSQL; or the URL of your own
    try:
        asyncio.run(main(server.url))
    finally:
        server.stop()
