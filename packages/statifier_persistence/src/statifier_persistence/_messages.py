"""Mailboxes: what a parent execution and the charts it invoked send each other.

A step of the sender writes the message into the receiver's mailbox
(``statifier_messages``) and asks the executor, in the same transaction, for the durable
work that delivers it (``MailboxExecutor.deliver_message``: an oban job). That work steps
the receiver (``Executions.receive``), and the receiver's step takes the oldest message
of its mailbox (deleting it) and applies it. So a message is applied once whoever
delivers it and however often, messages from one sender arrive in the order they were
sent (a ``<send>`` before the ``done.invoke``), and a crash anywhere leaves either the
message waiting with its job, or both gone with the step that applied it.

Kinds: ``to_parent`` (a child's ``<send target="#_parent">``), ``done`` (the child reached
a top-level final state; the body holds its donedata), ``to_child`` (the parent's
``<send target="#_<invokeid>">`` or an autoforwarded event) and ``cancel`` (the parent
left the invoking state). Bodies are JSON: an event as positions store it
(``statifier.core.position.event_payload``), bounded by ``Limits.max_position_bytes``; a
mailbox holds at most ``Limits.max_pending_messages``. What is read back is checked like
anything from storage.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, get_args, runtime_checkable

from psycopg import AsyncConnection
from statifier.core.events import Event
from statifier.core.position import (
    CorruptPosition,
    UnserializablePosition,
    event_from_payload,
    event_payload,
)
from statifier.values import ValueRefused, measure, parse_json

from ._limits import Limits
from ._sql import statement

logger = logging.getLogger("statifier_persistence")

MessageKind = Literal["to_parent", "done", "to_child", "cancel"]
"""What a message is (see the module docstring)."""

MESSAGE_KINDS: Final[frozenset[str]] = frozenset(get_args(MessageKind))

FROM_PARENT: Final[frozenset[str]] = frozenset({"to_child", "cancel"})
"""The kinds a parent sends its child (the others a child sends its parent)."""

NO_MESSAGE: Final = "no_message"
"""The reason ``Executions.receive`` declines when the mailbox is empty (another delivery
applied the message this one was stored for)."""

UNREADABLE: Final = "message_unreadable"
"""The reason a message that is not what a step writes is declined (and dropped)."""


@runtime_checkable
class MailboxExecutor(Protocol):
    """What an ``EffectExecutor`` implements besides to run charts invoked as child
    executions (``statifier_oban``'s does). Both calls come inside a step's transaction
    (``conn``): what they store commits or rolls back with it, and neither may step an
    execution itself."""

    async def deliver_message(self, conn: AsyncConnection[Any], execution_id: str) -> None:
        """Store the durable work that delivers a message just written to the mailbox of
        ``execution_id``: ``Executions.receive(execution_id, key=...)`` with a key of its
        own, run at least once."""

    async def drop_timers(
        self, conn: AsyncConnection[Any], execution_id: str, send_ids: Sequence[str]
    ) -> None:
        """Cancel the pending timers of these send ids: the execution was cancelled, and
        none of them can fire into it any more."""


@dataclass(frozen=True, slots=True)
class Message:
    """A message taken from a mailbox. ``event`` is set for ``to_parent`` and ``to_child``,
    ``data`` (the donedata) for ``done``; ``invoke_context`` is the caller context of the
    ``<invoke>`` that started the sender, when the sender is an invoked child. ``problem``
    says why a message is unusable (its kind is then None, its other fields empty)."""

    id: int
    sender_id: str
    invoke_id: str
    kind: MessageKind | None
    event: Event | None = None
    data: Any = None
    invoke_context: Any = None
    problem: str | None = None


class Mailbox:
    """Posts, takes and purges messages; see the module docstring."""

    def __init__(self, prefix: str, limits: Limits, executor: MailboxExecutor) -> None:
        self._prefix = prefix
        self._limits = limits
        self.executor = executor

    async def post(
        self,
        conn: AsyncConnection[Any],
        *,
        receiver: str,
        sender: str,
        invoke_id: str,
        kind: MessageKind,
        event: Event | None = None,
        data: Any = None,
    ) -> str | None:
        """Write a message for ``receiver`` and its delivery; None when written, else why it
        could not be (the sender hears ``error.communication``)."""
        if event is not None:
            try:
                body: Any = event_payload(event, "the event")
            except UnserializablePosition as exc:
                return str(exc)
        elif kind == "done":
            body = {"data": data}
        else:
            body = None
        text = None
        if body is not None:
            try:
                text = json.dumps(body, separators=(",", ":"), allow_nan=False)
            except (TypeError, ValueError, RecursionError) as exc:
                return f"the message is not JSON: {exc}"
            limit = self._limits.max_position_bytes
            if len(text.encode("utf-8", "surrogatepass")) > limit:
                return f"the message is over the {limit} byte limit"
            if "\\u0000" in text:
                return "the message holds a NUL character, which jsonb cannot store"
        cursor = await conn.execute(
            statement("post_message", self._prefix),
            {
                "receiver": receiver,
                "sender": sender,
                "invoke_id": invoke_id,
                "kind": kind,
                "body": text,
                "max_pending": self._limits.max_pending_messages,
            },
        )
        if await cursor.fetchone() is None:
            return (
                f"the mailbox of {receiver!r} holds {self._limits.max_pending_messages}"
                " messages already"
            )
        await self.executor.deliver_message(conn, receiver)
        return None

    async def take(self, conn: AsyncConnection[Any], receiver: str) -> Message | None:
        """The oldest message for ``receiver``, deleted (None: the mailbox is empty). Call
        it with the receiver's row locked."""
        limit = self._limits.max_position_bytes
        cursor = await conn.execute(
            statement("take_message", self._prefix),
            {
                "receiver": receiver,
                "max_body": limit,
                "max_context": self._limits.max_metadata_bytes,
            },
        )
        row = await cursor.fetchone()
        if row is None:
            return None
        message_id, sender_id, invoke_id, kind, size, text, context_text = row
        if kind not in MESSAGE_KINDS:
            return _unusable(row, f"its kind {kind!r} is not a message kind")
        if size is not None and text is None:
            return _unusable(row, f"it is {size} bytes, over the {limit} byte limit")
        try:
            body = None if text is None else parse_json(text, max_chars=limit)
            context = None if context_text is None else parse_json(context_text)
        except ValueRefused as exc:
            return _unusable(row, f"it is not JSON: {exc}")
        if kind == "cancel":
            return Message(message_id, sender_id, invoke_id, kind, invoke_context=context)
        if kind == "done":
            if not isinstance(body, dict) or set(body) != {"data"}:
                return _unusable(row, "a done message's body is not {data}")
            problem = _value_problem(body["data"], limit)
            if problem is not None:
                return _unusable(row, problem)
            return Message(
                message_id, sender_id, invoke_id, kind, data=body["data"], invoke_context=context
            )
        try:
            event = event_from_payload(body, "the message")
        except CorruptPosition as exc:
            return _unusable(row, str(exc))
        problem = _value_problem(event.data, limit) or _value_problem(event.caller_context, limit)
        if problem is not None:
            return _unusable(row, problem)
        return Message(message_id, sender_id, invoke_id, kind, event=event, invoke_context=context)

    async def holds_done(self, conn: AsyncConnection[Any], receiver: str, sender: str) -> bool:
        """Whether ``receiver``'s mailbox holds the ``done`` of its child ``sender``."""
        cursor = await conn.execute(
            statement("holds_done", self._prefix), {"receiver": receiver, "sender": sender}
        )
        row = await cursor.fetchone()
        return bool(row and row[0])

    async def purge(self, conn: AsyncConnection[Any], receiver: str) -> None:
        """Drop every message waiting for ``receiver`` (it finished, or is gone)."""
        await conn.execute(statement("purge_messages", self._prefix), {"receiver": receiver})


def _value_problem(value: Any, limit: int) -> str | None:
    try:
        measure(value, limit)
    except ValueRefused as exc:
        return f"it carries a value no chart may hold: {exc}"
    return None


def _unusable(row: Sequence[Any], problem: str) -> Message:
    message_id, sender_id, invoke_id = row[0], row[1], row[2]
    logger.warning(
        "message %s from %s (invocation %r) is unusable and dropped: %s",
        message_id,
        sender_id,
        invoke_id,
        problem,
    )
    return Message(message_id, str(sender_id), str(invoke_id), None, problem=problem)
