"""One sandboxed QuickJS context per thread, kept equal to the stored variables (ADR 10).

The invariant every call keeps: each chart variable's JavaScript value is exactly what its
stored (JSON-like) value revives to. Before a call, the variables whose stored value changed
since the engine last saw them (compared by identity: stored values are never changed in
place) are installed; after a call that may have had side effects, every variable whose
stored form changed is written back to the caller's variables and re-installed from its
stored form. A call that fails changes nothing: the engine reverts to the stored values, and
after a call that hit a resource limit it is rebuilt from scratch.
"""

from __future__ import annotations

import importlib
import json
import threading
from collections.abc import Callable, Mapping, MutableMapping
from importlib import resources
from typing import Any, Final

from statifier.datamodel.base import (
    Admit,
    DatamodelUnavailable,
    EvaluationError,
    InState,
    Value,
    Writable,
    WriteResult,
)
from statifier.datamodel.ecmascript.limits import DEFAULT_LIMITS, MAX_CACHED_FUNCTIONS, Limits
from statifier.errors import install_hint
from statifier.values import ValueRefused

SYSTEM_VARIABLES: Final = frozenset({"_event", "_sessionid", "_name", "_ioprocessors"})
"""Read-only variables the core binds; the engine exposes them through throwing setters."""

_MISSING: Final = object()
_LIMIT_MARKERS: Final = ("out of memory", "interrupted", "stack size exceeded", "stack overflow")
_PRELUDE: Final = resources.files(__package__).joinpath("prelude.js").read_text(encoding="utf-8")


def load_quickjs() -> Any:
    """Import the QuickJS binding, or raise :class:`DatamodelUnavailable`."""
    try:
        return importlib.import_module("_quickjs")
    except ImportError as exc:
        raise DatamodelUnavailable(
            "the ecmascript datamodel needs the QuickJS engine: "
            f"install the extra with `{install_hint('statifier', 'ecmascript')}`"
        ) from exc


class _JSFailure(Exception):
    """A call into the engine raised; ``limit`` when a resource limit stopped it."""

    def __init__(self, message: str, limit: bool) -> None:
        super().__init__(message)
        self.message = message
        self.limit = limit


_ENCODER: Final = json.JSONEncoder(allow_nan=False, separators=(",", ":"))


def _dumps(value: Value, what: str) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EvaluationError(f"{what} is not a JSON value: {exc}") from None


def _loads(text: str) -> Value:
    try:
        return json.loads(text)
    except RecursionError:
        raise EvaluationError("value is too deeply nested to store") from None


def _any_name(_name: str) -> bool:
    return True


class Engine:
    """A hardened QuickJS context and the bookkeeping that keeps it equal to the variables.

    Not thread-safe: use :func:`engine`, which keeps one per thread.
    """

    def __init__(self, limits: Limits = DEFAULT_LIMITS) -> None:
        self._quickjs = load_quickjs()
        self._limits = limits
        self._in_answers = ""
        self._build()

    # -- set-up ----------------------------------------------------------------------------

    def _build(self) -> None:
        context = self._quickjs.Context()
        limits = self._limits
        context.set_memory_limit(limits.memory_bytes)
        context.set_time_limit(limits.cpu_seconds)
        context.set_max_stack_size(limits.stack_bytes)
        pick = context.eval(_PRELUDE)(context.globalThis)
        self._context = context
        self._run_script = pick("runScript")
        self._install = pick("install")
        self._remove = pick("remove")
        self._set_system = pick("setSystem")
        self._set_in = pick("setIn")
        self._changes = pick("changes")
        self._accept = pick("accept")
        self._revert = pick("revert")
        self._store = pick("exportValue")
        self._assign = pick("assignWith")
        self._assign_root = pick("assignRoot")
        self._compile_expression = pick("compileExpression")
        self._compile_location = pick("compileLocation")
        self._check_script = pick("checkScript")
        self._functions: dict[tuple[str, str], Any] = {}
        self._installed: dict[str, Value] = {}
        self._in_answers = ""

    def _call(self, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return function(*args)
        except self._quickjs.StackOverflow as exc:
            raise _JSFailure(_first_line(exc), limit=True) from None
        except self._quickjs.JSException as exc:
            message = _first_line(exc)
            lowered = message.lower()
            limit = message in ("", "null") or any(m in lowered for m in _LIMIT_MARKERS)
            raise _JSFailure("out of memory" if message == "null" else message, limit) from None
        except (TypeError, ValueError, OverflowError) as exc:
            # The binding could not convert a result (a BigInt, a symbol...) into Python.
            raise _JSFailure(f"the result cannot be converted: {exc}", limit=False) from None

    # -- compile time ----------------------------------------------------------------------

    def syntax_error(self, kind: str, source: str) -> str | None:
        """Why ``source`` does not compile as a ``kind`` (expression, location, script)."""
        try:
            if kind == "script":
                self._call(self._check_script, source)
            else:
                self._function(kind, source)
        except _JSFailure as failure:
            if failure.limit:
                self._build()
            return failure.message
        return None

    def _function(self, kind: str, source: str) -> Any:
        key = (kind, source)
        function = self._functions.get(key)
        if function is None:
            compile_ = self._compile_expression if kind == "expression" else self._compile_location
            function = self._call(compile_, source)
            if len(self._functions) >= MAX_CACHED_FUNCTIONS:
                self._functions.clear()
            self._functions[key] = function
        return function

    # -- run time --------------------------------------------------------------------------

    def evaluate(
        self,
        source: str,
        variables: Mapping[str, Value],
        in_state: InState,
        in_ids: tuple[str, ...],
        side_effects: bool,
        admit: Admit | None = None,
    ) -> Value:
        """Evaluate an expression; with ``side_effects``, write changed variables back
        (each first shown to ``admit``, see ``_commit``)."""
        try:
            function = self._function("expression", source)
            self._prepare(variables, in_state, in_ids, side_effects)
            result = self._export(self._call(function))
            if side_effects:
                self._commit(variables, _any_name, admit)
        except _JSFailure as failure:
            self._recover(failure)
            raise EvaluationError(failure.message) from None
        except EvaluationError:
            self._recover(None)
            raise
        return result

    def assign(
        self,
        source: str,
        root: str,
        variables: Mapping[str, Value],
        value: Value,
        in_state: InState,
        in_ids: tuple[str, ...],
        side_effects: bool = True,
        admit: Admit | None = None,
    ) -> WriteResult:
        """Store ``value`` at the location ``source``; return the write of its root.

        A location without ``side_effects`` (no call, assignment, ``new``...) can change
        only its root: then only the root is compared with its stored form afterwards, in
        the same call into the engine, instead of every variable.
        """
        text = _dumps(value, "the assigned value")
        prior = variables.get(root)
        top_level = source.strip() == root
        try:
            function = self._function("location", source)
            self._prepare(variables, in_state, in_ids, side_effects)
            if side_effects:
                self._call(self._assign, function, text, top_level)
                self._commit(variables, _any_name, admit)
            else:
                stored = self._call(self._assign_root, function, text, top_level, root)
                if stored:
                    self._store_root(variables, root, _loads(stored))
        except _JSFailure as failure:
            self._recover(failure)
            raise EvaluationError(failure.message) from None
        except EvaluationError:
            self._recover(None)
            raise
        return WriteResult(root, variables.get(root), (), prior)

    def run_script(
        self,
        source: str,
        env: MutableMapping[str, Value],
        in_state: InState,
        in_ids: tuple[str, ...],
        writable: Writable,
        admit: Admit | None = None,
    ) -> list[WriteResult]:
        """Run a script in the global scope; return one write per variable it changed."""
        try:
            self._prepare(env, in_state, in_ids)
            self._call(self._run_script, source)
            return self._commit(env, writable, admit)
        except _JSFailure as failure:
            self._recover(failure)
            raise EvaluationError(failure.message) from None
        except EvaluationError:
            self._recover(None)
            raise

    def _prepare(
        self,
        variables: Mapping[str, Value],
        in_state: InState,
        in_ids: tuple[str, ...],
        dynamic: bool = True,
    ) -> None:
        self._answer_in(in_state, in_ids, dynamic)
        installed = self._installed
        for name, value in variables.items():
            if installed.get(name, _MISSING) is value:
                continue
            text = _dumps(value, f"variable {name!r}")
            if name in SYSTEM_VARIABLES:
                self._call(self._set_system, name, text)
            else:
                self._call(self._install, name, text)
            installed[name] = value
        if len(installed) > len(variables):
            for name in [n for n in installed if n not in variables]:
                if name in SYSTEM_VARIABLES:
                    self._call(self._set_system, name, "null")
                else:
                    self._call(self._remove, name)
                del installed[name]

    def _answer_in(self, in_state: InState, in_ids: tuple[str, ...], dynamic: bool) -> None:
        # Chart code cannot call back into Python (the time limit forbids it), so In() answers
        # from data handed over before the call: the ids the source names literally, and, for
        # a source that calls functions (``dynamic``), the whole configuration when the
        # caller's ``in_state`` offers ``active_state_ids()``.
        #   A source that is neither calls no function at all (``may_have_side_effects``),
        # In() included: the answers the engine holds do not matter to it, so they stay as
        # they are (a chart whose conditions alternate with calls would otherwise hand them
        # over twice per event).
        if not in_ids and not dynamic:
            return
        active = getattr(in_state, "active_state_ids", None) if dynamic else None
        active_ids = list(active()) if callable(active) else None
        if not in_ids and active_ids is None:
            text = "{}\x00null"
        else:
            answers = {state_id: bool(in_state(state_id)) for state_id in in_ids}
            text = _dumps(answers, "In() answers") + "\x00" + _dumps(active_ids, "state ids")
        if text != self._in_answers:
            answers_text, active_text = text.split("\x00")
            self._call(self._set_in, answers_text, active_text)
            self._in_answers = text

    def _export(self, result: Any) -> Value:
        if result is None or isinstance(result, str | bool | int):
            return result
        if isinstance(result, float):
            if result != result or abs(result) == float("inf"):
                return None
            # Numbers are doubles in JavaScript; integral ones come back as int, as JSON reads them.
            return int(result) if result.is_integer() and abs(result) < 2**53 else result
        return _loads(self._call(self._store, result))

    def _commit(
        self, variables: Mapping[str, Value], writable: Writable, admit: Admit | None = None
    ) -> list[WriteResult]:
        """Take every variable the call changed into ``variables``, all or nothing.

        ``admit`` (the macrostep's datamodel cap, ADR 11) sees each write before any is
        applied; a refusal fails the call and the engine reverts.
        """
        text = self._call(self._changes)
        if not text:
            return []
        changed: dict[str, Value] = _loads(text)
        for name in changed:
            if name.startswith("_") or not writable(name):
                raise EvaluationError(f"cannot create or assign the variable {name!r}")
        if not isinstance(variables, MutableMapping):
            raise EvaluationError("the expression changes variables, which are read-only here")
        if admit is not None:
            for name, value in changed.items():
                try:
                    admit(WriteResult(name, value, (), variables.get(name)))
                except ValueRefused as exc:
                    raise EvaluationError(f"cannot store {name!r}: {exc}") from None
        self._call(self._accept, text)
        writes: list[WriteResult] = []
        for name, value in changed.items():
            prior = variables.get(name)
            variables[name] = value
            self._installed[name] = value
            writes.append(WriteResult(name, value, (), prior))
        return writes

    def _store_root(self, variables: Mapping[str, Value], root: str, value: Value) -> None:
        """Take the root's new stored value (the engine holds it installed already)."""
        if not isinstance(variables, MutableMapping):
            raise EvaluationError("the expression changes variables, which are read-only here")
        variables[root] = value
        self._installed[root] = value

    def _recover(self, failure: _JSFailure | None) -> None:
        if failure is not None and failure.limit:
            self._build()
            return
        try:
            self._call(self._revert)
        except _JSFailure:
            self._build()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else ""


_local = threading.local()


def engine() -> Engine:
    """This thread's engine (created on first use)."""
    current: Engine | None = getattr(_local, "engine", None)
    if current is None:
        current = Engine()
        _local.engine = current
    return current
