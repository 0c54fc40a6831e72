"""Helpers of the ECMAScript datamodel tests: a chart in the ECMAScript datamodel and what
its effects logged, raised and ended in."""

from __future__ import annotations

from typing import Any

import pytest
import statifier
from statifier.budget import MacrostepLimits
from statifier.core import effects as fx
from statifier.core._run import Run
from statifier.core.position import dumps

NS = 'xmlns="http://www.w3.org/2005/07/scxml" version="1.0" datamodel="ecmascript"'


def chart(body: str) -> statifier.Machine:
    return statifier.compile(f"<scxml {NS}>{body}</scxml>")


def logged(effects: list[fx.Effect]) -> list[Any]:
    return [e.value for e in effects if isinstance(e, fx.Log)]


def errors(effects: list[fx.Effect]) -> list[str]:
    return [e.message for e in effects if isinstance(e, fx.ErrorRaised)]


def ended_in(effects: list[fx.Effect]) -> list[tuple[str, ...]]:
    return [e.configuration for e in effects if isinstance(e, fx.Done)]


type MeteredStep = tuple[list[fx.Effect], bytes, int]


def metered_steps(
    machine: statifier.Machine,
    session_id: str,
    events: list[statifier.Event],
    limits: MacrostepLimits,
) -> list[MeteredStep]:
    """Start ``machine`` and send it ``events``: for each call its effects, the position it
    ends in and the steps of its macrostep budget left (read as the core freezes a run)."""
    left: list[int] = []
    freeze = Run.freeze

    def metered(run: Run) -> Any:
        left.append(run.budget.steps)
        return freeze(run)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Run, "freeze", metered)
        state, effects = statifier.initialize(machine, session_id=session_id, limits=limits)
        steps = [(effects, dumps(state), left[-1])]
        for event in events:
            state, effects = statifier.handle_event(state, event)
            steps.append((effects, dumps(state), left[-1]))
    return steps
