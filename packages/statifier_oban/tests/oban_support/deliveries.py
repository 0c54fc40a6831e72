"""Test deliveries, named on timer job rows by import path (``oban_support.deliveries:Name``).

oban's worker resolves the path on every run and, for a class, builds a fresh instance, so all
state lives at module level, keyed by scope (every test uses scopes of its own):

* ``CALLS[scope]``: every ``(scope, effect)`` a delivery here received, in order;
* ``SCRIPTS[scope]``: what ``ScriptedDelivery`` does for that scope, a function
  ``(scope, effect) -> answer`` (sync or async); absent: answer ``Delivered()``.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from oban import current_job
from statifier.core.effects import SendDelayed
from statifier_oban.delivery import Delivered
from statifier_oban.rows import _resolve

Script = Callable[[str, SendDelayed], Any | Awaitable[Any]]

CALLS: defaultdict[str, list[SendDelayed]] = defaultdict(list)
SCRIPTS: dict[str, Script] = {}
JOB_IDS: defaultdict[str, list[int | None]] = defaultdict(list)
"""``JOB_IDS[scope]``: the oban job id each call ran under (``oban.current_job()``)."""


def forget(*scopes: str) -> None:
    """Drop the calls and scripts of ``scopes``."""
    for scope in scopes:
        CALLS.pop(scope, None)
        SCRIPTS.pop(scope, None)
        JOB_IDS.pop(scope, None)


def _record(scope: str, effect: SendDelayed) -> None:
    CALLS[scope].append(effect)
    job = current_job()
    JOB_IDS[scope].append(job.id if job is not None else None)


class ScriptedDelivery:
    """Records the call, then answers what ``SCRIPTS[scope]`` says (``Delivered()`` if nothing)."""

    async def deliver(self, scope: str, effect: SendDelayed) -> Any:
        """See the class docstring."""
        _record(scope, effect)
        script = SCRIPTS.get(scope)
        if script is None:
            return Delivered()
        answer = script(scope, effect)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer


class SyncRecordingDelivery:
    """A plain (not async) delivery: records the call and answers ``Delivered()``."""

    def deliver(self, scope: str, effect: SendDelayed) -> Delivered:
        """See the class docstring."""
        _record(scope, effect)
        return Delivered()


class NotADelivery:
    """Resolves (it is a class) but has no ``deliver``: the worker must refuse it."""

    def send(self, scope: str, effect: SendDelayed) -> Delivered:
        """Not the delivery callback."""
        _record(scope, effect)
        return Delivered()


# What ``statifier-oban worker --module`` does for a host module: job rows may name the
# classes defined here (ADR 13). Tests of refusals name classes of other modules.
_resolve.allow_module(__name__)
