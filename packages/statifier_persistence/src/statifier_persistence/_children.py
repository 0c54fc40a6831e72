"""Starting a fan-out's children: child ``index`` of ``count`` becomes an execution, once.

``start_child`` is one transaction:

1. lock the parent's row (its steps wait, and so does a stop of the invocation, which is
   what makes "the invocation is live" hold until this commits);
2. the parent must be active (parked: ``NeedsMigration``, try later) and the invocation
   live in its position, in this generation (not started again since), else no child is
   needed (``not_needed``: nobody would take its answer);
3. open the fan-out on its first start (its chart resolved by name to the newest
   registered revision, its count, policy and failed states fixed for every child), lock
   it, and check it is still open (a settled or abandoned fan-out needs no more children);
4. adopt the child an earlier delivery of this start created, or create it under the id
   :func:`child_execution_id` derives from the fan-out and the index, with its link row
   in ``statifier_fan_out_children``. A child that finishes in its initial drive is
   counted in this same transaction (``_settlement``).
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from psycopg import AsyncConnection

from ._db import transaction
from ._errors import (
    CorruptExecution,
    ExecutionNotFound,
    InvalidArgument,
    NeedsMigration,
)
from ._limits import MAX_ID_LENGTH, MAX_IDENTITY_LENGTH
from ._records import ParentLink
from ._rows import StoredPosition, check_execution_id, check_text, derived_id
from ._settlement import MAX_FAN_OUT_CHILDREN, POLICIES, FanOutKey, Policy
from ._sql import statement

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from statifier import Machine
    from statifier.core.state import MachineState

    from ._charts import Charts
    from ._limits import Limits
    from ._records import Execution
    from ._settlement import Settlement


class FanOutHost(Protocol):
    """What starting a child needs of ``Executions``, which passes itself (so that this
    module never imports the one that imports it)."""

    _charts: Charts
    _settlement: Settlement

    @property
    def pool(self) -> AsyncConnectionPool[Any] | None:
        """The pool calls without ``conn=`` use."""

    def _routes(self, execution: Execution) -> Container[str]:
        """The send targets the execution reaches besides itself and its invocations."""

    @property
    def prefix(self) -> str:
        """The schema of the tables."""

    @property
    def limits(self) -> Limits:
        """The bounds in force."""

    async def _locked(
        self,
        db: AsyncConnection[Any],
        execution_id: str,
        key: str | None = None,
        *,
        with_position: bool = True,
    ) -> tuple[Execution, StoredPosition, bool]:
        """The execution's row, locked, with its position."""

    async def _position(
        self,
        db: AsyncConnection[Any],
        execution: Execution,
        stored: StoredPosition,
        routes: Any,
    ) -> MachineState:
        """The execution's state from its position."""

    async def create(
        self,
        chart: Machine,
        *,
        execution_id: str | None = None,
        datamodel: Mapping[str, Any] | None = None,
        parent: ParentLink | None = None,
        caller_context: Any = None,
        conn: AsyncConnection[Any] | None = None,
    ) -> object:
        """Create an execution (see ``Executions.create``)."""


ChildOutcome = Literal["created", "adopted", "not_needed"]
"""What a child start did: created the child, found it created by an earlier delivery of
the same start, or created nothing because no one would take the child's answer."""

MAX_FAILED_STATES: Final = 64
"""The most state ids a fan-out may name as failures."""

CHILD_ID_PREFIX: Final = "fan_"
"""How every child execution id begins."""


@dataclass(frozen=True, slots=True)
class ChildStart:
    """What ``Executions.start_child`` did (see ``ChildOutcome``).

    ``execution_id`` is the child's id (derived: the same for every delivery of the
    start). ``reason`` says why a child was ``not_needed``: ``parent_not_found``,
    ``parent_<status>`` (completed, failed, cancelled), ``invocation_not_live``,
    ``invocation_superseded`` (the invoking state was left and entered again),
    ``fan_out_settled`` or ``fan_out_abandoned``.
    """

    outcome: ChildOutcome
    execution_id: str
    reason: str | None = None


def child_execution_id(fan_out: FanOutKey, index: int) -> str:
    """The id of child ``index`` of ``fan_out``: ``fan_<20 hex digits>_<index>``, the hex a
    digest of the parent's id, the invoke id and the generation (so the children of one
    fan-out share it, and any delivery of a start derives the same id)."""
    parts = (fan_out.parent_id, fan_out.invoke_id, str(fan_out.generation))
    return f"{derived_id(CHILD_ID_PREFIX, *parts)}_{index}"


def check_fan_out(fan_out: Any) -> FanOutKey:
    """``fan_out`` if it is a ``FanOutKey`` of valid ids and a generation >= 0."""
    if not isinstance(fan_out, FanOutKey):
        raise InvalidArgument(f"fan_out must be a FanOutKey, not {fan_out!r}")
    check_execution_id(fan_out.parent_id)
    check_text(fan_out.invoke_id, "invoke id", MAX_ID_LENGTH)
    generation = fan_out.generation
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
        raise InvalidArgument(f"a generation is an integer >= 0, not {generation!r}")
    return fan_out


def _check_position(index: Any, count: Any) -> None:
    for value, what in ((index, "index"), (count, "count")):
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgument(f"a child's {what} is an integer, not {value!r}")
    if not 1 <= count <= MAX_FAN_OUT_CHILDREN:
        raise InvalidArgument(f"a fan-out has 1 to {MAX_FAN_OUT_CHILDREN} children, not {count}")
    if not 0 <= index < count:
        raise InvalidArgument(f"index {index} is outside 0..{count - 1}")


def _check_failed_states(failed_states: Any) -> list[str]:
    if isinstance(failed_states, str) or not isinstance(failed_states, Sequence):
        raise InvalidArgument(f"failed_states must be a list of state ids, not {failed_states!r}")
    if len(failed_states) > MAX_FAILED_STATES:
        raise InvalidArgument(f"failed_states names more than {MAX_FAILED_STATES} states")
    return [check_text(state, "a failed state id", MAX_ID_LENGTH) for state in failed_states]


def _context_text(caller_context: Any, limit: int) -> str | None:
    if caller_context is None:
        return None
    try:
        text = json.dumps(caller_context, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(f"caller_context is not JSON: {exc}") from None
    if len(text.encode("utf-8")) > limit:
        raise InvalidArgument(f"caller_context is over the {limit} byte limit")
    return text


async def start_child(
    executions: FanOutHost,
    fan_out: FanOutKey,
    index: int,
    count: int,
    *,
    chart: str,
    policy: Policy,
    datamodel: Mapping[str, Any] | None,
    failed_states: Sequence[str],
    caller_context: Any,
    conn: AsyncConnection[Any] | None,
) -> ChildStart:
    """See ``Executions.start_child`` and the module docstring."""
    fan_out = check_fan_out(fan_out)
    _check_position(index, count)
    if policy not in POLICIES:
        raise InvalidArgument(f"policy must be one of {', '.join(POLICIES)}, not {policy!r}")
    check_text(chart, "chart name", MAX_IDENTITY_LENGTH)
    states = _check_failed_states(failed_states)
    context = _context_text(caller_context, executions.limits.max_metadata_bytes)
    executor = executions._settlement.require_executor()
    child_id = child_execution_id(fan_out, index)
    async with transaction(executions.pool, conn) as db:
        try:
            parent, persisted, _ = await executions._locked(db, fan_out.parent_id)
        except ExecutionNotFound:
            return ChildStart("not_needed", child_id, "parent_not_found")
        if parent.status == "needs_migration":
            raise NeedsMigration(parent)
        if parent.status != "active":
            return ChildStart("not_needed", child_id, f"parent_{parent.status}")
        routes = executions._routes(parent)
        state = await executions._position(db, parent, persisted, routes)
        if fan_out.invoke_id not in state.invocations.values():
            return ChildStart("not_needed", child_id, "invocation_not_live")
        if await executor.superseded(db, fan_out):
            return ChildStart("not_needed", child_id, "invocation_superseded")
        params: dict[str, Any] = {
            "parent_id": fan_out.parent_id,
            "invoke_id": fan_out.invoke_id,
            "generation": fan_out.generation,
        }
        found = await _locked_fan_out(db, executions, params)
        if found is None:
            identity = await executions._charts.latest(db, chart)
            await db.execute(
                statement("insert_fan_out", executions.prefix),
                {
                    **params,
                    "count": count,
                    "policy": policy,
                    "identity": identity,
                    "failed_states": states,
                    "caller_context": context,
                },
            )
            found = await _locked_fan_out(db, executions, params)
            assert found is not None  # noqa: S101 - inserted by this very transaction
        stored_count, stored_policy, identity, fan_out_state = found
        if (stored_count, stored_policy) != (count, policy):
            raise InvalidArgument(
                f"fan-out {fan_out.invoke_id!r} of {fan_out.parent_id!r} has {stored_count} "
                f"children under {stored_policy!r}; this start says {count} under {policy!r}"
            )
        if fan_out_state != "open":
            return ChildStart("not_needed", child_id, f"fan_out_{fan_out_state}")
        cursor = await db.execute(
            statement("select_fan_out_child", executions.prefix), {**params, "index": index}
        )
        existing = await cursor.fetchone()
        if existing is not None:
            if existing[0] != child_id:
                raise CorruptExecution(existing[0], f"it is not child {index}'s derived id")
            return ChildStart("adopted", child_id)
        await db.execute(
            statement("insert_fan_out_child", executions.prefix),
            {**params, "child_id": child_id, "index": index},
        )
        machine = await executions._charts.machine(db, identity, child_id)
        await executions.create(
            machine,
            execution_id=child_id,
            datamodel=datamodel,
            parent=ParentLink(fan_out.parent_id, fan_out.invoke_id, index),
            caller_context=caller_context,
            conn=db,
        )
    return ChildStart("created", child_id)


async def _locked_fan_out(
    db: AsyncConnection[Any], executions: FanOutHost, params: dict[str, Any]
) -> tuple[Any, ...] | None:
    cursor = await db.execute(statement("lock_fan_out", executions.prefix), params)
    return await cursor.fetchone()
