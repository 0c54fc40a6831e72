"""Rows in and out: what we write is checked before it is stored, what we read is checked
before it is used (storage is as untrusted as a caller).

The column order is ``sql/execution_columns.sql``'s; a locked read adds the position's
size and the position (None when it is over the bound, so it never crossed the wire), the
position's counters as the row records them, and the armed list's size and text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, NoReturn, cast

from statifier._slots import builder
from statifier.values import read_json

from ._errors import CorruptExecution, InvalidArgument
from ._limits import MAX_ID_LENGTH, MAX_KEY_LENGTH, Limits
from ._records import STATUSES, Execution, ExecutionStatus, ParentLink

COLUMN_COUNT: Final = 18
"""Columns of ``execution_columns.sql``."""


# -- checking what callers give us -------------------------------------------------------


def check_text(value: Any, what: str, limit: int) -> str:
    """A non-empty string of at most ``limit`` characters, printable, without whitespace."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{what} must be a non-empty string, not {value!r}")
    if len(value) > limit:
        raise InvalidArgument(f"{what} is {len(value)} characters, over the {limit} limit")
    # A printable string's only possible whitespace is the ASCII space: every other
    # whitespace character is a control character or a separator, none printable.
    if not value.isprintable() or " " in value:
        raise InvalidArgument(f"{what} {value!r} has whitespace or unprintable characters")
    return value


def check_execution_id(value: Any) -> str:
    """An execution id: 1 to ``MAX_ID_LENGTH`` printable characters, no whitespace."""
    return check_text(value, "execution id", MAX_ID_LENGTH)


def check_key(value: Any) -> str:
    """A step key: 1 to ``MAX_KEY_LENGTH`` printable characters, no whitespace."""
    return check_text(value, "step key", MAX_KEY_LENGTH)


def derived_id(prefix: str, *parts: str) -> str:
    """An id derived from ``parts``: ``prefix`` and 20 hex digits of their digest (each part
    length-prefixed, so no two lists of parts share one). Any delivery of a start that
    derives it again finds the execution the first one created."""
    digest = hashlib.blake2b(digest_size=10)
    for part in parts:
        encoded = part.encode("utf-8")
        digest.update(len(encoded).to_bytes(4, "big") + encoded)
    return f"{prefix}{digest.hexdigest()}"


def encode_json_object(value: Any, what: str, limit: int) -> str:
    """``value`` (a mapping with string keys) as compact JSON text of at most ``limit`` bytes.

    Refuses what PostgreSQL's jsonb or JSON itself cannot hold exactly: non-string keys,
    NaN and infinities, NUL characters and lone surrogates, values that are not JSON.
    """
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{what} must be a mapping, not {type(value).__name__}")
    _check_keys(value, what, 0)
    try:
        text = json.dumps(
            dict(value), separators=(",", ":"), allow_nan=False, sort_keys=True, ensure_ascii=False
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{what} is not a JSON object: {exc}") from None
    if "\\u0000" in text:
        raise InvalidArgument(f"{what} holds a NUL character, which jsonb cannot store")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument(f"{what} holds a lone surrogate, which jsonb cannot store") from None
    if size > limit:
        raise InvalidArgument(f"{what} is {size} bytes of JSON, over the {limit} limit")
    return text


MAX_JSON_DEPTH: Final = 64
"""Deepest nesting of lists and objects accepted in metadata."""


def _check_keys(value: Any, what: str, depth: int) -> None:
    """Every object key is a string (``json`` would quietly turn ``1`` into ``"1"``)."""
    if depth > MAX_JSON_DEPTH:
        raise InvalidArgument(f"{what} is nested deeper than {MAX_JSON_DEPTH} levels")
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidArgument(f"{what} has a key that is not a string: {key!r}")
            _check_keys(item, what, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_keys(item, what, depth + 1)


# -- decoding what storage gives us ------------------------------------------------------


def decode_execution(row: tuple[Any, ...], limits: Limits) -> Execution:
    """An ``Execution`` from the first ``COLUMN_COUNT`` columns; ``CorruptExecution`` if bad."""
    execution_id = row[0]
    if not isinstance(execution_id, str):
        raise CorruptExecution(repr(execution_id), "the id is not text")
    (
        _,
        identity,
        name,
        version,
        status,
        metadata_text,
        metadata_size,
        parent_id,
        parent_invoke_id,
        child_index,
        failure_text,
        failure_size,
        outcome_text,
        outcome_size,
        step_count,
        created_at,
        updated_at,
        history_seq,
    ) = row[:COLUMN_COUNT]

    def corrupt(message: str) -> CorruptExecution:
        return CorruptExecution(execution_id, message)

    if not isinstance(identity, str) or not identity:
        raise corrupt("the chart identity is missing")
    if not all(isinstance(v, str | None) for v in (name, version, parent_id, parent_invoke_id)):
        raise corrupt("a text column holds something else")
    if status not in STATUSES:
        raise corrupt(f"unknown status {status!r}")
    metadata = decode_json_object(
        metadata_text, metadata_size, "metadata", limits.max_metadata_bytes, corrupt
    )
    if metadata is None:
        raise corrupt("the metadata is missing")
    failure = decode_json_object(
        failure_text, failure_size, "failure", limits.max_metadata_bytes, corrupt
    )
    outcome = decode_json_object(
        outcome_text, outcome_size, "outcome", limits.max_position_bytes, corrupt
    )
    parent: ParentLink | None = None
    if parent_id is not None:
        if parent_invoke_id is None or not isinstance(child_index, int | None):
            raise corrupt("the parent link is incomplete")
        parent = ParentLink(parent_id, parent_invoke_id, child_index)
    if isinstance(step_count, bool) or not isinstance(step_count, int) or step_count < 0:
        raise corrupt(f"step_count {step_count!r} is not a count")
    if isinstance(history_seq, bool) or not isinstance(history_seq, int) or history_seq < 0:
        raise corrupt(f"history_seq {history_seq!r} is not a count")
    if not isinstance(created_at, datetime) or not isinstance(updated_at, datetime):
        raise corrupt("a timestamp is missing")
    return execution_record(
        execution_id,
        identity,
        name,
        version,
        cast(ExecutionStatus, status),
        metadata,
        parent,
        failure,
        outcome,
        step_count,
        created_at,
        updated_at,
        history_seq,
    )


def decode_stored(
    execution: Execution,
    row: tuple[Any, ...],
    failure: str | None,
    outcome: str | None,
    limits: Limits,
) -> Execution:
    """``execution`` as a store changed it: ``row`` is a row of ``store_executions.sql``
    (id, status, step count, update time, history sequence), ``failure`` and ``outcome``
    the JSON texts the store wrote. The other columns are as ``execution`` read them: the
    row stayed locked from that read (or insert) to the store."""

    def corrupt(message: str) -> CorruptExecution:
        return CorruptExecution(execution.id, message)

    execution_id, status, step_count, updated_at, history_seq = row[:5]
    if execution_id != execution.id:
        raise corrupt(f"the stored row answers to {execution_id!r}")
    if status not in STATUSES:
        raise corrupt(f"unknown status {status!r}")
    for name, count in (("step_count", step_count), ("history_seq", history_seq)):
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise corrupt(f"{name} {count!r} is not a count")
    if not isinstance(updated_at, datetime):
        raise corrupt("a timestamp is missing")
    # Built whole, not by ``dataclasses.replace``, which reads the fields anew each call.
    return execution_record(
        execution.id,
        execution.chart_identity,
        execution.chart_name,
        execution.chart_version,
        cast(ExecutionStatus, status),
        execution.metadata,
        execution.parent,
        decode_json_object(failure, None, "failure", limits.max_metadata_bytes, corrupt),
        decode_json_object(outcome, None, "outcome", limits.max_position_bytes, corrupt),
        step_count,
        execution.created_at,
        updated_at,
        history_seq,
    )


_ExecutionBuilder: Final = builder(Execution)


def execution_record(
    execution_id: str,
    chart_identity: str,
    chart_name: str | None,
    chart_version: str | None,
    status: ExecutionStatus,
    metadata: Mapping[str, Any],
    parent: ParentLink | None,
    failure: Mapping[str, Any] | None,
    outcome: Mapping[str, Any] | None,
    step_count: int,
    created_at: datetime,
    updated_at: datetime,
    history_seq: int,
) -> Execution:
    """``Execution(...)`` of these fields, built fast (``statifier._slots``): a worker
    reads one and stores one at every step, and a frozen dataclass's ``__init__`` stores
    each of its 13 fields through ``object.__setattr__``."""
    record = _ExecutionBuilder()
    record.id = execution_id
    record.chart_identity = chart_identity
    record.chart_name = chart_name
    record.chart_version = chart_version
    record.status = status
    record.metadata = metadata
    record.parent = parent
    record.failure = failure
    record.outcome = outcome
    record.step_count = step_count
    record.created_at = created_at
    record.updated_at = updated_at
    record.history_seq = history_seq
    record.__class__ = Execution
    built: Execution = record
    return built


@dataclass(frozen=True, slots=True)
class StoredPosition:
    """A stored position with what its row records beside it.

    ``counters`` are the ``(macrostep, round)`` the row says its position was stored at
    (None on rows stored before rows kept them); ``armed`` is the text of the armed list
    (None: the row has none, see ``_armed``).
    """

    blob: bytes
    counters: tuple[int, int] | None
    armed: str | None


_StoredPositionBuilder: Final = builder(StoredPosition)


def decode_position(row: tuple[Any, ...], execution_id: str, limits: Limits) -> StoredPosition:
    """The position after the execution columns, within ``max_position_bytes``, with its
    counters and the armed list (also within that bound)."""
    size, blob, macrostep, rounds, armed_size, armed = row[COLUMN_COUNT : COLUMN_COUNT + 6]
    bound = limits.max_position_bytes
    if blob is None:
        raise CorruptExecution(
            execution_id, f"the stored position is {size} bytes, over the {bound} limit"
        )
    counters: tuple[int, int] | None = None
    if macrostep is not None or rounds is not None:
        if not all(isinstance(n, int) and n >= 0 for n in (macrostep, rounds)):
            raise CorruptExecution(execution_id, "the position's counters are incomplete")
        counters = (macrostep, rounds)
    if armed is None and armed_size is not None:
        raise CorruptExecution(
            execution_id, f"the armed list is {armed_size} bytes, over the {bound} limit"
        )
    if armed is not None and not isinstance(armed, str):
        raise CorruptExecution(execution_id, "the armed list is not text")
    stored = _StoredPositionBuilder()  # ``StoredPosition(...)``, built fast: one a step
    stored.blob = bytes(blob)
    stored.counters = counters
    stored.armed = armed
    stored.__class__ = StoredPosition
    built: StoredPosition = stored
    return built


def decode_json_object(
    text: Any, size: Any, what: str, limit: int, corrupt: Any
) -> dict[str, Any] | None:
    """A JSON object read from storage as text (None for SQL null), or ``corrupt(message)``
    raised: over ``limit`` (the text was not transferred, ``size`` says how large it is),
    not text, not JSON, not an object."""
    if text is None:
        if size is not None:
            raise corrupt(f"the {what} is {size} bytes, over the {limit} limit")
        return None
    if not isinstance(text, str):
        raise corrupt(f"the {what} is not text")
    try:
        value = read_json(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        raise corrupt(f"the {what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise corrupt(f"the {what} is not a JSON object")
    return value


def _no_constant(name: str) -> NoReturn:
    # jsonb never produces NaN or Infinity; text that does was not written by PostgreSQL.
    raise ValueError(f"{name} is not JSON")
