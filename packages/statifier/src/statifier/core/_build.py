"""Fast constructors for the effects the core builds on its hot paths (``statifier._slots``).

Each builder sets every field of the effect; ``tests/test_build.py`` compares each with the
dataclass constructor.
"""

from __future__ import annotations

from typing import Any, Final

from statifier._slots import builder
from statifier.core.effects import Cancel, DatamodelChange, Log, Owner, SendDelayed

_ChangeBuilder: Final = builder(DatamodelChange)
CHANGE_BUILDER: Final = _ChangeBuilder
"""The builder of ``DatamodelChange``, for a loop that fills one without a call (every
field, then ``__class__``, as :func:`datamodel_change` does)."""


def datamodel_change(
    location: str,
    path: tuple[str | int, ...],
    new_value: Any,
    prior_value: Any,
    c_index: int | None,
    owner: Owner | None,
    macrostep: int,
    microstep: int,
    round_: int,
) -> DatamodelChange:
    """``DatamodelChange(location=..., ..., round=round_)``, built fast."""
    effect = _ChangeBuilder()
    effect.location = location
    effect.path = path
    effect.new_value = new_value
    effect.prior_value = prior_value
    effect.c_index = c_index
    effect.owner = owner
    effect.macrostep = macrostep
    effect.microstep = microstep
    effect.round = round_
    effect.__class__ = DatamodelChange
    built: DatamodelChange = effect
    return built


_LogBuilder: Final = builder(Log)
LOG_BUILDER: Final = _LogBuilder
"""The builder of ``Log``, for a loop that fills one without a call (see :func:`log`)."""


def log(
    label: str | None,
    value: Any,
    c_index: int,
    owner: Owner,
    macrostep: int,
    microstep: int,
    round_: int,
) -> Log:
    """``Log(label=..., ..., round=round_)``, built fast."""
    effect = _LogBuilder()
    effect.label = label
    effect.value = value
    effect.c_index = c_index
    effect.owner = owner
    effect.macrostep = macrostep
    effect.microstep = microstep
    effect.round = round_
    effect.__class__ = Log
    built: Log = effect
    return built


_CancelBuilder: Final = builder(Cancel)


def cancel(
    send_id: str,
    c_index: int,
    owner: Owner | None,
    ordinal: int,
    caller_context: Any,
    macrostep: int,
    microstep: int,
    round_: int,
) -> Cancel:
    """``Cancel(send_id=..., ..., round=round_)``, built fast."""
    effect = _CancelBuilder()
    effect.send_id = send_id
    effect.c_index = c_index
    effect.owner = owner
    effect.ordinal = ordinal
    effect.caller_context = caller_context
    effect.macrostep = macrostep
    effect.microstep = microstep
    effect.round = round_
    effect.__class__ = Cancel
    built: Cancel = effect
    return built


_DelayedBuilder: Final = builder(SendDelayed)


def send_delayed(
    event: str,
    target: str | None,
    type_: str | None,
    data: Any,
    send_id: str,
    delay_ms: int,
    c_index: int,
    owner: Owner | None,
    ordinal: int,
    id_from_author: bool,
    caller_context: Any,
    macrostep: int,
    microstep: int,
    round_: int,
) -> SendDelayed:
    """``SendDelayed(event=..., ..., round=round_)``, built fast."""
    effect = _DelayedBuilder()
    effect.event = event
    effect.target = target
    effect.type = type_
    effect.data = data
    effect.send_id = send_id
    effect.delay_ms = delay_ms
    effect.c_index = c_index
    effect.owner = owner
    effect.ordinal = ordinal
    effect.id_from_author = id_from_author
    effect.caller_context = caller_context
    effect.macrostep = macrostep
    effect.microstep = microstep
    effect.round = round_
    effect.__class__ = SendDelayed
    built: SendDelayed = effect
    return built
