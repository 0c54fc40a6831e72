"""The package's shape: the root API, which modules are public, one base for every error."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import statifier_oban
from statifier_oban import StatifierObanError

PUBLIC_MODULES = {
    "children",
    "cli",
    "delivery",
    "embedded",
    "executions",
    "latency",
    "otel",
    "schema",
    "telemetry",
    "testing",
    "workers",
}
"""Modules without a leading underscore, each public for a reason its docstring gives."""

PARTS = {"invocations", "rows", "store", "timers"}
"""Subpackages that group private modules by the part of the library they make up."""


def modules() -> list[ModuleType]:
    """Every module of the package, subpackages included, imported."""
    return [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(statifier_oban.__path__, "statifier_oban.")
        if not info.name.endswith("__main__")
    ]


def test_every_module_is_either_public_by_decision_or_marked_private() -> None:
    names = {module.__name__.removeprefix("statifier_oban.") for module in modules()}
    top = {name for name in names if "." not in name}
    assert {name for name in top if not name.startswith("_")} == PUBLIC_MODULES | PARTS
    inner = {name.rpartition(".")[2] for name in names if "." in name}
    assert {name for name in inner if not name.startswith("_")} == set()


def test_every_part_says_what_it_owns() -> None:
    for name in PARTS | {"cli", "executions"}:
        doc = inspect.getdoc(importlib.import_module(f"statifier_oban.{name}"))
        assert doc, name
        assert len(doc) > 200, name


def test_the_root_exports_resolve_and_are_documented() -> None:
    for name in statifier_oban.__all__:
        value = getattr(statifier_oban, name)
        if inspect.isclass(value) or inspect.isfunction(value) or inspect.ismodule(value):
            assert inspect.getdoc(value), name


def test_the_root_exports_what_a_host_needs() -> None:
    wanted = {
        "Config",
        "DurableTimers",
        "Delivered",
        "Discarded",
        "Snoozed",
        "TimerDelivery",
        "InvokeDelivery",
        "InvokeHandler",
        "Ok",
        "Error",
        "FanOut",
        "Deferred",
        "ChildStarter",
        "OpaqueCodec",
        "schedule",
        "cancel_timers",
        "pending_for",
    }
    assert wanted <= set(statifier_oban.__all__)
    # Names that meant two things are gone.
    assert not {"Snooze", "cancel", "Delivery"} & set(dir(statifier_oban))


def test_every_error_the_package_defines_derives_from_its_base() -> None:
    errors = {
        value
        for module in modules()
        for value in vars(module).values()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__.startswith("statifier_oban")
    }
    assert len(errors) > 20
    assert [e.__qualname__ for e in errors if not issubclass(e, StatifierObanError)] == []
    # All exported from the root, but the CLI's own (caught and printed inside cli.main).
    exported = {getattr(statifier_oban, name) for name in statifier_oban.__all__}
    unexported = [e for e in errors if e not in exported]
    cli_errors = [e for e in unexported if e.__module__.startswith("statifier_oban.cli")]
    assert [e.__qualname__ for e in unexported if e not in cli_errors] == []
