"""What every datamodel shares: the value types, the errors and the compiled-object protocols.

The compiler and the core reach a datamodel only through these names: the compiler asks a
:class:`Datamodel` to compile expressions, locations and scripts and to turn inline content
into a value; the core evaluates the compiled :class:`Expression`, :class:`Location` and
:class:`Script` objects against the execution's variables and turns every
:class:`EvaluationError` into ``error.execution``.

The variables are a ``dict`` of JSON-like values (system variables included) that the core
keeps, or, for a datamodel that keeps its variables itself (``Datamodel.variables``, ADR
22), a :class:`KeptVariables` mapping: the core then writes through its operations, and a
state's ``datamodel`` is the :class:`StoredVariables` each call ends with: plain values to
read, and a stored form of the datamodel's own that only positions read
(:func:`stored_variables`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from statifier.datamodel.writes import Admit as Admit
from statifier.datamodel.writes import PathKey as PathKey
from statifier.datamodel.writes import WriteResult as WriteResult
from statifier.datamodel.writes import write_result as write_result
from statifier.errors import StatifierError
from statifier.values import Value as Value

if TYPE_CHECKING:
    from statifier.budget import Budget
    from statifier.chart.model import Machine
    from statifier.core.state import MachineState
    from statifier.datamodel.host import HostFunctions

type Variables = Mapping[str, Value]
"""The variables visible to an expression, keyed by name."""

type Environment = MutableMapping[str, Value]
"""The variables a script (or an expression with side effects) reads and rebinds."""

type InState = Callable[[str], bool]
"""Callback answering ``In(state_id)``."""

type Writable = Callable[[str], bool]
"""Callback deciding whether a script may (re)bind a top-level name."""


class DatamodelError(StatifierError):
    """Base class of every error raised by a datamodel."""


class ExpressionSyntaxError(DatamodelError):
    """An expression, location or script was rejected at compile time.

    ``line`` is 1-based and ``column`` is 0-based; both point into ``source`` as given by the
    caller (not into any normalised copy of it).
    """

    message: str
    source: str
    line: int
    column: int

    def __init__(self, message: str, source: str, line: int = 1, column: int = 0) -> None:
        super().__init__(f"{message} (line {line}, column {column})")
        self.message = message
        self.source = source
        self.line = line
        self.column = column


class EvaluationError(DatamodelError):
    """Evaluating an expression, writing a location or running a script failed.

    ``str(error)`` is a human-readable reason.
    """


class ScriptError(EvaluationError):
    """A script failed part-way through.

    Writes performed by earlier statements stay applied to the environment; they are listed in
    ``writes`` in execution order (empty for a datamodel whose scripts are all-or-nothing).
    ``line`` is the 1-based line of the failing statement (0 when unknown).
    """

    writes: list[WriteResult]
    line: int

    def __init__(self, message: str, writes: list[WriteResult], line: int) -> None:
        super().__init__(message)
        self.writes = writes
        self.line = line


class WritesFailed(DatamodelError):
    """One of a run of writes (``KeptVariables.assign_all``) failed: ``done`` of them had
    run before it, and ``error`` is what the failing one raised (nothing of it stayed)."""

    done: int
    error: EvaluationError

    def __init__(self, done: int, error: EvaluationError) -> None:
        super().__init__(str(error))
        self.done = done
        self.error = error


class DatamodelUnavailable(DatamodelError):
    """The chart names a datamodel whose optional dependency is not installed."""


@runtime_checkable
class Expression(Protocol):
    """A compiled expression: immutable, evaluated any number of times."""

    @property
    def source(self) -> str:
        """The expression as written in the chart."""
        ...

    def evaluate(
        self, variables: Variables, in_state: InState, budget: Budget | None = None
    ) -> Value:
        """Evaluate against ``variables``; raises :class:`EvaluationError` and nothing else.

        ``budget`` is the macrostep's (ADR 11): spend no more than ``budget.steps`` and
        call ``budget.spend(units)`` with what the evaluation cost, failed or not.

        A datamodel whose expressions may have side effects (ECMAScript) writes the variables
        they change back into ``variables`` when it is a mutable mapping.
        """
        ...


class DirectContext(Protocol):
    """A datamodel's evaluation context, as :class:`DirectEvaluation` hands it out: what
    remains of an evaluation's step allowance is all the core sets and reads of it."""

    steps: int


type DirectEvaluator = Callable[[Any], Value]
"""An expression's compiled code, evaluated against a :class:`DirectContext`."""


@runtime_checkable
class DirectEvaluation(Protocol):
    """An optional hook of a :class:`Datamodel` whose core-kept variables (``variables``
    None) its expressions read without side effects: the compiled code of its expressions,
    for the core to evaluate against one context of the datamodel's own, without the
    wrapper ``Expression.evaluate`` puts around each evaluation (ADR 20).

    With ``context.steps = a`` (``a`` being the budget's steps, at most ``step_limit``),
    ``evaluator(expr)(context)`` returns what ``expr.evaluate(variables, in_state,
    budget)`` would return, and leaves in ``context.steps`` what evaluate would leave of
    ``a``: the caller charges the budget ``a - context.steps``, as evaluate does, whether it
    returned or raised. An exception ``exc`` it raises stands for ``failure(exc)``, the
    error evaluate would raise. A datamodel without the hook (or an expression the hook
    gives no evaluator) is evaluated through ``Expression.evaluate``.
    """

    @property
    def step_limit(self) -> int:
        """The most steps one evaluation may spend, whatever the budget has left."""
        ...

    def evaluator(self, expr: Expression) -> DirectEvaluator | None:
        """``expr``'s compiled code, or None when it must go through ``evaluate``."""
        ...

    def key(self, location: Location) -> str | None:
        """The key of a location that writes one spelled-out key of a variable
        (``account.last``), when ``location.write`` into a ``dict`` value whose ``len + 1``
        steps the budget can pay (within ``step_limit``) returns a shallow copy of it with
        the key set (``path`` the key alone, ``prior`` the key's value or None) and charges
        exactly those steps; else None."""
        ...

    def context(self, variables: Variables, in_state: InState) -> DirectContext:
        """A context reading ``variables`` and answering ``In()`` with ``in_state`` (the
        caller keeps it while both stay the same, and drops it then)."""
        ...

    def failure(self, exc: Exception) -> EvaluationError:
        """The error ``Expression.evaluate`` raises when its code raised ``exc``."""
        ...


@runtime_checkable
class Location(Protocol):
    """A compiled location (the target of ``<assign>``, ``idlocation``...)."""

    @property
    def source(self) -> str:
        """The location as written in the chart."""
        ...

    @property
    def root(self) -> str:
        """The name of the variable the location writes into."""
        ...

    @property
    def plain(self) -> bool:
        """Whether the location is the root variable itself and a write stores the value
        as given: ``write`` would evaluate nothing, spend nothing and return
        ``WriteResult(root, value, (), variables[root], value)``, so the core stores it
        without calling ``write``."""
        ...

    def write(
        self, variables: Variables, value: Value, in_state: InState, budget: Budget | None = None
    ) -> WriteResult:
        """The new value of the root variable with ``value`` stored at this location
        (charging ``budget`` as ``Expression.evaluate`` does)."""
        ...


@runtime_checkable
class Script(Protocol):
    """A compiled ``<script>``."""

    @property
    def source(self) -> str:
        """The script as written (or fetched)."""
        ...

    def run(
        self,
        env: Environment,
        in_state: InState,
        writable: Writable,
        budget: Budget | None = None,
        admit: Admit | None = None,
    ) -> list[WriteResult]:
        """Run against ``env``, rebinding its top-level names; return the writes made.

        ``budget`` is charged as ``Expression.evaluate`` does; ``admit`` (when given) sees
        every write before it is applied and refuses it by raising (the datamodel cap).
        """
        ...


@runtime_checkable
class KeptVariables(Protocol):
    """The variables of one call of a datamodel that keeps them itself (ADR 22).

    A ``MutableMapping`` of the variables (reading one gives its plain value; setting one
    binds data), plus the writes the core makes, each admitted by the datamodel cap before
    it happens (a refusal raises and changes nothing), and ``freeze``.
    """

    def __contains__(self, name: object) -> bool: ...

    def __getitem__(self, name: str) -> Value: ...

    def __setitem__(self, name: str, value: Value) -> None: ...

    def assign(
        self,
        location: Location | None,
        expr: Expression | None,
        value: Value,
        name: str,
        in_state: InState,
        budget: Budget | None = None,
    ) -> None:
        """Store ``expr``'s value (or the data ``value``) at ``location`` (or in the
        variable ``name``); raises ``EvaluationError`` and changes nothing on failure."""
        ...

    def bind(self, name: str, value: Value, budget: Budget | None) -> None:
        """Bind the variable ``name`` to data; raises ``ValueRefused`` or
        ``EvaluationError`` (nothing changes then)."""
        ...

    @property
    def call_cost(self) -> int:
        """Steps of the macrostep budget one call into the datamodel costs at least."""
        ...

    def assign_all(
        self,
        writes: tuple[tuple[Location, Expression | None, Value], ...],
        log: Expression | None,
        count: int,
        in_state: InState,
        budget: Budget | None = None,
    ) -> tuple[int, Value]:
        """The first ``count`` of ``writes`` (``(location, expr, value)``, each as
        ``assign`` would store it), then ``log``'s value when ``count`` reaches it (it
        comes after the writes), in as few calls as the datamodel can, each charging the
        budget as its own call would: how many it ran, and the log's value. It stops
        before one it cannot run so, a write into no declared variable among them (the
        core runs that one alone, and reports it); a failing one raises ``WritesFailed``
        (the writes before it stay). ``writes`` is the caller's own tuple, the same at
        every call (the datamodel may prepare it once)."""
        ...

    def first_true(
        self,
        conditions: tuple[Expression | None, ...],
        start: int,
        in_state: InState,
        budget: Budget | None = None,
    ) -> tuple[int, Exception | None]:
        """The first of ``conditions`` (a state's candidate transitions' ``cond``, None for
        none) from ``start`` on whose value is truthy, each evaluated and charged as its
        own ``evaluate`` would be, in as few calls as the datamodel can: ``(index, None)``;
        ``(len(conditions), None)`` when none is; ``(index, error)`` for one that raised
        (those before it were falsy; the core reports it and asks again from the next).
        ``conditions`` is the caller's own tuple, the same at every call."""
        ...

    def foreach_array(
        self, expr: Expression, in_state: InState, budget: Budget | None = None
    ) -> int | None:
        """Start a ``<foreach>`` over ``expr``'s value (kept as a shallow copy): its length,
        or None when it is not an array."""
        ...

    def foreach_item(self, item: str, index: str | None, position: int) -> None:
        """Bind the ``position``-th item of the innermost ``<foreach>`` (and ``index``)."""
        ...

    def foreach_end(self) -> None:
        """End the innermost ``<foreach>``."""
        ...

    def export(self, name: str) -> Value:
        """A variable's value as plain data (a traced write's value)."""
        ...

    def freeze(self) -> tuple[Mapping[str, Value], Any]:
        """End the call: the state's ``datamodel`` and what the state carries to the next
        call (``MachineState._datamodel_bound``)."""
        ...


@runtime_checkable
class StoredVariables(Protocol):
    """A state's variables, kept by their datamodel in a stored form of its own (ADR 22).

    A read-only ``Mapping`` of the variables as plain JSON-like data (what users read:
    ``MachineState.datamodel``), plus the stored form positions keep."""

    def __getitem__(self, name: str) -> Value: ...

    def __iter__(self) -> Iterator[str]: ...

    def __len__(self) -> int: ...

    def __contains__(self, name: object) -> bool: ...

    def stored(self) -> dict[str, Value]:
        """The variables in the stored form (system variables included), as a position
        keeps them."""
        ...

    @property
    def chart_json_typed(self) -> bool:
        """Whether every entry of :meth:`stored` but the system variables
        (``_event``, ``_sessionid``, ``_name``, ``_ioprocessors``) holds only exact JSON
        types (``str``, ``int``, finite ``float``, ``bool``, ``None``, ``list``, ``dict``)
        under ``str`` keys, as JSON text the variables were read from vouches: ``dumps``
        then checks the system variables' types alone. False when in doubt."""
        ...


def stored_variables(datamodel: Mapping[str, Value]) -> dict[str, Value]:
    """What a position keeps of a state's ``datamodel``: the ``dict`` itself, or the stored
    form of variables a datamodel keeps (:class:`StoredVariables`)."""
    if type(datamodel) is dict:
        return datamodel
    # Not ``cast``: a call at run time, and every position written comes here.
    view: StoredVariables = datamodel  # type: ignore[assignment]
    return view.stored()


type OpenVariables = Callable[[Machine, MachineState | None], KeptVariables]
"""How a datamodel that keeps its variables gives a call them: for ``machine`` starting
(state None) or resuming a state."""


class Datamodel(Protocol):
    """What the compiler asks of a datamodel (one object per datamodel name)."""

    @property
    def name(self) -> str:
        """The value of ``<scxml datamodel>`` that selects this datamodel."""
        ...

    @property
    def syntax_errors_at_runtime(self) -> bool:
        """Whether unparsable sources compile (with a warning) into objects that raise.

        False: an unparsable expression is a load-time ``ChartError``. True: it is a
        compile warning, and evaluating it raises ``error.execution`` (ECMAScript engines
        behave so, and the W3C suite's ECMAScript rendering relies on it).
        """
        ...

    @property
    def supports_host_functions(self) -> bool:
        """Whether compiled code may call the host functions given to ``compile_*``."""
        ...

    @property
    def builtin_names(self) -> frozenset[str]:
        """The names every chart of this datamodel has (a host function may not shadow
        one)."""
        ...

    def compile_expression(self, source: str, functions: HostFunctions | None = None) -> Expression:
        """Compile an expression (which may call ``functions``) or raise
        :class:`ExpressionSyntaxError`."""
        ...

    def compile_location(self, source: str, functions: HostFunctions | None = None) -> Location:
        """Compile a location or raise :class:`ExpressionSyntaxError`."""
        ...

    def compile_script(self, source: str, functions: HostFunctions | None = None) -> Script:
        """Compile a script or raise :class:`ExpressionSyntaxError`."""
        ...

    def failing_expression(self, source: str, reason: str) -> Expression:
        """An expression that raises :class:`EvaluationError` with ``reason`` when evaluated."""
        ...

    def failing_location(self, source: str, reason: str) -> Location:
        """A location whose writes raise :class:`EvaluationError` with ``reason``."""
        ...

    def failing_script(self, source: str, reason: str) -> Script:
        """A script whose runs raise :class:`EvaluationError` with ``reason``."""
        ...

    def is_identifier(self, name: str) -> bool:
        """Whether ``name`` can name a variable (``<data id>``, foreach ``item``/``index``)."""
        ...

    def parse_inline_content(self, text: str) -> Value:
        """The value of inline ``<data>``/``<content>`` text, or of a fetched ``src``."""
        ...

    @property
    def variables(self) -> OpenVariables | None:
        """None when the core keeps the variables in a ``dict`` of JSON-like values; else
        how a call gets its :class:`KeptVariables` (ADR 22)."""
        ...

    def stored_form(self, value: Value) -> Value:
        """Plain data as a state's ``datamodel`` stores it (an operator's change to a
        variable is written so): the value itself, unless the datamodel keeps a stored form
        of its own."""
        ...

    def state_variables(self, stored: dict[str, Value]) -> Mapping[str, Value]:
        """A state's ``datamodel`` from what a position keeps of it: the ``dict`` itself,
        or the :class:`StoredVariables` of a datamodel with a stored form of its own."""
        ...
