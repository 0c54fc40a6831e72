"""Execution ids in URLs."""

from __future__ import annotations

from urllib.parse import quote


def execution_path(execution_id: str) -> str:
    """An execution id as a URL path segment: percent-encoded (its ``/`` kept), since an id
    may hold any printable character and the routes match it whole."""
    return quote(execution_id, safe="/")
