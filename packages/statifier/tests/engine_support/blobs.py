"""Position blobs taken apart and put back together, for tests that craft positions.

``payload`` reads a blob's payload (format 3: both lines; format 2: the object) as one
dict of members; ``body`` writes such a dict back as a format 3 or a format 2 payload
with the standard library's JSON (compact, sorted, ASCII: not what orjson writes, so
``loads`` reads it on its full path); ``reframe`` puts a payload under a blob's header
with a digest that matches it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from statifier import Machine
from statifier.core._payload import SHAPE_KEYS
from statifier.core.planner import io_processors

STANDARD = "standard_system_variables"
"""The format 3 values member that says the standard system variables are left out."""


def split(blob: bytes) -> tuple[list[bytes], bytes]:
    """The four header lines (without their newlines) and the payload."""
    lines = blob.split(b"\n", 4)
    return lines[:4], lines[4]


def payload(blob: bytes) -> dict[str, Any]:
    """Every member of ``blob``'s payload (format 3: both lines merged) in one dict."""
    members: dict[str, Any] = {}
    for line in split(blob)[1].split(b"\n"):
        decoded = json.loads(line)
        assert isinstance(decoded, dict)
        members.update(decoded)
    return members


def _text(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def body(members: dict[str, Any], version: int = 3) -> bytes:
    """``members`` as a payload: format 3 (the shape members on the first line, every
    other member on the second) or format 2 (one object)."""
    if version == 2:
        return _text(members)
    shape = {name: value for name, value in members.items() if name in SHAPE_KEYS}
    values = {name: value for name, value in members.items() if name not in SHAPE_KEYS}
    return _text(shape) + b"\n" + _text(values)


def format_2(members: dict[str, Any], machine: Machine) -> dict[str, Any]:
    """The format 2 members of a format 3 payload's ``members`` (of an execution of
    ``machine``): the standard system variables back in the datamodel."""
    members = dict(members)
    if members.pop(STANDARD):
        session_id = members["session_id"]
        members["datamodel"] = {
            **members["datamodel"],
            "_ioprocessors": io_processors(session_id),
            "_name": machine.name,
            "_sessionid": session_id,
        }
    return members


def reframe(
    blob: bytes, new_body: bytes, *, version: int | None = None, key: bytes | None = None
) -> bytes:
    """``blob``'s header (its version line replaced by ``version`` if given) over
    ``new_body``, with a plain digest, or a keyed one under ``key``."""
    header = split(blob)[0][:3]
    if version is not None:
        header[1] = str(version).encode("ascii")
    if key is None:
        digest = b"sha256:" + hashlib.sha256(new_body).hexdigest().encode("ascii")
    else:
        mac = hmac.new(key, b"\n".join(header) + b"\n", hashlib.sha256)
        mac.update(new_body)
        digest = b"hmac-sha256:" + mac.hexdigest().encode("ascii")
    return b"\n".join([*header, digest, new_body])
