"""Host functions: pure Python functions a host lets chart expressions call by name.

The registry is datamodel-neutral: any datamodel resolves a call to a registered name
through :meth:`HostFunctions.call`, which checks that the arguments and the result are
JSON-like values (the same check the rest of the engine uses), hands the function copies
(so it cannot change a value the datamodel shares) and turns anything the function raises
into :class:`HostFunctionError`, which the core reports as ``error.execution``.

Only what the host registered is callable: a chart cannot reach any other Python code.
The functions must be pure (no side effects, no blocking I/O): the core replays a drive
to the same effects, byte for byte, and a function that reads a clock, a database or a
random source would break that; and a function runs outside the datamodel's step budget,
so a slow one stalls the whole execution.
"""

from __future__ import annotations

import copy
import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from statifier.errors import StatifierError
from statifier.values import is_value

HostFunction = Callable[..., Any]
"""A registered function: JSON-like positional and keyword arguments, a JSON-like result."""

MAX_HOST_FUNCTIONS = 1_000
"""Most functions one registry holds (a registry is host code, but stays bounded)."""

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


class HostFunctionError(StatifierError):
    """A host function was called wrongly, raised, or returned a value that is not JSON-like."""


@dataclass(frozen=True, slots=True)
class HostFunctions(Mapping[str, HostFunction]):
    """An immutable registry of host functions, by name.

    Build one with :meth:`of` from a plain mapping. Names are ASCII identifiers that do not
    start with an underscore (at most 64 characters). Registries are hashable, so compiled
    expressions can be cached per (source, registry).
    """

    entries: tuple[tuple[str, HostFunction], ...] = ()

    @classmethod
    def of(cls, functions: Mapping[str, HostFunction] | None) -> HostFunctions:
        """A registry holding ``functions``; raises ``HostFunctionError`` for a bad entry."""
        if functions is None:
            return EMPTY
        if isinstance(functions, HostFunctions):
            return functions
        if len(functions) > MAX_HOST_FUNCTIONS:
            raise HostFunctionError(f"at most {MAX_HOST_FUNCTIONS} host functions per registry")
        for name, function in functions.items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise HostFunctionError(
                    f"host function name {name!r} must be an identifier that does not start "
                    "with '_' (at most 64 characters)"
                )
            if not callable(function):
                raise HostFunctionError(f"host function {name!r} is not callable")
        return cls(tuple(sorted(functions.items(), key=lambda item: item[0])))

    def __getitem__(self, name: str) -> HostFunction:
        for key, function in self.entries:
            if key == name:
                return function
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(key for key, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def call(self, name: str, args: list[Any], kwargs: Mapping[str, Any]) -> Any:
        """Call ``name`` with copies of the arguments and return a copy of its result.

        Raises ``HostFunctionError`` when the function is not registered, an argument or
        the result is not a JSON-like value, or the function raises.
        """
        function = self.get(name)
        if function is None:
            raise HostFunctionError(f"function {name!r} is not registered by the host")
        if not all(is_value(arg) for arg in args) or not all(
            is_value(value) for value in kwargs.values()
        ):
            raise HostFunctionError(f"{name}(): arguments must be JSON-like values")
        try:
            result = function(*copy.deepcopy(args), **copy.deepcopy(dict(kwargs)))
        except Exception as exc:
            raise HostFunctionError(f"{name}() raised {type(exc).__name__}: {exc}") from exc
        if not is_value(result):
            raise HostFunctionError(
                f"{name}() returned a {type(result).__name__}, not a JSON-like value "
                "(str, int, float, bool, None, list or dict with str keys)"
            )
        return copy.deepcopy(result)


EMPTY = HostFunctions()
"""The registry with no functions (the default)."""


def import_functions(spec: str) -> HostFunctions:
    """The registry of the mapping named ``MODULE:NAME`` (``myapp.rules:FUNCTIONS``).

    For command lines (``--functions``): the module is imported from ``sys.path`` as the
    command left it (whether the working directory is on it is the command's policy).
    Raises ``HostFunctionError`` when the spec is malformed, the module
    does not import, or the name is not a mapping of valid host functions.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise HostFunctionError(f"{spec!r}: expected MODULE:NAME")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HostFunctionError(f"{spec!r}: cannot import {module_name!r}: {exc}") from None
    functions = getattr(module, attribute, None)
    if not isinstance(functions, Mapping):
        raise HostFunctionError(f"{spec!r}: {attribute!r} is not a mapping of functions")
    return HostFunctions.of(functions)
