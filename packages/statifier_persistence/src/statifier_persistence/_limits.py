"""``Limits``: the bounds on everything a chart, a caller or storage controls.

Every value read back from PostgreSQL is checked against these before it is used, and
every value written is checked before it is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Final

from statifier import DEFAULT_MAX_MACROSTEP_ROUNDS
from statifier.runtime.invoke import DEFAULT_TREE_DEPTH, DEFAULT_TREE_SESSIONS, TreeLimits

from ._errors import InvalidArgument

MAX_KEY_LENGTH: Final = 200
"""Longest step key, in characters (a job id, or a caller's idempotency key)."""

MAX_ID_LENGTH: Final = 200
"""Longest execution id, in characters."""

MAX_IDENTITY_LENGTH: Final = 1024
"""Longest chart identity (``sha256:<hex>`` plus the chart's name and version)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds applied by ``Executions``; each must be a positive integer.

    ``max_position_bytes``: a stored position, on write and on load (a larger one on load
    is ``CorruptExecution``, on write ``PositionTooLarge``).
    ``max_metadata_bytes``: an execution's metadata as JSON text, on write and on load.
    ``max_page_size``: the most executions one ``list`` call returns.
    ``max_cached_charts``: compiled machines kept in this process, by chart identity.
    ``max_chart_source_bytes``: a registered chart's source (and its resolved ``src``
    documents), on register and on load.
    ``max_self_sends``: immediate ``<send>``s to the execution itself processed within one
    step; a chart that keeps sending itself events beyond it is stopped as ``failed``.
    ``max_macrostep_rounds``: the core's round budget for each macrostep (exhausting it
    makes the execution ``failed``).
    ``max_armed_sends``: delayed sends an execution may have armed (stored, not yet fired
    or cancelled) at once; one more is refused and the chart hears ``error.communication``.
    ``max_invoke_depth`` and ``max_tree_executions``: how deep a tree of charts invoked as
    child executions (``<invoke type="scxml">``) may nest below its top, and how many of
    its executions may be live at once, the top included (the defaults are live sessions'
    ``statifier.runtime.invoke.TreeLimits``); a child past either does not start.
    ``max_pending_messages``: messages waiting in one execution's mailbox (from its parent
    or its invoked children); one more is refused and its sender hears
    ``error.communication``.
    ``max_posts``: BasicHTTP sends one step of an execution may make (each stored by the
    executor as a POST job); one more is refused and the chart hears
    ``error.communication``.
    """

    max_position_bytes: int = 8 * 1024 * 1024
    max_metadata_bytes: int = 64 * 1024
    max_page_size: int = 1000
    max_cached_charts: int = 64
    max_chart_source_bytes: int = 4 * 1024 * 1024
    max_self_sends: int = 1000
    max_macrostep_rounds: int = DEFAULT_MAX_MACROSTEP_ROUNDS
    max_armed_sends: int = 10_000
    max_invoke_depth: int = DEFAULT_TREE_DEPTH
    max_tree_executions: int = DEFAULT_TREE_SESSIONS
    max_pending_messages: int = 10_000
    max_posts: int = 100

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{field.name} must be a positive integer, not {value!r}")

    @property
    def tree(self) -> TreeLimits:
        """The bounds of a tree of invoked charts, as live sessions spell them."""
        return TreeLimits(depth=self.max_invoke_depth, sessions=self.max_tree_executions)
