"""The BasicHTTP Event I/O processor's messages (SCXML C.2, D.2): what a ``<send>`` POSTs,
and the event a POST to a session's location becomes. Pure: no I/O.

Outbound (``outbound``), by the send's data:

* no data, or an object whose values are all strings, numbers, booleans or null (what
  ``namelist`` and ``<param>`` make): a form (``application/x-www-form-urlencoded``),
  ``_scxmleventname`` (the send's event) first, then one field per name; a string is
  sent as it is, ``true``/``false`` for booleans, an empty value for null, numbers as
  JSON writes them;
* a string (a ``<content>`` text): the body, ``text/plain; charset=utf-8``;
* anything else (a list, a nested object, a number): JSON, ``application/json``.

A body other than a form cannot carry ``_scxmleventname``: it goes into the URL's query
instead. Inbound (``read_post``), the other way round: a form's fields, a JSON object's
members or a text body become ``_event.data``; ``_scxmleventname`` (from the form, the
JSON object or the query, once) names the event, ``HTTP.POST`` without one.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from statifier.core import planner
from statifier.core.events import MAX_NAME_LENGTH, Event
from statifier.values import ValueRefused, measure, parse_json

from ._errors import PostRejected

EVENT_NAME_FIELD: Final = "_scxmleventname"
"""The POST parameter that names the event (SCXML D.2)."""

FORM: Final = "application/x-www-form-urlencoded"
JSON_TYPE: Final = "application/json"
TEXT: Final = "text/plain; charset=utf-8"

MAX_FIELDS: Final = 1000
"""The most fields an inbound form may have."""

MAX_INBOUND_BYTES: Final = 65_536
"""The largest inbound body ``read_post`` reads, by default."""


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """An outbound BasicHTTP POST: the ``url`` (with ``_scxmleventname`` in its query when
    the body cannot carry it), the ``content_type`` and the ``body``; ``send_id`` is the
    send's, for the error a failure raises."""

    url: str
    content_type: str
    body: bytes
    send_id: str


@dataclass(frozen=True, slots=True)
class ReceivedPost:
    """What an inbound POST says: the event ``name`` (None: ``HTTP.POST``), its ``data``
    and the message as it arrived (``raw``); ``event()`` is the external event."""

    name: str | None
    data: Any
    raw: str

    def event(self) -> Event:
        """The external event the POST becomes (``planner.received_post``)."""
        return planner.received_post(self.name, self.data, self.raw)


# -- outbound ------------------------------------------------------------------------------


def outbound(post: planner.Post) -> OutboundRequest:
    """The POST of a BasicHTTP send (see the module docstring). Whether the host makes it
    is ``OutboundPolicy.check``'s to say."""
    effect = post.effect
    name = effect.event or None
    data = effect.data
    url = _without_fragment(post.url)
    if data is None or _flat_object(data):
        fields: dict[str, Any] = data or {}
        pairs = [(EVENT_NAME_FIELD, name)] if name and EVENT_NAME_FIELD not in fields else []
        pairs += [(key, _form_value(value)) for key, value in fields.items()]
        content_type, body = FORM, urlencode(pairs).encode("ascii")
    else:
        if name:
            url = _with_query(url, EVENT_NAME_FIELD, name)
        if isinstance(data, str):
            content_type, body = TEXT, data.encode("utf-8")
        else:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            content_type, body = JSON_TYPE, text.encode("utf-8")
    return OutboundRequest(url, content_type, body, effect.send_id)


def _flat_object(data: Any) -> bool:
    return isinstance(data, dict) and all(
        value is None or isinstance(value, str | int | float) for value in data.values()
    )


def _form_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # the engine stores none; a host's own data might
    return json.dumps(value)


def _without_fragment(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(fragment="")) if parts.fragment else url


def _with_query(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    extra = urlencode([(name, value)])
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit(parts._replace(query=query))


# -- inbound -------------------------------------------------------------------------------


def read_post(
    target: str,
    content_type: str | None,
    body: bytes,
    *,
    max_bytes: int = MAX_INBOUND_BYTES,
) -> ReceivedPost:
    """What a POST to a session's location says (see the module docstring): ``target``
    is the request target (path and query, as it arrived), ``content_type`` the header
    (None: absent), ``body`` the body. ``PostRejected`` with the HTTP status to answer:
    413 for a body over ``max_bytes``, 415 for a media type other than a form, JSON or
    text (or a charset other than UTF-8), 400 for a body that is not what its type says,
    an event name that is not one, or ``_scxmleventname`` given more than once."""
    if len(body) > max_bytes:
        raise PostRejected(413, f"the body is larger than {max_bytes} bytes")
    media, charset = _media_type(content_type)
    text = _decode(body, charset)
    names = [value for key, value in _query_fields(target) if key == EVENT_NAME_FIELD]
    data: Any = None
    if media == FORM:
        fields = _form_fields(text)
        names += [value for key, value in fields if key == EVENT_NAME_FIELD]
        data = _form_data(fields)
    elif media == JSON_TYPE or media.endswith("+json"):
        data = _json_data(text, max_bytes, names)
    elif media.startswith("text/"):
        data = text
    elif media or body:
        raise PostRejected(415, f"a BasicHTTP POST is a form, JSON or text, not {media[:100]!r}")
    if len(names) > 1:
        raise PostRejected(400, f"{EVENT_NAME_FIELD} is given {len(names)} times")
    name = _event_name(names[0]) if names else None
    shown = content_type if content_type is not None else "(none)"
    raw = f"POST {target} HTTP/1.1\r\nContent-Type: {shown}\r\n\r\n{text}"
    return ReceivedPost(name, data, raw)


def _media_type(content_type: str | None) -> tuple[str, str | None]:
    if content_type is None:
        return "", None
    media, *params = content_type.split(";")
    charset = None
    for param in params:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return media.strip().lower(), charset


def _decode(body: bytes, charset: str | None) -> str:
    if charset not in (None, "utf-8", "utf8", "us-ascii", "ascii"):
        raise PostRejected(415, f"the charset {charset[:40]!r} is not UTF-8")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise PostRejected(400, "the body is not UTF-8 text") from None


def _query_fields(target: str) -> list[tuple[str, str]]:
    _, _, query = target.partition("?")
    return _form_fields(query.split("#", 1)[0]) if query else []


def _form_fields(text: str) -> list[tuple[str, str]]:
    try:
        return parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=False,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FIELDS,
        )
    except (ValueError, UnicodeDecodeError) as exc:
        raise PostRejected(400, f"the form is malformed: {exc}") from None


def _form_data(fields: list[tuple[str, str]]) -> dict[str, Any] | None:
    """A form's fields but the event name, by name; a name given again collects its
    values in a list."""
    data: dict[str, Any] = {}
    for key, value in fields:
        if key == EVENT_NAME_FIELD:
            continue
        if key not in data:
            data[key] = value
        elif isinstance(data[key], list):
            data[key].append(value)
        else:
            data[key] = [data[key], value]
    return data or None


def _json_data(text: str, max_bytes: int, names: list[str]) -> Any:
    try:
        value = parse_json(text, max_chars=max_bytes)
        measure(value, max_bytes * 2)
    except ValueRefused as exc:
        raise PostRejected(400, f"the body is {exc}") from None
    if isinstance(value, dict) and EVENT_NAME_FIELD in value:
        name = value.pop(EVENT_NAME_FIELD)
        if not isinstance(name, str):
            raise PostRejected(400, f"{EVENT_NAME_FIELD} must be a string")
        names.append(name)
        return value or None
    return value


def _event_name(name: str) -> str:
    if (
        not name
        or len(name) > MAX_NAME_LENGTH
        or not name.isprintable()
        or any(char.isspace() for char in name)
    ):
        raise PostRejected(
            400,
            f"{EVENT_NAME_FIELD} must be 1 to {MAX_NAME_LENGTH} printable characters"
            " without spaces",
        )
    return name
