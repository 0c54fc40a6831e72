"""Fast constructors for the effects the core builds on its hot paths (``statifier._slots``).

Each builder sets every field of the effect; ``tests/test_build.py`` compares each with the
dataclass constructor.
"""

from __future__ import annotations

from typing import Any

from statifier._slots import setters
from statifier.core.effects import DatamodelChange, Log, Owner

_new = object.__new__


(
    _change_location,
    _change_path,
    _change_new,
    _change_prior,
    _change_c_index,
    _change_owner,
    _change_macrostep,
    _change_microstep,
    _change_round,
) = setters(
    DatamodelChange,
    "location",
    "path",
    "new_value",
    "prior_value",
    "c_index",
    "owner",
    "macrostep",
    "microstep",
    "round",
)


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
    effect = _new(DatamodelChange)
    _change_location(effect, location)
    _change_path(effect, path)
    _change_new(effect, new_value)
    _change_prior(effect, prior_value)
    _change_c_index(effect, c_index)
    _change_owner(effect, owner)
    _change_macrostep(effect, macrostep)
    _change_microstep(effect, microstep)
    _change_round(effect, round_)
    return effect


(
    _log_label,
    _log_value,
    _log_c_index,
    _log_owner,
    _log_macrostep,
    _log_microstep,
    _log_round,
) = setters(Log, "label", "value", "c_index", "owner", "macrostep", "microstep", "round")


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
    effect = _new(Log)
    _log_label(effect, label)
    _log_value(effect, value)
    _log_c_index(effect, c_index)
    _log_owner(effect, owner)
    _log_macrostep(effect, macrostep)
    _log_microstep(effect, microstep)
    _log_round(effect, round_)
    return effect
