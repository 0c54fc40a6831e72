"""The timer pin source: pending timer jobs pin the chart revision of their executions.

Public as ``statifier_oban.executions.TimerPins``; it is a ``statifier_persistence``
``PinSource`` by shape (this module imports nothing of statifier_persistence).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .._config import Config
from .._errors import ConfigError
from ..timers._schedule import pending_for


class TimerPins:
    """Counts the pending timers of a revision's executions: ``{"timers": n}``.

    ``config`` is the ``Config`` whose oban instance holds the timer jobs, or a function
    returning it, called on every question (so the answer follows the host's running
    configuration). Pending is what ``pending_for`` counts: scheduled, available,
    retryable and snoozed timers, not executing, finished or cancelled ones. The chart
    identity is not used: a timer job names its execution, never its chart.

    Correct only where timers are scoped by durable execution id (``ObanExecutor``): a
    timer of a live session is keyed by the session id and is not counted. It rescues
    nothing: when the jobs cannot be counted, ``pins`` raises, and retiring is refused.
    """

    name = "timers"

    def __init__(self, config: Config | Callable[[], Config]) -> None:
        if not isinstance(config, Config) and not callable(config):
            raise ConfigError(
                "config", f"expected a Config or a function returning one: {config!r}"
            )
        self._config = config

    def config(self) -> Config:
        """The configuration to count with (the function's answer, checked)."""
        config = self._config() if not isinstance(self._config, Config) else self._config
        if not isinstance(config, Config):
            raise ConfigError("config", f"the config function returned {config!r}, not a Config")
        return config

    async def pins(self, chart_identity: str, execution_ids: Sequence[str]) -> Mapping[str, int]:
        """``{"timers": n}``: the pending timers of ``execution_ids``, summed."""
        if not execution_ids:
            return {"timers": 0}
        counts = await pending_for(self.config(), execution_ids)
        return {"timers": sum(counts.values())}
