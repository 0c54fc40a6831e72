"""The datamodels a chart may name in ``<scxml datamodel>``, and how to get one.

``python`` (also the default when the attribute is absent) and ``null`` are the safe Python
expression datamodel; ``null`` charts use it for ``In()`` conditions. ``ecmascript`` runs chart
code in a sandboxed QuickJS engine and needs the ``statifier[ecmascript]`` extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

from statifier._slots import bare
from statifier.datamodel import python as py
from statifier.datamodel.base import (
    Datamodel,
    DatamodelUnavailable,
    DirectContext,
    DirectEvaluator,
    EvaluationError,
    Expression,
    InState,
    Location,
    OpenVariables,
    Script,
    Value,
    Variables,
)
from statifier.datamodel.failing import FailingExpression, FailingLocation, FailingScript
from statifier.datamodel.python.context import NO_SLOTS, EvalContext
from statifier.datamodel.python.expressions import direct_evaluator, direct_failure
from statifier.datamodel.python.limits import STEP_BUDGET
from statifier.datamodel.python.locations import direct_key

if TYPE_CHECKING:
    from statifier.chart.model import Machine
    from statifier.datamodel.host import HostFunctions

_BARE_CONTEXT: Final = bare(EvalContext)
"""``EvalContext`` made without its ``__init__`` (``PythonDatamodel.context``)."""

DATAMODEL_NAMES: Final = ("python", "null", "ecmascript")
"""Every ``datamodel`` attribute value a chart may use."""

DEFAULT_DATAMODEL: Final = "python"
"""The datamodel of a chart without a ``datamodel`` attribute."""


@dataclass(frozen=True, slots=True)
class PythonDatamodel:
    """The safe Python-expression datamodel (:mod:`statifier.datamodel.python`)."""

    name: str = "python"
    syntax_errors_at_runtime: bool = False
    supports_host_functions: bool = True

    def compile_expression(self, source: str, functions: HostFunctions | None = None) -> Expression:
        """Compile with :func:`statifier.datamodel.python.compile_expression`."""
        return py.compile_expression(source, functions)

    def compile_location(self, source: str, functions: HostFunctions | None = None) -> Location:
        """Compile with :func:`statifier.datamodel.python.compile_location`."""
        return py.compile_location(source, functions)

    def compile_script(self, source: str, functions: HostFunctions | None = None) -> Script:
        """Compile with :func:`statifier.datamodel.python.compile_script`."""
        return py.compile_script(source, functions)

    def failing_expression(self, source: str, reason: str) -> Expression:
        """An expression that raises ``reason``."""
        return FailingExpression(source, reason)

    def failing_location(self, source: str, reason: str) -> Location:
        """A location that raises ``reason``."""
        return FailingLocation(source, reason)

    def failing_script(self, source: str, reason: str) -> Script:
        """A script that raises ``reason``."""
        return FailingScript(source, reason)

    def is_identifier(self, name: str) -> bool:
        """A Python identifier, not a keyword, not dunder-prefixed."""
        return py.is_identifier(name)

    def parse_inline_content(self, text: str) -> Value:
        """JSON if it parses, else the whitespace-normalised text (None when empty)."""
        return py.parse_inline_content(text)

    @property
    def variables(self) -> OpenVariables | None:
        """None: the core keeps the variables in a plain ``dict``."""
        return None

    @property
    def builtin_names(self) -> frozenset[str]:
        """The built-in functions (``len``, ``str``...)."""
        return frozenset(py.FUNCTIONS)

    @property
    def step_limit(self) -> int:
        """``DirectEvaluation``: what one evaluation may spend at most."""
        return STEP_BUDGET

    def evaluator(self, expr: Expression) -> DirectEvaluator | None:
        """``DirectEvaluation``: the closure of an expression compiled here (ADR 20)."""
        return direct_evaluator(expr)

    def key(self, location: Location) -> str | None:
        """``DirectEvaluation``: the key of a ``variable.key`` location compiled here."""
        return direct_key(location)

    def context(self, variables: Variables, in_state: InState) -> DirectContext:
        """``DirectEvaluation``: an evaluation context for the closures."""
        # ``EvalContext(variables, in_state, 0)`` without its ``__init__`` (once an event):
        # no comprehension slots, as no closure offered here has any.
        context = _BARE_CONTEXT()
        context.variables = variables
        context.in_state = in_state
        context.steps = STEP_BUDGET
        context.slots = NO_SLOTS
        return context  # type: ignore[no-any-return]

    def failure(self, exc: Exception) -> EvaluationError:
        """``DirectEvaluation``: the error ``evaluate`` raises for ``exc``."""
        return direct_failure(exc)

    def stored_form(self, value: Value) -> Value:
        """The value itself (variables are stored as they are)."""
        return value

    def state_variables(self, stored: dict[str, Value]) -> dict[str, Value]:
        """The ``dict`` itself (variables are stored as they are)."""
        return stored


PYTHON: Final = PythonDatamodel()
"""The Python datamodel."""

_NULL: Final = PythonDatamodel(name="null")


def datamodel_for(name: str) -> Datamodel:
    """The datamodel a chart selects with ``datamodel=name``.

    Raises :class:`KeyError` for a name not in :data:`DATAMODEL_NAMES`, and
    :class:`DatamodelUnavailable` for ``ecmascript`` when its extra is not installed.
    """
    if name == "python":
        return PYTHON
    if name == "null":
        return _NULL
    if name == "ecmascript":
        module = importlib.import_module("statifier.datamodel.ecmascript")
        datamodel: Datamodel = module.ecmascript_datamodel()
        return datamodel
    raise KeyError(name)


VARIABLES_KEY: Final = ("datamodel", "variables")
"""The key, in a machine's ``_cache``, of its datamodel's ``variables`` (not a memo; the
core reads it there itself once an event)."""

_UNKNOWN: Final = object()


def variables_of(machine: Machine) -> OpenVariables | None:
    """``machine``'s datamodel's ``variables`` (None: a plain ``dict``), looked up once."""
    found: object = machine._cache.get(VARIABLES_KEY, _UNKNOWN)
    if found is _UNKNOWN:
        found = machine._cache[VARIABLES_KEY] = datamodel_for(machine.datamodel).variables
    return cast("OpenVariables | None", found)


_STATE_VARIABLES: Final = ("datamodel", "state_variables")
"""The key, in a machine's ``_cache``, of its datamodel's ``state_variables`` (not a memo)."""


def state_variables(machine: Machine, stored: dict[str, Value]) -> Mapping[str, Value]:
    """The ``datamodel`` of a state of ``machine`` whose position keeps ``stored``: the
    ``dict`` itself, unless the datamodel keeps a stored form of its own (ADR 22)."""
    # Looked up once per machine (one lookup, not two): every position read comes here.
    found = machine._cache.get(_STATE_VARIABLES)
    if found is None:
        found = _state_variables_of(machine)
    if found is _AS_STORED:
        return stored
    # Not ``cast``: a call at run time, and every position read comes here.
    make: Callable[[dict[str, Value]], Mapping[str, Value]] = found  # type: ignore[assignment]
    return make(stored)


_AS_STORED: Final = object()
"""``state_variables`` of a datamodel whose states hold the stored ``dict`` itself."""


def variables_as_stored(machine: Machine) -> bool:
    """Whether ``state_variables`` hands back the stored ``dict`` itself for ``machine``
    (a reader may then skip the call)."""
    found = machine._cache.get(_STATE_VARIABLES)
    return (found if found is not None else _state_variables_of(machine)) is _AS_STORED


def _state_variables_of(machine: Machine) -> object:
    """What ``state_variables`` does for ``machine``, worked out once and remembered."""
    found: object = (
        _AS_STORED
        if variables_of(machine) is None
        else datamodel_for(machine.datamodel).state_variables
    )
    machine._cache[_STATE_VARIABLES] = found
    return found


__all__ = [
    "DATAMODEL_NAMES",
    "DEFAULT_DATAMODEL",
    "PYTHON",
    "DatamodelUnavailable",
    "PythonDatamodel",
    "datamodel_for",
    "variables_of",
]
