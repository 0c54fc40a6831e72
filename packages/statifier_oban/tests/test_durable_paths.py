"""Every path a job row can already hold resolves, however the package's code is laid out.

Rows name workers (``oban_jobs.worker``) and plug-ins (``meta.delivery``, ``meta.child_starter``,
an invocation's handler) by import path; rows written by one release are read by the next,
and by the previous one during a rolling deploy. So a class keeps the path rows store, as
its ``__module__``, whichever subpackage holds its code.
"""

from __future__ import annotations

import importlib

import pytest
from oban.worker import resolve_worker, worker_name
from statifier_oban import _names
from statifier_oban._config import DEFAULT_DELIVERY, DEFAULT_INVOKE_DELIVERY
from statifier_oban.executions import EXECUTION_CHILD_STARTER
from statifier_oban.rows._resolve import LIBRARY_PATHS, lookup, path_of

STORED_WORKERS = {
    "statifier_oban.workers.TimerWorker": _names.TIMER_WORKER,
    "statifier_oban.workers.InvokeWorker": _names.INVOKE_WORKER,
    "statifier_oban.workers.ChildStartWorker": _names.CHILD_START_WORKER,
    "statifier_oban.children.SettlementWorker": _names.SETTLEMENT_WORKER,
    "statifier_oban.children.CascadeWorker": _names.CASCADE_WORKER,
    "statifier_oban.executions.MessageWorker": _names.MESSAGE_WORKER,
    "statifier_oban.executions.PostWorker": _names.POST_WORKER,
}
"""The worker names rows of 0.1.0 hold, spelled out (a rename must fail here)."""

STORED_PLUG_INS = {
    "statifier_oban.delivery:SessionDelivery",
    "statifier_oban.delivery:SessionInvokeDelivery",
    "statifier_oban.executions:ExecutionDelivery",
    "statifier_oban.executions:ExecutionInvokeDelivery",
    "statifier_oban.children:ExecutionChildStarter",
    "statifier_oban.children:MapHandler",
}
"""The library's plug-in paths rows of 0.1.0 hold."""


@pytest.mark.parametrize("stored", sorted(STORED_WORKERS))
def test_a_stored_worker_name_resolves_to_a_worker_that_writes_the_same_name(stored: str) -> None:
    assert STORED_WORKERS[stored] == stored
    worker = resolve_worker(stored)
    assert worker_name(worker) == stored
    module, _, name = stored.rpartition(".")
    assert vars(importlib.import_module(module))[name] is worker


@pytest.mark.parametrize("stored", sorted(STORED_PLUG_INS))
def test_a_stored_plug_in_path_resolves_and_names_itself_by_it(stored: str) -> None:
    target = lookup(stored)
    assert path_of(target) == stored
    # The dotted spelling, accepted on rows too, reaches the same class.
    module, _, name = stored.partition(":")
    assert lookup(f"{module}.{name}") is target


def test_the_library_paths_and_defaults_are_the_stored_ones() -> None:
    assert LIBRARY_PATHS == STORED_PLUG_INS
    assert {DEFAULT_DELIVERY, DEFAULT_INVOKE_DELIVERY, EXECUTION_CHILD_STARTER} <= STORED_PLUG_INS
