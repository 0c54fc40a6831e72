"""Host-opaque job fields, stored so that they round-trip exactly. Never pickle.

A value (timer ``data`` and ``caller_context``; invoke ``params``, ``content`` and
``caller_context``) must be JSON-like: str, int, float, bool, None, list, dict with str
keys. It is stored as its compact JSON *text* inside the args (``{"json": "..."}``), not
as a JSON value: PostgreSQL's jsonb would normalize numbers and reorder keys, and the
text does not. With an ``OpaqueCodec`` (e.g. encryption) the bytes go through the codec
and are stored base64-encoded with the codec's path beside them
(``{"codec": "pkg.mod:Codec", "b64": "..."}``): the tag on the row decides how to
decode, not the reader's config. None is stored as null and never reaches a codec.

Sizes are bounded both ways: a value whose text exceeds :data:`MAX_OPAQUE_BYTES` is refused
when it is stored, and a stored field is refused (the row is undecodable) when its payload
or its decoded bytes exceed it. The codec a row names must be registered in the reading
process (ADR 13); a row naming any other codec is undecodable, never retried.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
import math
from typing import Any, Final

from .._errors import CodecFailed, OpaqueValueError, ResolutionError, UndecodableRow
from ._plugins import OpaqueCodec, opaque_codec

MAX_OPAQUE_BYTES: Final = 8 * 1024 * 1024
"""The most bytes one opaque field may hold as UTF-8 JSON text (stored or decoded)."""

_MAX_STORED_CHARS: Final = (MAX_OPAQUE_BYTES // 3 + 1) * 4 + 1024
"""The longest stored text accepted: the cap in base64 plus room for a codec's framing."""


def _check(value: Any, path: str, depth: int = 0) -> None:
    if depth > 100:
        raise OpaqueValueError(f"{path}: nested more than 100 levels")
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OpaqueValueError(f"{path}: {value!r} cannot be stored exactly")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise OpaqueValueError(f"{path}: dict key {key!r} is not a string")
            _check(item, f"{path}[{key!r}]", depth + 1)
        return
    raise OpaqueValueError(
        f"{path}: a {type(value).__name__} is not JSON-like (str, int, float, bool, None, "
        "list, dict with str keys)"
    )


def encode_field(name: str, value: Any, codec: str | None) -> dict[str, str] | None:
    """The stored form of one opaque field; raises ``OpaqueValueError`` if it cannot be."""
    if value is None:
        return None
    _check(value, name)
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if len(text) > MAX_OPAQUE_BYTES:
        raise OpaqueValueError(f"{name}: {len(text)} characters is over {MAX_OPAQUE_BYTES} bytes")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: escaped, the text holds it exactly
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        size = len(text)
    if size > MAX_OPAQUE_BYTES:
        raise OpaqueValueError(f"{name}: {len(text)} characters is over {MAX_OPAQUE_BYTES} bytes")
    if codec is None:
        return {"json": text}
    try:
        encoder = opaque_codec(codec)
        encoded = encoder.encode(text.encode("utf-8"))
    except Exception as exc:
        raise OpaqueValueError(f"{name}: codec {codec!r} failed to encode: {exc}") from exc
    if not isinstance(encoded, bytes | bytearray):
        raise OpaqueValueError(f"{name}: codec {codec!r} returned {type(encoded).__name__}")
    return {"codec": codec, "b64": base64.b64encode(bytes(encoded)).decode("ascii")}


def decode_field(name: str, stored: Any) -> Any:  # noqa: C901 - each stored form and each bound, checked in turn
    """Decode a stored opaque field.

    Raises ``UndecodableRow`` for a corrupt field, an oversized one, or one naming a codec
    this process did not register (the job is cancelled at once), and ``CodecFailed`` when
    the registered codec fails (the job retries: a missing key is a deploy-shaped fault,
    not a corrupt row).
    """
    if stored is None:
        return None
    if not isinstance(stored, dict):
        raise UndecodableRow(f"{name}: expected an object, found {type(stored).__name__}")
    if set(stored) == {"json"} and isinstance(stored["json"], str):
        if len(stored["json"]) > MAX_OPAQUE_BYTES:
            raise UndecodableRow(f"{name}: stored text is over {MAX_OPAQUE_BYTES} bytes")
        return _loads(name, stored["json"])
    if set(stored) == {"codec", "b64"}:
        codec, encoded = stored["codec"], stored["b64"]
        if not isinstance(codec, str) or not isinstance(encoded, str):
            raise UndecodableRow(f"{name}: codec tag and payload must be strings")
        if len(encoded) > _MAX_STORED_CHARS:
            raise UndecodableRow(f"{name}: stored payload is over {MAX_OPAQUE_BYTES} bytes")
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise UndecodableRow(f"{name}: payload is not base64") from None
        try:
            decoder = opaque_codec(codec)
        except ResolutionError as exc:
            raise UndecodableRow(f"{name}: codec {codec!r} is refused: {exc}") from exc
        try:
            plain = _decode(decoder, raw)
        except Exception as exc:
            raise CodecFailed(f"{name}: codec {codec!r} failed to decode: {exc}") from exc
        if not isinstance(plain, bytes | bytearray):
            raise CodecFailed(f"{name}: codec {codec!r} returned {type(plain).__name__}")
        if len(plain) > MAX_OPAQUE_BYTES:
            raise UndecodableRow(f"{name}: decoded value is over {MAX_OPAQUE_BYTES} bytes")
        try:
            text = bytes(plain).decode("utf-8")
        except UnicodeDecodeError:
            raise UndecodableRow(f"{name}: decoded bytes are not UTF-8") from None
        return _loads(name, text)
    raise UndecodableRow(f"{name}: unknown stored form with keys {sorted(stored)}")


def _decode(decoder: OpaqueCodec, raw: bytes) -> object:
    """``decoder.decode(raw)``, given the cap when its ``decode`` takes ``max_size``."""
    try:
        takes_cap = "max_size" in inspect.signature(decoder.decode).parameters
    except (TypeError, ValueError):
        takes_cap = False
    if takes_cap:
        bounded: object = decoder.decode(raw, max_size=MAX_OPAQUE_BYTES)  # type: ignore[call-arg]
        return bounded
    return decoder.decode(raw)


def _loads(name: str, text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise UndecodableRow(f"{name}: stored text is not valid JSON") from None


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not allowed")
