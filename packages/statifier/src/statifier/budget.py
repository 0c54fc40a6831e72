"""One budget per macrostep: the limits an execution runs under and the meter that spends them.

A chart controls how much work one call of the core does: a ``<foreach>`` nests, an
eventless loop spins, an expression copies. Each expression is bounded by its datamodel;
``MacrostepLimits`` bounds the call as a whole (ADR 0011). The core owns one ``Budget``
per public call (one macrostep) and every datamodel charges the same object:

* ``steps``: evaluation work units. A datamodel evaluating an expression spends what the
  evaluation cost (``Budget.steps`` is the remaining allowance, ``Budget.spend`` takes
  units off); the core spends a fixed cost per executable-content node, per ``<foreach>``
  iteration and per round, so work without any expression is bounded too.
* ``effects``: effects one call may return.
* ``internal_events``: events the internal queue may hold at once.
* ``output_bytes``: written-out size of the values one call hands out (event data, logged
  values, invocation parameters): what a durable host stores or ships.
* ``datamodel_bytes``: written-out size of the whole datamodel, checked on every write.
  Unlike the others it is a cap on what is stored, not an allowance per call: a write
  past it is refused with ``error.execution`` and the macrostep goes on.

The round budget stays ``max_macrostep_rounds`` (it predates this module). A limit of
None is unbounded; ``UNBOUNDED`` turns every limit off (literal spec behaviour).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Callable

    from statifier.datamodel.writes import WriteResult

Reason = Literal["rounds", "steps", "effects", "internal_events", "output_bytes"]
"""Which budget ran out (``BudgetExhausted.reason``)."""

MAX_LIMIT: Final = 2**62
"""The largest limit a position may carry (what a database ``bigint`` holds, with room)."""

_NO_LIMIT: Final = MAX_LIMIT * 4
"""Stands in for an unbounded limit in the meter: never reached by a real call."""


NODE_COST: Final = 20
"""Steps one executable-content node, one ``<foreach>`` iteration or one round costs.

An expression's step is one element copied or compared in C; interpreting a node costs
about as much as twenty of them, hence the weight.
"""


@dataclass(frozen=True, kw_only=True)
class MacrostepLimits:
    """What one macrostep (one public call of the core) may spend; None is unbounded."""

    steps: int | None = 10_000_000
    """Evaluation work units across every expression, script, write and node of the call."""
    effects: int | None = 100_000
    """Effects the call may return."""
    internal_events: int | None = 10_000
    """Events the internal queue may hold at once."""
    output_bytes: int | None = 64 * 1024 * 1024
    """Written-out size of the values the call hands out (send data, logs, invoke params)."""
    datamodel_bytes: int | None = 16 * 1024 * 1024
    """Written-out size of the datamodel (JSON text length), checked on every write."""

    def __post_init__(self) -> None:
        for name in FIELDS:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or not 1 <= value <= MAX_LIMIT):
                raise ValueError(f"{name} must be an integer in 1..{MAX_LIMIT} or None")
        # The meter's figures, worked out once (every call of the core starts a meter), with
        # a number never reached standing in for None.
        for name, value in (
            ("start_steps", self.steps),
            ("start_output", self.output_bytes),
            ("max_effects", self.effects),
            ("max_queue", self.internal_events),
            ("cap", self.datamodel_bytes),
        ):
            object.__setattr__(self, name, _NO_LIMIT if value is None else value)

    start_steps: int = field(init=False, repr=False, compare=False)
    start_output: int = field(init=False, repr=False, compare=False)
    max_effects: int = field(init=False, repr=False, compare=False)
    max_queue: int = field(init=False, repr=False, compare=False)
    cap: int = field(init=False, repr=False, compare=False)
    """(derived) The limits as numbers, a number never reached standing in for None."""


FIELDS: Final = ("steps", "effects", "internal_events", "output_bytes", "datamodel_bytes")
"""The names of ``MacrostepLimits``' fields, in declaration order."""

DEFAULT_LIMITS: Final = MacrostepLimits()
"""Generous limits: every W3C test and ordinary chart stays far below them."""

UNBOUNDED: Final = MacrostepLimits(
    steps=None, effects=None, internal_events=None, output_bytes=None, datamodel_bytes=None
)
"""No limit at all (literal spec behaviour); positions with it load only when asked."""


class Budget:
    """The meter of one call: what remains of each per-call limit.

    A datamodel may read ``steps`` (the remaining allowance) to bound an evaluation and must
    call ``spend`` with what the evaluation cost, whether it succeeded or failed. Overspending
    is allowed (the evaluation that crosses the line finishes failing); ``exhausted`` then
    names the budget that ran out, and the core ends the macrostep. A datamodel whose
    expressions may write variables as a side effect (ECMAScript) hands each such write to
    ``admit`` (when set) before applying it: it raises ``ValueRefused`` for a value the
    datamodel cap or the storable-value rules refuse.
    """

    __slots__ = ("admit", "exhausted", "limits", "output", "steps")

    limits: MacrostepLimits
    steps: int
    """Remaining evaluation steps (negative once overspent)."""
    output: int
    """Remaining output bytes."""
    exhausted: Reason | None
    """The budget that ran out, once one has."""

    def __init__(self, limits: MacrostepLimits) -> None:
        self.limits = limits
        self.steps = limits.start_steps
        self.output = limits.start_output
        self.exhausted = None
        self.admit: Callable[[WriteResult], None] | None = None

    def spend(self, units: int) -> None:
        """Take ``units`` steps off the allowance (marking the budget exhausted past zero)."""
        self.steps -= units
        if self.steps < 0 and self.exhausted is None:
            self.exhausted = "steps"

    def limit_of(self, reason: Reason) -> int:
        """The configured limit behind ``reason`` (0 when unbounded or for rounds)."""
        if reason == "rounds":
            return 0
        value: int | None = getattr(self.limits, reason)
        return 0 if value is None else value
