"""``Config``: required options, unknown options, defaults, and every option's validation.

Config never touches the database, so the tests use a real ``Oban`` instance built on a
pool that is never opened (cheap: no database per test).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from oban import Oban
from statifier_oban._config import (
    DEFAULT_DELIVERY,
    DEFAULT_INVOKE_DELIVERY,
    MAX_BOUND_MS,
    MAX_INVOKE_BOUND_MS,
    Config,
)
from statifier_oban._errors import ConfigError

from oban_support.effects_factory import unopened_oban

TIMEOUTS = {
    "invoke_timeout": 4_294_962_295,
    "child_start_timeout": 4_294_967_295,
    "timer_timeout": 4_294_967_295,
}
SEAMS = ["delivery", "invoke_delivery", "opaque_codec", "child_starter"]


class HostDelivery:
    """A delivery class of the host (only its path matters to Config)."""

    class Nested:
        """A nested class: its path uses the qualified name."""


@pytest.fixture(scope="module")
def host_oban() -> Iterator[Oban]:
    """A real client-mode ``Oban`` on a pool that is never opened (Config reads no DB)."""
    with unopened_oban() as instance:
        yield instance


def build(oban: Oban, **options: Any) -> Config:
    """A Config with the required options plus ``options``."""
    return Config(oban=oban, timers_queue="timers", **options)


def refused(option: str, **options: Any) -> ConfigError:
    """The ConfigError raised for ``options``, checked to name ``option``."""
    with pytest.raises(ConfigError) as caught:
        Config(**options)
    assert caught.value.option == option
    return caught.value


# --- required and unknown options ---------------------------------------------------------


def test_missing_oban_is_an_error_naming_oban() -> None:
    refused("oban", timers_queue="timers")


def test_explicit_none_oban_is_an_error_naming_oban() -> None:
    refused("oban", oban=None, timers_queue="timers")


@pytest.mark.parametrize("value", ["Oban", "oban", object(), 42, ("via", "x")])
def test_an_object_that_is_not_an_oban_instance_is_refused(value: Any) -> None:
    error = refused("oban", oban=value, timers_queue="timers")
    assert error.value is value


def test_missing_timers_queue_is_an_error_naming_it(host_oban: Oban) -> None:
    refused("timers_queue", oban=host_oban)


def test_explicit_none_timers_queue_is_an_error_naming_it(host_oban: Oban) -> None:
    refused("timers_queue", oban=host_oban, timers_queue=None)


@pytest.mark.parametrize("value", ["", "   ", 5, b"timers"])
def test_an_invalid_timers_queue_is_refused(host_oban: Oban, value: Any) -> None:
    refused("timers_queue", oban=host_oban, timers_queue=value)


def test_unknown_options_are_listed_by_name_in_the_order_given(host_oban: Oban) -> None:
    with pytest.raises(ConfigError) as caught:
        Config(oban=host_oban, timers_queue="t", quue=1, extra=2)
    assert caught.value.option == ["quue", "extra"]
    assert "quue" in str(caught.value)
    assert "extra" in str(caught.value)


def test_unknown_options_are_checked_before_the_required_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        Config(zeta=1, alpha=2)
    assert caught.value.option == ["zeta", "alpha"]


# --- defaults -----------------------------------------------------------------------------


def test_defaults(host_oban: Oban) -> None:
    config = build(host_oban)
    assert config.oban is host_oban
    assert config.timers_queue == "timers"
    assert config.delivery == DEFAULT_DELIVERY == "statifier_oban.delivery:SessionDelivery"
    assert (
        config.invoke_delivery
        == DEFAULT_INVOKE_DELIVERY
        == "statifier_oban.delivery:SessionInvokeDelivery"
    )
    assert config.max_fan_out == 1000
    assert config.invoke_timeout is None
    assert config.child_start_timeout is None
    assert config.timer_timeout is None
    assert config.unresolved_handler == "cancel"
    assert config.opaque_codec is None
    assert config.child_starter is None
    assert config.invoke_queue is None


def test_config_is_frozen(host_oban: Oban) -> None:
    config = build(host_oban)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.timers_queue = "other"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.max_fan_out = 5  # type: ignore[misc]
    assert config.timers_queue == "timers"


def test_invoke_queue_is_kept_and_validated(host_oban: Oban) -> None:
    assert build(host_oban, invoke_queue="invokes").invoke_queue == "invokes"
    refused("invoke_queue", oban=host_oban, timers_queue="t", invoke_queue="")
    refused("invoke_queue", oban=host_oban, timers_queue="t", invoke_queue=3)


# --- seams: delivery, invoke_delivery, opaque_codec, child_starter ------------------------


@pytest.mark.parametrize("option", SEAMS)
def test_a_class_is_stored_as_its_module_qualname_path(host_oban: Oban, option: str) -> None:
    config = build(host_oban, **{option: HostDelivery})
    assert getattr(config, option) == f"{__name__}:HostDelivery"
    nested = build(host_oban, **{option: HostDelivery.Nested})
    assert getattr(nested, option) == f"{__name__}:HostDelivery.Nested"


@pytest.mark.parametrize("option", SEAMS)
@pytest.mark.parametrize("path", ["myapp.timers:Delivery", "myapp.timers.Delivery"])
def test_an_import_path_string_is_kept_in_its_module_colon_name_spelling(
    host_oban: Oban, option: str, path: str
) -> None:
    assert getattr(build(host_oban, **{option: path}), option) == "myapp.timers:Delivery"


@pytest.mark.parametrize("option", SEAMS)
@pytest.mark.parametrize(
    "value", ["not a path", "", "Delivery", "1bad.module:X", "pkg.mod:", True, False, 5]
)
def test_a_non_path_value_is_refused(host_oban: Oban, option: str, value: Any) -> None:
    error = refused(option, oban=host_oban, timers_queue="t", **{option: value})
    assert error.value is value


@pytest.mark.parametrize("option", ["delivery", "invoke_delivery"])
def test_none_for_a_delivery_is_refused(host_oban: Oban, option: str) -> None:
    refused(option, oban=host_oban, timers_queue="t", **{option: None})


@pytest.mark.parametrize("option", ["opaque_codec", "child_starter"])
def test_none_for_an_optional_seam_is_the_default(host_oban: Oban, option: str) -> None:
    assert getattr(build(host_oban, **{option: None}), option) is None


# --- max_fan_out --------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, "1000", True, False, 1.0, None])
def test_max_fan_out_must_be_a_positive_integer(host_oban: Oban, value: Any) -> None:
    error = refused("max_fan_out", oban=host_oban, timers_queue="t", max_fan_out=value)
    assert error.value is value


@pytest.mark.parametrize("value", [1, 5, 1_000_000])
def test_max_fan_out_accepts_positive_integers(host_oban: Oban, value: int) -> None:
    assert build(host_oban, max_fan_out=value).max_fan_out == value


# --- timeouts -----------------------------------------------------------------------------


def test_the_timeout_maxima() -> None:
    assert MAX_BOUND_MS == 4_294_967_295
    assert MAX_INVOKE_BOUND_MS == 4_294_962_295


@pytest.mark.parametrize("option", list(TIMEOUTS))
@pytest.mark.parametrize("value", [0, -1, 1.5, 1000.0, "1000", True, False, "infinity"])
def test_a_timeout_rejects_non_positive_and_non_integer_values(
    host_oban: Oban, option: str, value: Any
) -> None:
    error = refused(option, oban=host_oban, timers_queue="t", **{option: value})
    assert error.value is value


@pytest.mark.parametrize(("option", "maximum"), list(TIMEOUTS.items()))
def test_a_timeout_rejects_its_maximum_plus_one(host_oban: Oban, option: str, maximum: int) -> None:
    refused(option, oban=host_oban, timers_queue="t", **{option: maximum + 1})


@pytest.mark.parametrize(("option", "maximum"), list(TIMEOUTS.items()))
def test_a_timeout_accepts_its_maximum_one_and_none(
    host_oban: Oban, option: str, maximum: int
) -> None:
    assert getattr(build(host_oban, **{option: maximum}), option) == maximum
    assert getattr(build(host_oban, **{option: 1}), option) == 1
    assert getattr(build(host_oban, **{option: None}), option) is None


# --- unresolved_handler -------------------------------------------------------------------


@pytest.mark.parametrize("value", ["retry", "cancel"])
def test_unresolved_handler_accepts_retry_and_cancel(host_oban: Oban, value: str) -> None:
    assert build(host_oban, unresolved_handler=value).unresolved_handler == value


@pytest.mark.parametrize("value", [None, "park", "CANCEL", "Retry", "", True, 0])
def test_unresolved_handler_rejects_anything_else(host_oban: Oban, value: Any) -> None:
    error = refused(
        "unresolved_handler", oban=host_oban, timers_queue="t", unresolved_handler=value
    )
    assert error.value is value
