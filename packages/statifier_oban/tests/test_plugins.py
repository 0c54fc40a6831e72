"""Resolving the plug-ins a job row names: typed objects, or ``ResolutionError``."""

from __future__ import annotations

import pytest
from statifier_oban import (
    ChildStarter,
    InvokeDelivery,
    OpaqueCodec,
    ResolutionError,
    SessionDelivery,
    SessionInvokeDelivery,
    TimerDelivery,
)
from statifier_oban.invocations._handler import invoke_handler
from statifier_oban.rows import _plugins


def test_the_default_deliveries_resolve_to_their_protocols() -> None:
    timer = _plugins.timer_delivery("statifier_oban.delivery:SessionDelivery")
    invoke = _plugins.invoke_delivery("statifier_oban.delivery:SessionInvokeDelivery")
    assert isinstance(timer, SessionDelivery)
    assert isinstance(timer, TimerDelivery)
    assert isinstance(invoke, SessionInvokeDelivery)
    assert isinstance(invoke, InvokeDelivery)


@pytest.mark.parametrize(
    ("resolver", "path", "missing"),
    [
        (_plugins.timer_delivery, "statifier_oban.delivery:Delivered", "not registered"),
        (_plugins.invoke_delivery, "statifier_oban.delivery:SessionDelivery", "deliver_failure"),
        (_plugins.child_starter, "statifier_oban.delivery:SessionDelivery", "start_child"),
        (_plugins.opaque_codec, "statifier_oban.delivery:SessionDelivery", "encode"),
        (invoke_handler, "statifier_oban.delivery:SessionDelivery", "InvokeHandler"),
        (_plugins.timer_delivery, "no_such_module_for_statifier_tests:X", "not registered"),
    ],
)
def test_something_else_is_refused_with_what_it_lacks(
    resolver: object, path: str, missing: str
) -> None:
    assert callable(resolver)
    with pytest.raises(ResolutionError, match=missing):
        resolver(path)


def test_the_protocols_are_the_public_ones() -> None:
    assert _plugins.ChildStarter is ChildStarter
    assert _plugins.OpaqueCodec is OpaqueCodec
    # Rows sit below invocations: resolving a row's plug-ins needs no handler code.
    assert "InvokeHandler" not in vars(_plugins)
    assert invoke_handler("statifier_oban.children:MapHandler").__class__.__name__ == "MapHandler"


class _Timely:
    """A timer delivery registered by the tests below."""

    def deliver(self, scope: str, effect: object) -> None:
        """Accept anything."""


class _Unfit:
    """Has a ``deliver`` that cannot take a timer delivery's arguments."""

    def deliver(self) -> None:
        """Take nothing."""


def test_a_checked_class_builds_a_new_instance_each_time_until_it_is_forgotten() -> None:
    from statifier_oban.rows import _resolve

    path = _resolve.register(_Timely, path="statifier_tests_plugins:Timely")
    try:
        first = _plugins.timer_delivery(path)
        second = _plugins.timer_delivery("statifier_tests_plugins.Timely")  # the dotted spelling
        assert isinstance(first, _Timely)
        assert isinstance(second, _Timely)
        assert first is not second
    finally:
        _resolve.forget(path)
    with pytest.raises(ResolutionError, match="not registered"):
        _plugins.timer_delivery(path)


def test_a_refused_class_is_refused_every_time() -> None:
    from statifier_oban.rows import _resolve

    path = _resolve.register(_Unfit, path="statifier_tests_plugins:Unfit")
    try:
        for _ in range(2):
            with pytest.raises(ResolutionError, match="cannot take"):
                _plugins.timer_delivery(path)
        # Checked as a timer delivery, it is still refused as an invoke delivery.
        _resolve.register(_Timely, path="statifier_tests_plugins:Timely")
        _plugins.timer_delivery("statifier_tests_plugins:Timely")
        with pytest.raises(ResolutionError, match="deliver_failure"):
            _plugins.invoke_delivery("statifier_tests_plugins:Timely")
    finally:
        _resolve.forget(path)
        _resolve.forget("statifier_tests_plugins:Timely")


def test_remembered_spellings_are_bounded_and_bad_paths_still_refused() -> None:
    from statifier_oban.rows import _resolve

    for i in range(_resolve.MAX_KNOWN_PATHS + 5):
        assert (
            _resolve.canonical(f"statifier_tests_paths.m{i}.X") == f"statifier_tests_paths.m{i}:X"
        )
        assert len(_resolve._canonical) <= _resolve.MAX_KNOWN_PATHS
    for bad in ("not a path", "1x:Y", "a:b:c", "x" * (_resolve.MAX_PATH_LENGTH + 1) + ".y"):
        for _ in range(2):
            with pytest.raises(ResolutionError, match="not an import path"):
                _resolve.canonical(bad)
