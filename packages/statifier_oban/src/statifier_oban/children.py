"""A fan-out's children as durable executions, settled into one answer (needs
``statifier_persistence``, like ``statifier_oban.executions``).

Public because it is durable: job rows name ``SettlementWorker`` and ``CascadeWorker`` by
this module's path, and ``execution_config`` names ``ExecutionChildStarter`` as the
child starter of every fan-out. The pieces, in the order a fan-out meets them:

* ``MapHandler``: the handler of a ``core.map``-shaped ``<invoke type="statifier:map">``
  (register it with ``ObanExecutor(handlers={"statifier:map": MapHandler})`` or
  ``statifier-oban worker --handler statifier:map=statifier_oban.children:MapHandler``).
  Its params: ``items`` (the list: one child each), ``chart`` (the name of the children's
  registered chart), optionally ``on`` (``all``, the default, or ``first_error``) and
  ``failed_states`` (final states of the child chart that count as a failure). It answers
  ``FanOut(items)``: one child start job per item.
* ``ExecutionChildStarter``: each start job creates child ``index`` through
  ``Executions.start_child`` (its datamodel seeded with ``item``), or adopts the child an
  earlier delivery of the start created.
* ``SettlementWorker``: when the children settled the fan-out, steps the answer into the
  parent, keyed by the job (applied once, however often oban delivers it), with
  ``ExecutionInvokeDelivery``'s answers: a parent that left the invoking state declines
  it (SCXML 6.4), a parked one snoozes it.
* ``CascadeWorker``: after a ``first_error`` failure, or when the parent stopped the
  invocation, cancels the children still running and the starts still pending.

The code lives in ``statifier_oban.executions._children``; rows store this module's path.
"""

from __future__ import annotations

from .executions._children import (
    CascadeWorker,
    ExecutionChildStarter,
    MapHandler,
    SettlementWorker,
)

__all__ = ["CascadeWorker", "ExecutionChildStarter", "MapHandler", "SettlementWorker"]
