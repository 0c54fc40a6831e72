"""``Config``: the host's Oban instance, queues and seams, validated at construction.

There is no default for the Oban instance or the timers queue: this package never owns,
starts or names an Oban instance, and a missing option is an error at the call site,
never a silent fall-back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from oban import Oban

from ._errors import ConfigError
from .rows._resolve import allow_path, is_path, register

DEFAULT_DELIVERY = "statifier_oban.delivery:SessionDelivery"
DEFAULT_INVOKE_DELIVERY = "statifier_oban.delivery:SessionInvokeDelivery"

MAX_BOUND_MS = 4_294_967_295
"""The longest run-time bound accepted, in milliseconds (about 49.7 days)."""

INVOKE_MARGIN_MS = 5_000
"""The invoke worker's backstop beyond the handler's bound."""

MAX_INVOKE_BOUND_MS = MAX_BOUND_MS - INVOKE_MARGIN_MS

_OPTIONS = (
    "oban",
    "timers_queue",
    "invoke_queue",
    "delivery",
    "invoke_delivery",
    "opaque_codec",
    "child_starter",
    "max_fan_out",
    "invoke_timeout",
    "child_start_timeout",
    "timer_timeout",
    "unresolved_handler",
)

_MISSING: Any = object()


@dataclass(frozen=True, slots=True, init=False)
class Config:
    """Where and how durable timers and invocations run.

    ``delivery``, ``invoke_delivery``, ``opaque_codec`` and ``child_starter`` take a class
    or an import path (``"myapp.timers:Delivery"``); they are stored as paths, because the
    job row names them and a worker on another node resolves them later. Naming one here
    registers it in this process (ADR 13): a worker elsewhere needs the same ``Config``, a
    ``register_plugin`` call, or ``--module``. Timeouts are in milliseconds (None:
    unbounded). ``unresolved_handler`` says what becomes of an invocation whose handler
    this process does not know: ``"cancel"`` (the default) answers the chart
    ``error.communication.invoke.<id>`` (reason ``invalid_handler``) and cancels the job at
    once; ``"retry"`` retries it with oban's backoff (for split-release deploys).
    """

    oban: Oban
    timers_queue: str
    invoke_queue: str | None
    delivery: str
    invoke_delivery: str
    opaque_codec: str | None
    child_starter: str | None
    max_fan_out: int
    invoke_timeout: int | None
    child_start_timeout: int | None
    timer_timeout: int | None
    unresolved_handler: Literal["retry", "cancel"]

    def __init__(
        self,
        *,
        oban: Oban = _MISSING,
        timers_queue: str = _MISSING,
        invoke_queue: str | None = None,
        delivery: str | type = DEFAULT_DELIVERY,
        invoke_delivery: str | type = DEFAULT_INVOKE_DELIVERY,
        opaque_codec: str | type | None = None,
        child_starter: str | type | None = None,
        max_fan_out: int = 1000,
        invoke_timeout: int | None = None,
        child_start_timeout: int | None = None,
        timer_timeout: int | None = None,
        unresolved_handler: Literal["retry", "cancel"] = "cancel",
        **unknown: Any,
    ) -> None:
        if unknown:
            names = list(unknown)
            raise ConfigError(names, f"unknown option(s): {', '.join(names)}")
        if oban is _MISSING or oban is None:
            raise ConfigError("oban", "oban is required: pass the host's Oban instance")
        if not isinstance(oban, Oban):
            raise ConfigError("oban", f"oban must be an oban.Oban instance, not {oban!r}", oban)
        values: dict[str, Any] = {
            "oban": oban,
            "timers_queue": _queue("timers_queue", timers_queue, required=True),
            "invoke_queue": _queue("invoke_queue", invoke_queue, required=False),
            "delivery": _seam("delivery", delivery, required=True),
            "invoke_delivery": _seam("invoke_delivery", invoke_delivery, required=True),
            "opaque_codec": _seam("opaque_codec", opaque_codec, required=False),
            "child_starter": _seam("child_starter", child_starter, required=False),
            "max_fan_out": _positive("max_fan_out", max_fan_out),
            "invoke_timeout": _bound("invoke_timeout", invoke_timeout, MAX_INVOKE_BOUND_MS),
            "child_start_timeout": _bound("child_start_timeout", child_start_timeout, MAX_BOUND_MS),
            "timer_timeout": _bound("timer_timeout", timer_timeout, MAX_BOUND_MS),
            "unresolved_handler": _policy(unresolved_handler),
        }
        for name in _OPTIONS:
            object.__setattr__(self, name, values[name])


def _queue(name: str, value: Any, *, required: bool) -> str | None:
    if value is _MISSING or value is None:
        if required:
            raise ConfigError(name, f"{name} is required: name the queue that runs the jobs")
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, f"{name} must be a non-empty string, not {value!r}", value)
    return value


def _seam(name: str, value: Any, *, required: bool) -> str | None:
    if value is None:
        if required:
            raise ConfigError(name, f"{name} cannot be None (leave it out for the default)")
        return None
    # Naming a seam here is the host registering it: rows that name it resolve (ADR 13).
    if isinstance(value, type):
        return register(value)
    if is_path(value):
        return allow_path(value)
    raise ConfigError(
        name,
        f"{name} must be a class or an import path like 'pkg.module:Name', not {value!r}",
        value,
    )


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(name, f"{name} must be a positive integer, not {value!r}", value)
    return value


def _bound(name: str, value: Any, maximum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise ConfigError(
            name,
            f"{name} must be None or an integer of milliseconds in 1..{maximum}, not {value!r}",
            value,
        )
    return value


def _policy(value: Any) -> Literal["retry", "cancel"]:
    if value == "retry" and isinstance(value, str):
        return "retry"
    if value == "cancel" and isinstance(value, str):
        return "cancel"
    raise ConfigError(
        "unresolved_handler",
        f"unresolved_handler must be 'retry' or 'cancel', not {value!r}",
        value,
    )
