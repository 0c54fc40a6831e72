"""Plain data in the ECMAScript datamodel's stored form (ADR 22).

A position's datamodel holds each ECMAScript variable in the stored form, where a key that
starts with ``$`` marks a tag (a reference, a function of the chart...). Plain data that a
host puts there (an operator's change to a variable) is written in that form first: each
key that starts with ``$`` gets one more, so no data can ever read as a tag.
"""

from __future__ import annotations

from typing import Any


def stored_form(value: Any) -> Any:
    """``value`` (JSON-like data) as the stored form holds it."""
    if isinstance(value, dict):
        return {
            ("$" + key if isinstance(key, str) and key.startswith("$") else key): stored_form(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [stored_form(item) for item in value]
    return value
