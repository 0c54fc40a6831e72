"""The rows of BasicHTTP POST jobs: what ``ObanExecutor.post`` stores and ``PostWorker``
reads back (see ``_posts``). Rows are untrusted: every field is checked and bounded."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Final

from oban import Oban
from psycopg import AsyncConnection
from statifier import instrumentation
from statifier.basichttp import OutboundRequest
from statifier.values import brief

from .._errors import UndecodableRow
from .._names import META_TRACE
from ..rows import _fields
from ..rows._traced import carry
from ..store import _statements

MAX_BODY_TEXT: Final = 4 * (16 * 1024 * 1024 // 3 + 1)
"""The longest base64 body a row may hold (a 16 MiB body); the policy's bound is tighter."""


@dataclass(frozen=True, slots=True)
class PostRow:
    """A POST job's args, decoded: the execution (``scope``) and the request."""

    scope: str
    request: OutboundRequest


def encode(scope: str, request: OutboundRequest) -> dict[str, Any]:
    """The args of the job that makes ``request`` for execution ``scope``."""
    return {
        "scope": scope,
        "send_id": request.send_id,
        "url": request.url,
        "content_type": request.content_type,
        "body": base64.b64encode(request.body).decode("ascii"),
    }


def decode(args: object) -> PostRow:
    """A POST job's args (``UndecodableRow`` naming the field that is not what
    :func:`encode` writes)."""
    if not isinstance(args, dict):
        raise UndecodableRow(f"args must be an object, found {brief(args)}")
    body = args.get("body")
    if not isinstance(body, str) or len(body) > MAX_BODY_TEXT:
        raise UndecodableRow(f"body must be base64 text of a bounded size, found {brief(body)}")
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise UndecodableRow("body is not base64") from None
    request = OutboundRequest(
        url=_fields.string(args, "url"),
        content_type=_fields.string(args, "content_type"),
        body=raw,
        send_id=_fields.string(args, "send_id"),
    )
    return PostRow(_fields.string(args, "scope"), request)


def _meta() -> dict[str, Any]:
    """A POST job's meta: the trace context of the step that made the send, when tracing
    is on (the POST then continues that trace)."""
    tracer = instrumentation.current
    return carry({}, tracer) if tracer is not None else {}


def carried(job_meta: object) -> dict[str, str] | None:
    """The trace context a POST job's meta carries (None: none, or not text). Untrusted:
    the instrumentation reads only its trace-context entries, bounded."""
    found = job_meta.get(META_TRACE) if isinstance(job_meta, dict) else None
    if not isinstance(found, dict):
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        return None
    return found


async def store(
    conn: AsyncConnection[Any],
    oban: Oban,
    queue: str,
    scope: str,
    request: OutboundRequest,
    attempts: int,
) -> None:
    """A ``PostWorker`` job for ``request`` with ``attempts``, in ``conn``'s transaction."""
    async with _statements.connection(oban, conn) as db:
        await db.execute(
            _statements.statement(oban, "insert_post_job"),
            {
                "args": _statements.jsonb(encode(scope, request)),
                "meta": _statements.jsonb(_meta()),
                "queue": queue,
                "max_attempts": attempts,
                "channel": _statements.insert_channel(oban),
            },
        )
