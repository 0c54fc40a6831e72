"""Helpers of the durable-execution tests.

``Rig`` is one test's world: a server-mode Oban running a timers queue and an invoke
queue of its own, an ``Executions`` on the module's database whose ``ObanExecutor``
writes jobs naming ``ExecutionDelivery``/``ExecutionInvokeDelivery``, installed with
``use`` for the deliveries the worker runs in this process.

The invoke handlers here are resolved by the worker from their paths on the job rows
(``oban_support.executions:EchoHandler``), through the tests' import path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from oban import Oban
from statifier.basichttp import Locations, OutboundPolicy
from statifier.core.effects import Invoke, SendDelayed
from statifier_oban import Config, DeliveryAnswer, InvokeHandler, Ok, executions
from statifier_oban.children import MapHandler
from statifier_oban.executions import ExecutionDelivery, ObanExecutor, execution_config
from statifier_persistence import Executions

from oban_support.common import unique
from oban_support.harness import Server, Servers

TIMERS = "exec_timers"
INVOKES = "exec_invokes"


class _Configured:
    """Handlers answer ``config()`` with the rig's config (read only by fan-outs)."""

    config_in_use: ClassVar[Config | None] = None

    def config(self) -> Config:
        """The running rig's config."""
        assert _Configured.config_in_use is not None
        return _Configured.config_in_use


class EchoHandler(_Configured, InvokeHandler):
    """Answers ``Ok({"echo": <params>})`` at once."""

    async def run(self, invoke: Invoke) -> Any:
        """See the class docstring."""
        return Ok({"echo": invoke.params})


class GatedHandler(_Configured, InvokeHandler):
    """Waits for ``GatedHandler.gate`` before answering ``Ok("late")``."""

    gate: ClassVar[asyncio.Event | None] = None
    started: ClassVar[asyncio.Event | None] = None

    async def run(self, invoke: Invoke) -> Any:
        """See the class docstring."""
        assert GatedHandler.gate is not None
        assert GatedHandler.started is not None
        GatedHandler.started.set()
        await GatedHandler.gate.wait()
        return Ok("late")


class HeldHandler(_Configured, InvokeHandler):
    """Waits for ``HeldHandler.gates[params["gate"]]``, then answers ``Ok(params["gen"])``."""

    gates: ClassVar[dict[str, asyncio.Event]] = {}

    async def run(self, invoke: Invoke) -> Any:
        """See the class docstring."""
        params = invoke.params
        await HeldHandler.gates.setdefault(params["gate"], asyncio.Event()).wait()
        return Ok(params["gen"])


class RaisingHandler(_Configured, InvokeHandler):
    """Raises ``RuntimeError(params["message"])``: its one attempt crashes."""

    max_attempts = 1

    async def run(self, invoke: Invoke) -> Any:
        """See the class docstring."""
        raise RuntimeError(invoke.params["message"])


class HeldTimerDelivery(ExecutionDelivery):
    """``ExecutionDelivery`` held between a timer job's fetch and its fire: it sets
    ``fetched`` and waits for ``release`` (a race the test then plays out)."""

    fetched: ClassVar[asyncio.Event | None] = None
    release: ClassVar[asyncio.Event | None] = None

    async def deliver(self, scope: str, effect: SendDelayed) -> DeliveryAnswer:
        """See the class docstring."""
        assert HeldTimerDelivery.fetched is not None
        assert HeldTimerDelivery.release is not None
        HeldTimerDelivery.fetched.set()
        await HeldTimerDelivery.release.wait()
        return await super().deliver(scope, effect)


HANDLERS: dict[str, type[InvokeHandler]] = {
    "test:echo": EchoHandler,
    "test:gated": GatedHandler,
    "test:raise": RaisingHandler,
    "test:held": HeldHandler,
    "statifier:map": MapHandler,
}


@dataclass
class Rig:
    """A running world for one test; see the module docstring."""

    server: Server
    config: Config
    executor: ObanExecutor
    executions: Executions


@asynccontextmanager
async def running_rig(
    servers: Servers,
    *,
    basichttp: OutboundPolicy | None = None,
    locations: Locations | None = None,
    **config_options: Any,
) -> AsyncIterator[Rig]:
    """Start a rig (queues of its own); uninstall its ``Executions`` at exit. ``basichttp``
    is the executor's allow-list, ``locations`` the executions' BasicHTTP locations."""
    timers, invokes = unique(TIMERS), unique(INVOKES)
    pool = await servers.pool(max_size=12)
    name = unique("exec_srv")
    oban = Oban(
        pool=pool,
        name=name,
        node=f"{name}.node",
        queues={timers: 10, invokes: 10},
        stager={"interval": 0.1},
        lifeline={"interval": 0.5},
        shutdown_grace_period=1.0,
    )
    server = Server(oban, pool, timers)
    servers.servers.append(server)  # stopped (and forgotten) when the test ends
    await oban.start()
    config = execution_config(
        server.oban, timers_queue=timers, invoke_queue=invokes, **config_options
    )
    executor = ObanExecutor(config, handlers=HANDLERS, basichttp=basichttp)
    store = Executions(server.pool, executor=executor, basichttp=locations)
    executions.use(store, parked_snooze_s=60)
    _Configured.config_in_use = config
    GatedHandler.gate = asyncio.Event()
    GatedHandler.started = asyncio.Event()
    HeldTimerDelivery.fetched = asyncio.Event()
    HeldTimerDelivery.release = asyncio.Event()
    HeldHandler.gates = {}
    try:
        yield Rig(server, config, executor, store)
    finally:
        executions.use(None)
        _Configured.config_in_use = None
        await executor.close()
