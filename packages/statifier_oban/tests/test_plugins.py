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
