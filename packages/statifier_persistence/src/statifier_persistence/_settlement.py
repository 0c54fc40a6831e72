"""Settling fan-outs: N child executions answer their parent's invocation once.

A fan-out is one generation of a parent's invocation answered by N child executions
(``statifier_fan_outs``, opened by the first child start: ``_children``). Here:

* ``after_store``: in the transaction where a fan-out child first becomes terminal
  (completed, failed or cancelled), count it, once (its ``statifier_fan_out_children`` row
  is marked), under the fan-out's row lock: children finishing at once on different
  workers are counted one at a time. The count that decides the answer (every child
  finished; under ``first_error``, the first failure) settles the fan-out and asks the
  executor, in the same transaction, for the durable work that steps the answer into the
  parent (``settle_fan_out``) and, when children are still running after a failure, for
  the work that cancels them (``cancel_children``).
* ``abandon``: when the parent stops the invocation (it left the invoking state, or was
  cancelled), every open fan-out of it is abandoned in the parent's transaction, and its
  children are cancelled by the executor's durable work, outside it. No transaction locks
  a parent and its children together, so there is no lock cycle between them.
* ``answer``: the settled answer, built from the children's rows when it is delivered.

A child "fails" when it ends ``failed`` or ``cancelled``, or completes in one of the
fan-out's ``failed_states`` (top-level final states the parent named as failures).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, runtime_checkable

from psycopg import AsyncConnection
from statifier.core import planner
from statifier.core.events import Event

from ._errors import CorruptExecution, InvalidArgument
from ._limits import Limits
from ._pins import RevisionPins
from ._records import TERMINAL, Execution, ExecutionStatus
from ._sql import statement

logger = logging.getLogger("statifier_persistence")

Policy = Literal["all", "first_error"]
"""How a fan-out settles: ``all`` waits for every child; ``first_error`` answers with the
first failure and cancels the children still running."""

POLICIES: Final[tuple[Policy, ...]] = ("all", "first_error")

MAX_FAN_OUT_CHILDREN: Final = 10_000
"""The most children one fan-out may have."""

MAX_DETAILED_FAILURES: Final = 5
"""Failed children named in a failure's ``detail`` (all are in its ``failed`` list)."""

MAX_REASON_CHARS: Final = 200
"""The longest failure reason of a child quoted in a ``detail``."""


@dataclass(frozen=True, slots=True)
class FanOutKey:
    """One fan-out: the parent execution, its invocation, and the invocation's generation
    (the macrostep that started it: a re-entered invoking state starts a new fan-out)."""

    parent_id: str
    invoke_id: str
    generation: int


@runtime_checkable
class FanOutExecutor(Protocol):
    """What an ``EffectExecutor`` implements besides to run fan-outs (``statifier_oban``'s
    does). Both calls come inside a transaction (``conn``): what they store commits or
    rolls back with it. Neither may step an execution itself.
    """

    async def settle_fan_out(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> None:
        """Store the durable work that steps the settled answer into the parent: the event
        ``Executions.fan_out_answer(fan_out)`` builds, stepped through ``live_answer`` with
        a key of its own (at-least-once work, applied once)."""

    async def cancel_children(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> None:
        """Store the durable work that cancels the fan-out's unfinished children
        (``Executions.unfinished_children``, then ``Executions.cancel`` each)."""

    async def superseded(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> bool:
        """Whether the parent started the invocation again after this generation (it left
        the invoking state and re-entered it, under the same invoke id): the live
        invocation is another one, and this fan-out's children are not needed."""


FanOutState = Literal["open", "settled", "abandoned"]
"""Where a fan-out stands: its answer is not decided yet, decided, or never to be."""


@dataclass(frozen=True, slots=True)
class FanOut:
    """A fan-out as it stands (``Executions.fan_outs``): ``finished`` of ``count`` children
    finished; ``chart_identity`` is the children's chart revision."""

    key: FanOutKey
    count: int
    finished: int
    policy: Policy
    state: FanOutState
    chart_identity: str


MAX_LISTED_FAN_OUTS: Final = 100
"""The most fan-outs ``Executions.fan_outs`` lists for one parent."""


class FanOutPins(RevisionPins):
    """The pin source of fan-outs (asked on every retirement, beside ``ExecutionPins``):
    an open fan-out still creates children of its chart revision, so it pins it
    (``{"open": n}``)."""

    name = "fan_outs"
    kind = "open"
    count_statement = "count_fan_out_pins"


@dataclass(frozen=True, slots=True)
class _Result:
    """One child's row of a fan-out's results."""

    index: int
    execution_id: str
    status: str | None
    failed: bool | None
    donedata: Any
    reason: str | None

    def describe(self) -> str:
        """The child's index and how it failed, for a ``detail``."""
        if self.status == "completed":
            return f"{self.index} (completed in a failed state)"
        if self.reason is not None:
            return f"{self.index} ({self.status}: {self.reason})"
        return f"{self.index} ({self.status})"


class Settlement:
    """Counts finishing children, settles and abandons fan-outs; see the module docstring."""

    def __init__(self, prefix: str, limits: Limits, executor: object) -> None:
        self._prefix = prefix
        self._limits = limits
        self.executor = executor if isinstance(executor, FanOutExecutor) else None
        """The executor, if it runs fan-outs (else None: no fan-out can exist)."""

    def require_executor(self) -> FanOutExecutor:
        """The executor; ``InvalidArgument`` if it cannot run fan-outs."""
        if self.executor is None:
            raise InvalidArgument(
                "the executor does not run fan-outs (it implements no FanOutExecutor)"
            )
        return self.executor

    async def after_store(
        self, conn: AsyncConnection[Any], before: ExecutionStatus, stored: Execution
    ) -> None:
        """Count ``stored`` if it is a fan-out child that just became terminal."""
        parent = stored.parent
        if parent is None or parent.index is None:
            return
        if before in TERMINAL or stored.status not in TERMINAL:
            return
        await self._child_finished(conn, stored)

    async def _child_finished(self, conn: AsyncConnection[Any], child: Execution) -> None:
        cursor = await conn.execute(
            statement("lock_finishing_child", self._prefix), {"child_id": child.id}
        )
        row = await cursor.fetchone()
        if row is None:  # not a fan-out child, or counted already
            return
        parent_id, invoke_id, generation, index, count, policy, failed_states, finished, state = row
        if policy not in POLICIES or not isinstance(failed_states, list):
            raise CorruptExecution(parent_id, f"fan-out {invoke_id!r} has an invalid policy")
        failed = child.status != "completed" or _ended_in(child, failed_states)
        finished += 1
        settles = state == "open" and (finished == count or (failed and policy == "first_error"))
        params = {
            "child_id": child.id,
            "status": child.status,
            "failed": failed,
            "state": "settled" if settles else state,
            "failed_index": index if settles and failed and policy == "first_error" else None,
        }
        await conn.execute(statement("finish_fan_out_child", self._prefix), params)
        if not settles:
            return
        executor = self.require_executor()
        key = FanOutKey(parent_id, invoke_id, generation)
        await executor.settle_fan_out(conn, key)
        if finished < count:
            await executor.cancel_children(conn, key)

    async def abandon(self, conn: AsyncConnection[Any], parent_id: str, invoke_id: str) -> None:
        """The parent stopped ``invoke_id``: abandon its open fan-outs, cancel their children."""
        if self.executor is None:
            return
        cursor = await conn.execute(
            statement("abandon_fan_outs", self._prefix),
            {"parent_id": parent_id, "invoke_id": invoke_id},
        )
        for (generation,) in await cursor.fetchall():
            await self.executor.cancel_children(conn, FanOutKey(parent_id, invoke_id, generation))

    async def fan_outs(self, conn: AsyncConnection[Any], parent_id: str) -> list[FanOut]:
        """The parent's fan-outs, oldest generation first (at most ``MAX_LISTED_FAN_OUTS``)."""
        cursor = await conn.execute(
            statement("list_fan_outs", self._prefix),
            {"parent_id": parent_id, "limit": MAX_LISTED_FAN_OUTS},
        )
        found = []
        for (
            invoke_id,
            generation,
            count,
            finished,
            policy,
            state,
            identity,
        ) in await cursor.fetchall():
            if policy not in POLICIES or state not in ("open", "settled", "abandoned"):
                raise CorruptExecution(parent_id, f"fan-out {invoke_id!r} has an invalid row")
            key = FanOutKey(parent_id, invoke_id, generation)
            found.append(FanOut(key, count, finished, policy, state, identity))
        return found

    async def unfinished_children(
        self, conn: AsyncConnection[Any], fan_out: FanOutKey
    ) -> list[str]:
        """The ids of the fan-out's children that have not finished, in index order."""
        cursor = await conn.execute(
            statement("unfinished_children", self._prefix),
            {**_key_params(fan_out), "limit": MAX_FAN_OUT_CHILDREN},
        )
        return [row[0] for row in await cursor.fetchall()]

    async def answer(self, conn: AsyncConnection[Any], fan_out: FanOutKey) -> Event | None:
        """The settled fan-out's answer event for the parent (None: it is not settled)."""
        cursor = await conn.execute(
            statement("select_fan_out", self._prefix),
            {**_key_params(fan_out), "max_context": self._limits.max_metadata_bytes},
        )
        row = await cursor.fetchone()
        if row is None or row[0] != "settled":
            return None
        _, policy, count, failed_index, context_size, context_text = row
        caller_context = _caller_context(fan_out, context_size, context_text)
        results = await self._results(conn, fan_out, count)
        if isinstance(results, int):
            failure = {
                "reason": "answer_too_large",
                "attempts": 1,
                "detail": f"the children's donedata is {results} bytes, over the "
                f"{self._limits.max_position_bytes} limit of a position",
            }
            return _failed(fan_out, failure, caller_context)
        if policy == "first_error" and failed_index is not None:
            # The first failure can come before every child exists: only its row counts.
            culprit = next((result for result in results if result.index == failed_index), None)
            if culprit is None:
                raise CorruptExecution(
                    fan_out.parent_id, f"fan-out {fan_out.invoke_id!r} lost its failed child"
                )
            failure = {
                "reason": "child_failed",
                "attempts": 1,
                "detail": f"child {culprit.describe()} of {count} failed",
                "index": culprit.index,
                "execution_id": culprit.execution_id,
                "data": culprit.donedata,
            }
            return _failed(fan_out, failure, caller_context)
        finished = [result.index for result in results if result.status is not None]
        if len(finished) != count or any(n != index for n, index in enumerate(finished)):
            raise CorruptExecution(
                fan_out.parent_id,
                f"fan-out {fan_out.invoke_id!r} settled, but not all of its {count} children"
                " finished",
            )
        failures = [result for result in results if result.failed]
        if failures:
            named = ", ".join(result.describe() for result in failures[:MAX_DETAILED_FAILURES])
            more = ", ..." if len(failures) > MAX_DETAILED_FAILURES else ""
            failure = {
                "reason": "children_failed",
                "attempts": 1,
                "detail": f"{len(failures)} of {count} children failed: {named}{more}",
                "failed": [result.index for result in failures],
                "results": [result.donedata for result in results],
            }
            return _failed(fan_out, failure, caller_context)
        data = [result.donedata for result in results]
        return planner.invocation_done(fan_out.invoke_id, data, caller_context=caller_context)

    async def _results(
        self, conn: AsyncConnection[Any], fan_out: FanOutKey, count: Any
    ) -> list[_Result] | int:
        """Every child's result in index order (children never created are missing), or
        the donedata's total size when it is over the position bound."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise CorruptExecution(fan_out.parent_id, f"fan-out {fan_out.invoke_id!r}: bad count")
        # The table's CHECK allows any positive count; a start never writes one past the
        # limit, so a larger one is a corrupt row, refused before it sizes anything.
        if count > MAX_FAN_OUT_CHILDREN:
            raise CorruptExecution(
                fan_out.parent_id,
                f"fan-out {fan_out.invoke_id!r} (generation {fan_out.generation}) counts"
                f" {count} children, over the {MAX_FAN_OUT_CHILDREN} limit",
            )
        cursor = await conn.execute(
            statement("fan_out_results", self._prefix),
            {
                **_key_params(fan_out),
                "max_bytes": self._limits.max_position_bytes,
                "max_reason": MAX_REASON_CHARS,
                "limit": count + 1,
            },
        )
        rows = await cursor.fetchall()
        if len(rows) > count:
            raise CorruptExecution(
                fan_out.parent_id, f"fan-out {fan_out.invoke_id!r} has over {count} children"
            )
        total = rows[0][4] if rows else None
        if total is not None and total > self._limits.max_position_bytes:
            return int(total)
        return [_result(row) for row in rows]


def _key_params(fan_out: FanOutKey) -> dict[str, Any]:
    return {
        "parent_id": fan_out.parent_id,
        "invoke_id": fan_out.invoke_id,
        "generation": fan_out.generation,
    }


def _ended_in(child: Execution, failed_states: Sequence[Any]) -> bool:
    """Whether the completed child's configuration at exit holds a failed state."""
    if not failed_states:
        return False
    outcome: Mapping[str, Any] = child.outcome or {}
    configuration = outcome.get("configuration")
    return isinstance(configuration, list) and any(s in failed_states for s in configuration)


def _result(row: Sequence[Any]) -> _Result:
    index, execution_id, status, failed, _, donedata_text, reason = row
    donedata = None
    if donedata_text is not None:
        try:
            donedata = json.loads(donedata_text)
        except ValueError as exc:
            raise CorruptExecution(execution_id, f"its donedata is not JSON: {exc}") from None
    return _Result(index, execution_id, status, failed, donedata, reason)


def _caller_context(fan_out: FanOutKey, size: Any, text: Any) -> Any:
    if text is None:
        if size is not None:
            logger.warning(
                "fan-out %r of %s: its caller context (%s bytes) is over the bound; dropped",
                fan_out.invoke_id,
                fan_out.parent_id,
                size,
                extra={"execution_id": fan_out.parent_id, "invoke_id": fan_out.invoke_id},
            )
        return None
    try:
        return json.loads(text)
    except ValueError:
        logger.warning(
            "fan-out %r of %s: its caller context is not JSON; dropped",
            fan_out.invoke_id,
            fan_out.parent_id,
            extra={"execution_id": fan_out.parent_id, "invoke_id": fan_out.invoke_id},
        )
        return None


def _failed(fan_out: FanOutKey, failure: dict[str, Any], caller_context: Any) -> Event:
    return planner.invocation_failed(fan_out.invoke_id, failure, caller_context=caller_context)
