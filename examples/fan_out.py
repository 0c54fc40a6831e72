"""Fan-out settled: a batch of 100 orders priced as child executions, a worker killed mid-way.

Run from the repository root::

    uv run python examples/fan_out.py [--database-url CONNINFO]

The batch (``order_batch.scxml``, a durable execution) enters ``pricing``, whose
``<invoke type="statifier:map">`` fans out over its 100 orders: ``MapHandler`` answers
``FanOut(orders)``, one child start job per order, and each start creates a child
execution of the registered chart ``price_order.scxml`` with the order as ``item``. A
child prices its order on a durable timer and finishes with the order's total; as the
children finish, the fan-out is settled once, and the batch hears ``done.invoke.price_all``
with the 100 totals in the orders' order.

Nothing of this example runs in the workers but the charts: two plain ``statifier-oban
worker`` processes (``--handler statifier:map=statifier_oban.children:MapHandler``) run the
queues, and find both charts in the registry. When about a third of the orders are
priced, one of them is killed with SIGKILL (the one that is not oban's leader) and a third
worker starts; the workers run with ``--rescue-after 2``, so the survivors' rescue by
liveness (ADR 15) puts back what the dead one left ``executing`` about 2 s later. Every
order is still priced exactly once, and the batch continues with the full, ordered list.

Without ``--database-url`` an embedded PostgreSQL server is started in a temporary data
directory and removed at the end. The example checks its own outcome (exit status 1 if a
check fails).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import statifier
from _harness import Story, database, parse_args, run_story, wait_for
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.children import MapHandler
from statifier_oban.cli import WORKER_NAME
from statifier_oban.executions import ObanExecutor, execution_config
from statifier_oban.schema import install
from statifier_persistence import Executions

HERE = Path(__file__).resolve().parent
BATCH = HERE / "order_batch.scxml"
ORDER = HERE / "price_order.scxml"

ORDERS = 100
KILL_AT = 35
"""How many orders are priced when a worker is killed."""

RESCUE_AFTER_S = 2
"""``--rescue-after``: a job left ``executing`` by a dead worker runs again this much later."""

DEADLINE_S = 60.0

WORKER = [
    *(sys.executable, "-m", "statifier_oban.cli", "worker"),
    *("--queue", "timers=10", "--queue", "invokes=10", "--invoke-queue", "invokes"),
    *("--handler", "statifier:map=statifier_oban.children:MapHandler"),
    *("--rescue-after", str(RESCUE_AFTER_S), "--log-level", "WARNING"),
]
"""A plain ``statifier-oban worker``: no host module, only the map handler."""


def orders() -> list[dict[str, Any]]:
    """The batch: order ids, quantities and unit prices (in cents)."""
    return [
        {"order": f"ord-{n:03d}", "qty": 1 + n % 4, "unit_cents": 250 + 10 * n}
        for n in range(ORDERS)
    ]


class Workers:
    """``statifier-oban worker`` processes by label, each with its own node and log."""

    def __init__(self, url: str, logs: Path) -> None:
        self.url = url
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.nodes: dict[str, str] = {}

    def spawn(self, label: str) -> str:
        """Start worker ``label``; its oban node name."""
        node = f"fan-out-{label}-{os.getpid()}"
        with (self.logs / f"{label}.log").open("wb") as log:
            self.processes[label] = subprocess.Popen(  # noqa: S603 - this interpreter, our CLI
                [*WORKER, "--database-url", self.url, "--node", node],
                cwd=HERE,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.nodes[label] = node
        return node

    def stop_all(self) -> None:
        """SIGTERM every worker still running (SIGKILL after 10 s), and reap them."""
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)

    def log(self, label: str) -> str:
        """The end of what worker ``label`` printed."""
        return (self.logs / f"{label}.log").read_text(errors="replace")[-2000:]


async def scalar(pool: AsyncConnectionPool, query: Any, params: Any = None) -> Any:
    """The first column of the first row."""
    async with pool.connection() as conn:
        row = await (await conn.execute(query, params)).fetchone()
    return row[0] if row is not None else None


async def running(pool: AsyncConnectionPool, workers: Workers, *labels: str) -> bool:
    """Wait until the workers run their queues (their producers are registered)."""

    async def ready() -> bool:
        for label in labels:
            if workers.processes[label].poll() is not None:
                raise RuntimeError(f"worker {label} exited:\n{workers.log(label)}")
        nodes = [workers.nodes[label] for label in labels]
        count = "SELECT count(DISTINCT node) FROM oban_producers WHERE node = ANY(%s)"
        return int(await scalar(pool, count, [nodes])) == len(nodes)

    return await wait_for(ready, timeout=30, interval=0.05)


async def leader(pool: AsyncConnectionPool) -> str | None:
    """The node leading the workers' oban name (it runs the lifeline), if one does."""
    query = "SELECT node FROM oban_leaders WHERE name = %s AND expires_at > timezone('UTC', now())"
    found = await scalar(pool, query, [WORKER_NAME])
    return str(found) if found is not None else None


async def story(told: Story, database_url: str | None) -> None:
    """Price the batch on two workers, kill one mid-way, check every order and the list."""
    async with database(database_url) as url:
        await install(url)  # oban's tables, our indexes and the execution tables
        pool = AsyncConnectionPool(url, open=False, min_size=1, max_size=6)
        await pool.open(wait=True)
        host = Oban(pool=pool, name="fan-out-host")  # client mode: the host only creates
        logs = Path(tempfile.mkdtemp(prefix="fan_out_"))
        workers = Workers(url, logs)
        try:
            config = execution_config(host, timers_queue="timers", invoke_queue="invokes")
            executor = ObanExecutor(config, handlers={"statifier:map": MapHandler})
            executions = Executions(pool, executor=executor)
            await run(told, pool, executions, workers)
        finally:
            workers.stop_all()
            await pool.close()


async def run(
    told: Story, pool: AsyncConnectionPool, executions: Executions, workers: Workers
) -> None:
    """The story itself, once the host is up."""
    await executions.register(statifier.compile(ORDER.read_bytes()))
    batch_chart = statifier.compile(BATCH.read_bytes())
    for label in ("a", "b"):
        workers.spawn(label)
    told.check(await running(pool, workers, "a", "b"), "workers a and b run the queues")

    async def led() -> bool:
        return await leader(pool) is not None

    await wait_for(led, timeout=10)
    told.begin(f"workers a and b up (plain statifier-oban worker); leader {await leader(pool)}")

    batch = await executions.create(
        batch_chart, execution_id="batch-1", datamodel={"orders": orders()}
    )
    told.say(f"batch-1 created, {batch.execution.status}: mapping {ORDERS} orders")
    priced = "SELECT count(*) FROM statifier_executions WHERE parent_id = %s AND status = %s"
    await wait_for(
        lambda: _at_least(pool, priced, ["batch-1", "completed"], KILL_AT), timeout=DEADLINE_S
    )
    lead = await leader(pool)
    victim = next(label for label in ("a", "b") if workers.nodes[label] != lead)
    process = workers.processes[victim]
    process.send_signal(signal.SIGKILL)
    killed = process.wait(timeout=10) == -signal.SIGKILL
    done_at_kill = await scalar(pool, priced, ["batch-1", "completed"])
    stranded = await scalar(
        pool,
        "SELECT count(*) FROM oban_jobs WHERE state = 'executing' AND %s = ANY(attempted_by)",
        [workers.nodes[victim]],
    )
    told.say(
        f"{done_at_kill} of {ORDERS} orders priced: SIGKILL worker {victim} "
        f"({stranded} of its jobs left executing)"
    )
    workers.spawn("c")
    await running(pool, workers, "c")
    told.say("worker c up")

    async def finished() -> bool:
        return (await executions.get("batch-1")).status != "active"

    await wait_for(finished, timeout=DEADLINE_S, interval=0.1)
    execution, state = await executions.load("batch-1")
    totals = state.datamodel["totals"]
    told.say(
        f"batch-1 is {execution.status} in {tuple(execution.outcome['configuration'])}, "
        f"{len(totals or [])} totals"
        if execution.outcome
        else f"batch-1 is {execution.status}"
    )
    told.say(f"totals[:3] = {(totals or [])[:3]}")
    await check(told, pool, execution, totals, killed, stranded)


async def check(
    told: Story, pool: AsyncConnectionPool, batch: Any, totals: Any, killed: bool, stranded: int
) -> None:
    """The verified facts of the outcome."""
    expected = [
        {"order": order["order"], "total_cents": order["qty"] * order["unit_cents"]}
        for order in orders()
    ]
    children = await _rows(
        pool,
        "SELECT c.child_index, e.status, e.step_count FROM statifier_executions AS e"
        " JOIN statifier_fan_out_children AS c ON c.child_id = e.id"
        " WHERE e.parent_id = 'batch-1' ORDER BY c.child_index",
    )
    keys = await scalar(
        pool,
        "SELECT count(*) FROM statifier_step_keys AS k JOIN statifier_executions AS e"
        " ON e.id = k.execution_id WHERE e.parent_id = 'batch-1'",
    )
    settlements = await _rows(
        pool,
        "SELECT state::text FROM oban_jobs WHERE args->>'scope' = 'batch-1'"
        " AND worker = 'statifier_oban.children.SettlementWorker'",
    )
    again = await scalar(
        pool,
        "SELECT count(*) FROM oban_jobs WHERE (attempt > 1 OR (meta->>'rescued')::int >= 1)"
        " AND args->>'scope' IN (SELECT id FROM statifier_executions"
        " WHERE id = 'batch-1' OR parent_id = 'batch-1')",
    )
    twice = sum(1 for row in children if row[2] > 2)
    told.say(
        f"jobs of the batch run again after the kill: {again} (oban is at-least-once); "
        f"orders priced twice: {twice}"
    )
    told.check(killed, "the worker was killed by SIGKILL mid-way")
    told.check(
        batch.status == "completed" and (batch.outcome or {}).get("configuration") == ["priced"],
        "the batch continued: it is priced",
    )
    told.check(totals == expected, f"with the full list of {ORDERS} totals, in the orders' order")
    told.check(
        [row[0] for row in children] == list(range(ORDERS))
        and all(row[1:] == ("completed", 2) for row in children),
        f"{ORDERS} child executions, one per order, each priced once (created, one timer step)",
    )
    told.check(keys == ORDERS, "one applied timer step per order, keyed by its job")
    told.check(
        settlements == [("completed",)] and batch.step_count == 2,
        "the invocation was answered once (one settlement job, one answer step)",
    )
    told.check(again >= stranded, "every job the dead worker left executing ran again")


async def _rows(pool: AsyncConnectionPool, query: Any) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        return list(await (await conn.execute(query)).fetchall())


async def _at_least(pool: AsyncConnectionPool, query: Any, params: Any, count: int) -> bool:
    return int(await scalar(pool, query, params)) >= count


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; the exit status (0: every check held)."""
    args = parse_args((__doc__ or "").split("\n\n")[0], argv)
    started = time.monotonic()
    code = run_story(
        lambda told: story(told, args.database_url),
        "fan_out: 100 orders priced as child executions, one worker killed mid-way",
    )
    print(f"(ran in {time.monotonic() - started:.1f} s)")
    return code


if __name__ == "__main__":
    sys.exit(main())
