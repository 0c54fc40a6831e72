"""Helpers of the ECMAScript datamodel tests: a chart in the ECMAScript datamodel and what
its effects logged, raised and ended in."""

from __future__ import annotations

from typing import Any

import statifier
from statifier.core import effects as fx

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


def chart(body: str) -> statifier.Machine:
    return statifier.compile(f"<scxml {NS}>{body}</scxml>")


def logged(effects: list[fx.Effect]) -> list[Any]:
    return [e.value for e in effects if isinstance(e, fx.Log)]


def errors(effects: list[fx.Effect]) -> list[str]:
    return [e.message for e in effects if isinstance(e, fx.ErrorRaised)]


def ended_in(effects: list[fx.Effect]) -> list[tuple[str, ...]]:
    return [e.configuration for e in effects if isinstance(e, fx.Done)]
