"""Position blobs taken apart and put back together, for tests that craft positions.

``payload`` reads a blob's payload (formats 3 and 4: both lines; format 2: the object) as
one dict of members; ``body`` writes such a dict back as a format 4, 3 or 2 payload with
the standard library's JSON (compact, sorted, ASCII: not what orjson writes, so ``loads``
reads it on its full path); ``reframe`` puts a payload under a blob's header with a
digest that matches it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import zlib
from typing import Any

from statifier import Machine
from statifier.core._format3 import VALUE_ORDER
from statifier.core._payload import SHAPE_KEYS
from statifier.core.planner import io_processors

STANDARD = "standard_system_variables"
"""The format 3 and 4 values member that says the standard system variables are left out."""


def split(blob: bytes) -> tuple[list[bytes], bytes]:
    """The four header lines (without their newlines) and the payload."""
    lines = blob.split(b"\n", 4)
    return lines[:4], lines[4]


def payload(blob: bytes) -> dict[str, Any]:
    """Every member of ``blob``'s payload (formats 3 and 4: both lines merged; format 4's
    values array named by ``VALUE_ORDER``) in one dict."""
    members: dict[str, Any] = {}
    for line in split(blob)[1].split(b"\n"):
        decoded = json.loads(line)
        if isinstance(decoded, list):
            assert len(decoded) == len(VALUE_ORDER)
            decoded = dict(zip(VALUE_ORDER, decoded, strict=True))
        assert isinstance(decoded, dict)
        members.update(decoded)
    return members


def values_row(values: dict[str, Any]) -> list[Any]:
    """A values line's members as format 4's array (``VALUE_ORDER``): a member missing
    from ``values`` is left out (the array is short), one it does not name is added at
    the end (the array is long)."""
    known = [values[name] for name in VALUE_ORDER if name in values]
    return known + [value for name, value in values.items() if name not in VALUE_ORDER]


def _text(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def body(members: dict[str, Any], version: int = 4) -> bytes:
    """``members`` as a payload: format 4 (the shape members on the first line as an
    object, every other member on the second as ``values_row``'s array), format 3 (both
    lines objects) or format 2 (one object)."""
    if version == 2:
        return _text(members)
    shape = {name: value for name, value in members.items() if name in SHAPE_KEYS}
    values = {name: value for name, value in members.items() if name not in SHAPE_KEYS}
    return _text(shape) + b"\n" + _text(values_row(values) if version == 4 else values)


def format_2(members: dict[str, Any], machine: Machine) -> dict[str, Any]:
    """The format 2 members of a format 3 or 4 payload's ``members`` (of an execution of
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
    ``new_body``, with a plain digest (CRC-32 in format 4, SHA-256 before), or a keyed one
    under ``key``."""
    header = split(blob)[0][:3]
    if version is not None:
        header[1] = str(version).encode("ascii")
    if key is None and header[1] == b"4":
        digest = b"crc32:%08x" % zlib.crc32(new_body)
    elif key is None:
        digest = b"sha256:" + hashlib.sha256(new_body).hexdigest().encode("ascii")
    else:
        mac = hmac.new(key, b"\n".join(header) + b"\n", hashlib.sha256)
        mac.update(new_body)
        digest = b"hmac-sha256:" + mac.hexdigest().encode("ascii")
    return b"\n".join([*header, digest, new_body])
