"""Log lines of the command lines: today's text, or one JSON object per line.

The library logs through ``logging`` with structured ``extra`` fields (``execution_id``,
``session_id``, ``scope``, ``send_id``, ``invoke_id``, ``job_id``...), whichever format
prints them. :class:`JsonFormatter` writes each record as one object: ``time`` (UTC,
ISO-8601), ``level``, ``logger``, ``message``, every extra field, ``trace_id`` and
``span_id`` when the record was logged inside a recorded span
(``statifier.instrumentation.log_ids``), and ``exception`` when there is one. Values are
bounded: a text is clipped to :data:`MAX_FIELD` characters, any other value that is not a
number, a bool or None is shown by its ``brief``.

:func:`configure` installs one handler of ours on the root logger (replacing the one it
installed before, leaving everyone else's alone); every command line's ``--log-format``
calls it (``statifier.cli.kit``). Text, like ``logging.basicConfig``, is left to a root
logger that has handlers already (an application's, a test runner's); JSON is what the
user asked for, so it is added whatever else is there.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Final, TextIO

from statifier import instrumentation
from statifier.values import MESSAGE_LENGTH, brief, clip

__all__ = ["FORMATS", "MAX_FIELD", "TEXT_FORMAT", "JsonFormatter", "configure", "fields_of"]

FORMATS: Final = ("text", "json")
"""The log formats a command line takes (``--log-format``)."""

TEXT_FORMAT: Final = "%(asctime)s [%(levelname)s] %(name)s: %(message)s"
"""The text format of a log line."""

MAX_FIELD: Final = 1_000
"""The most characters of one field of a JSON log line (the message included)."""

_RECORD_FIELDS: Final = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
}
"""What every ``LogRecord`` has: anything else on a record came in ``extra``."""


def _field(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return clip(value, MAX_FIELD)
    return brief(value)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The record's ``extra`` fields, bounded."""
    return {
        key: _field(value)
        for key, value in record.__dict__.items()
        if key not in _RECORD_FIELDS and not key.startswith("_")
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per record; see the module docstring."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": clip(record.getMessage(), MAX_FIELD),
        }
        line.update(instrumentation.log_ids())
        line.update(fields_of(record))
        if record.exc_info:
            line["exception"] = clip(self.formatException(record.exc_info), MESSAGE_LENGTH * 8)
        return json.dumps(line, ensure_ascii=False, default=str)


class _Handler(logging.StreamHandler[TextIO]):
    """The handler :func:`configure` installs (found again by its class)."""


def configure(
    log_format: str = "text", level: int | str | None = None, stream: TextIO | None = None
) -> logging.Handler | None:
    """Log to ``stream`` (stderr) in ``log_format`` through one handler on the root logger,
    replacing the one installed before (see the module docstring for when text adds none);
    ``level`` sets the root's level when given and a handler is installed. Returns the
    handler installed."""
    if log_format not in FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, _Handler):
            root.removeHandler(handler)
    if log_format == "text" and root.handlers:
        return None
    if level is not None:
        root.setLevel(level)
    installed = _Handler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    installed.setFormatter(formatter)
    root.addHandler(installed)
    return installed
