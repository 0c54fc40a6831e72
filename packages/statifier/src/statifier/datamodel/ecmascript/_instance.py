"""One QuickJS context per chart instance: where its variables live between calls (ADR 22).

An :class:`Instance` is a hardened context (``prelude.js``) of its own runtime, so its heap
limit, its pending jobs and everything a chart does to its globals belong to it alone. It
compiles the sources it runs once and keeps them. Nothing here knows about states: the
store (:mod:`.variables`) decides which instance a call runs in.

Compile-time checks run in one more context per thread, which only compiles (chart code
never runs there).
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import itertools
import json
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

from statifier.datamodel.base import DatamodelUnavailable, EvaluationError
from statifier.datamodel.ecmascript.limits import (
    DEFAULT_LIMITS,
    ENCODE_SECONDS,
    MAX_CACHED_FUNCTIONS,
    MAX_JOBS,
    Limits,
)
from statifier.datamodel.host import HostFunctions

if TYPE_CHECKING:
    from statifier.chart.model import Machine

_PRELUDE: Final = resources.files(__package__).joinpath("prelude.js").read_text(encoding="utf-8")
_LIMIT_MARKERS: Final = ("out of memory", "interrupted", "stack size exceeded", "stack overflow")
_CONFIG: Final = ("ecmascript", "setup")
"""The key, in a machine's ``_cache``, of what every instance of that chart is set up with."""


def load_quickjs() -> Any:
    """Import the QuickJS binding, or raise :class:`DatamodelUnavailable`."""
    try:
        return importlib.import_module("_quickjs")
    except ImportError as exc:
        raise DatamodelUnavailable(
            "the ecmascript datamodel needs the QuickJS engine: "
            "install the extra with `pip install 'statifier[ecmascript]'`"
        ) from exc


BOX: Final[type] = load_quickjs().Object if importlib.util.find_spec("_quickjs") else object
"""The binding's type for a JavaScript object handed to Python (a box to read as JSON)."""


class JSFailure(Exception):
    """A call into the engine raised; ``limit`` when a resource limit stopped it."""

    def __init__(self, message: str, limit: bool) -> None:
        super().__init__(message)
        self.message = message
        self.limit = limit

    def error(self) -> EvaluationError:
        """The evaluation error the chart sees."""
        return EvaluationError(self.message)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else ""


class _Clock:
    """The time limit of one runtime's calls, kept by the interrupt handler (``_interrupted``).

    A call's limit starts at the engine's first interrupt check in the call (QuickJS checks
    once every 10,000 or so function calls and loop turns), not at the call: a call that
    never gets there ran less than that, and reads no clock. ``deadline`` 0.0 says the call
    has not been checked yet; every call into the engine sets it so first (``_timed``)."""

    __slots__ = ("deadline", "limit")

    def __init__(self, limit: float) -> None:
        self.deadline = 0.0
        self.limit = limit


_CLOCKS: Final[dict[int, _Clock]] = {}
"""The clock of each runtime whose interrupt handler is ``_interrupted``, by its number
(the handler's opaque argument)."""
_numbers = itertools.count(1)


def _interrupted(_runtime: int | None, number: int | None) -> int:
    """QuickJS's interrupt handler: 1 (stop the call) once its CPU time passes the limit.

    It must never raise (the engine would read nothing and go on): any failure, and a
    runtime whose ``Context`` is gone, stops the call."""
    try:
        clock = _CLOCKS.get(number or 0)
        if clock is None:
            return 1
        now = time.process_time()
        deadline = clock.deadline
        if deadline == 0.0:
            clock.deadline = now + clock.limit
            return 0
        return 1 if now >= deadline else 0
    except BaseException:  # a handler that raised would not stop the call
        return 1


_HANDLER_TYPE: Final = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_HANDLER: Final = _HANDLER_TYPE(_interrupted)
"""One handler for every runtime (never freed: no runtime can outlive it)."""


def _runtime_of(quickjs: Any, context: Any) -> tuple[Any, int] | None:
    """The QuickJS library and the ``JSRuntime`` pointer of the binding's ``context``, when
    the binding is laid out as this module knows it (None: use its own time limit).

    The binding (quickjs-ng 0.17) keeps the runtime and the context pointers right after
    the object header; both are checked against the library before anything is written."""
    if quickjs.Context.__basicsize__ != _CONTEXT_SIZE:
        return None
    try:
        library = ctypes.CDLL(quickjs.__file__)
        get_runtime = library.JS_GetRuntime
        set_handler = library.JS_SetInterruptHandler
        set_memory = library.JS_SetMemoryLimit
    except (OSError, AttributeError):
        return None
    get_runtime.argtypes = [ctypes.c_void_p]
    get_runtime.restype = ctypes.c_void_p
    set_handler.argtypes = [ctypes.c_void_p, _HANDLER_TYPE, ctypes.c_void_p]
    set_handler.restype = None
    set_memory.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    set_memory.restype = None
    header = object.__basicsize__
    runtime = ctypes.c_void_p.from_address(id(context) + header).value
    js_context = ctypes.c_void_p.from_address(id(context) + header + _POINTER).value
    if not runtime or not js_context or get_runtime(js_context) != runtime:
        return None
    # The runtime pointer is the binding's own: a limit set through it reads back there.
    probe = context.memory()["malloc_limit"] + 1
    set_memory(runtime, probe)
    if context.memory()["malloc_limit"] != probe:  # pragma: no cover - checked above
        return None
    return library, runtime


_POINTER: Final = ctypes.sizeof(ctypes.c_void_p)
_CONTEXT_SIZE: Final = object.__basicsize__ + 8 * _POINTER
"""The binding's ``RuntimeData``: the header, then two pointers, a flag, a ``clock_t``, a
thread state, the interrupt data (two ``clock_t``) and a list's head."""


class Context:
    """A hardened QuickJS context: the prelude's functions, and calls that map errors.

    Each call is held to ``Limits.cpu_seconds`` of CPU time by an interrupt handler of our
    own (``_interrupted``): the binding's time limit reads the process's CPU clock when
    every call starts (a system call, about 2 us here: as much as the call itself), where
    ours reads it only from the engine's first interrupt check in a call. When the binding
    is not laid out as expected, its own time limit holds calls instead."""

    def __init__(self, limits: Limits) -> None:
        quickjs = load_quickjs()
        self._quickjs = quickjs
        context = quickjs.Context()
        context.set_memory_limit(limits.memory_bytes)
        context.set_max_stack_size(limits.stack_bytes)
        self.context = context
        self.limits = limits
        self.clock = _Clock(limits.cpu_seconds)
        found = _runtime_of(quickjs, context)
        if found is None:
            self._own = False
            context.set_time_limit(limits.cpu_seconds)
        else:
            self._own = True
            library, runtime = found
            number = next(_numbers)
            _CLOCKS[number] = self.clock
            weakref.finalize(self, _CLOCKS.pop, number, None)
            library.JS_SetInterruptHandler(runtime, _HANDLER, number)
        context.set_memory_limit(limits.memory_bytes)
        self.clock.deadline = 0.0
        self.api = context.eval(_PRELUDE)(context.globalThis)

    def pick(self, name: str) -> Callable[..., Any]:
        """A function of the prelude's API, by name (each call of it starts its time limit
        afresh)."""
        return _timed(self.clock, self.api(name))

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)``; a JavaScript error becomes :class:`JSFailure`."""
        self.clock.deadline = 0.0
        try:
            return function(*args)
        except Exception as exc:
            raise self.failure(exc) from None

    def failure(self, exc: Exception) -> JSFailure:
        """The :class:`JSFailure` a call into the engine that raised ``exc`` failed with
        (``exc`` itself is raised again when it is none of the engine's). Hot paths call
        the engine's functions themselves and send what they raise here."""
        if isinstance(exc, self._quickjs.StackOverflow):
            return JSFailure(_first_line(exc), limit=True)
        if isinstance(exc, self._quickjs.JSException):
            message = _first_line(exc)
            lowered = message.lower()
            limit = message in ("", "null") or any(m in lowered for m in _LIMIT_MARKERS)
            return JSFailure("out of memory" if message == "null" else message, limit)
        if isinstance(exc, TypeError | ValueError | OverflowError):
            # The binding could not convert an argument or a result.
            return JSFailure(f"the value cannot be converted: {exc}", limit=False)
        raise exc

    def set_time_limit(self, seconds: float) -> None:
        """Hold the calls from now on to ``seconds`` of CPU time each."""
        self.clock.limit = seconds
        if not self._own:
            self.context.set_time_limit(seconds)

    def call_long(self, function: Callable[..., Any], *args: Any) -> Any:
        """``call`` under the time limit of a whole-datamodel encode or decode (its cost
        grows with the datamodel, which the cap bounds)."""
        self.set_time_limit(max(self.limits.cpu_seconds, ENCODE_SECONDS))
        try:
            return self.call(function, *args)
        finally:
            self.set_time_limit(self.limits.cpu_seconds)

    @contextmanager
    def roomy(self) -> Iterator[None]:
        """Calls made inside have twice the heap limit and the time of a whole-datamodel
        encode: putting values back or writing them out after a call that failed, when the
        heap may be full of what the call made (what it wrote is not stored then)."""
        context = self.context
        context.set_memory_limit(2 * self.limits.memory_bytes)
        self.set_time_limit(max(self.limits.cpu_seconds, ENCODE_SECONDS))
        try:
            yield
        finally:
            context.set_memory_limit(self.limits.memory_bytes)
            self.set_time_limit(self.limits.cpu_seconds)


def _timed(clock: _Clock, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (one of the engine's), its time limit started afresh at each call."""

    def call(*args: Any) -> Any:
        clock.deadline = 0.0
        try:
            return function(*args)
        finally:
            # What runs outside these calls (a box's JSON) starts afresh too.
            clock.deadline = 0.0

    return call


class Setup:
    """What every instance of one chart starts with: the chart's function literals (the
    only functions a stored position may bring back) and its host functions."""

    __slots__ = ("functions", "host", "revivable")

    def __init__(self, revivable: dict[str, str], host: HostFunctions) -> None:
        self.revivable = json.dumps(sorted(revivable.items()))
        self.host = host
        self.functions = json.dumps(sorted(host))


def setup_of(machine: Machine) -> Setup:
    """The :class:`Setup` of ``machine``'s instances (worked out once per machine)."""
    found: Setup | None = machine._cache.get(_CONFIG)
    if found is None:
        revivable: dict[str, str] = {}
        host: HostFunctions | None = None
        for compiled in _compiled(machine):
            for text, how in compiled.analysis.functions:
                revivable.setdefault(text, how)
            if host is None and compiled.functions:
                host = compiled.functions
        found = machine._cache[_CONFIG] = Setup(revivable, host or HostFunctions())
    return found


def _compiled(machine: Machine) -> Iterator[Any]:
    """Every ECMAScript expression, location and script the compiled chart holds."""
    from statifier.datamodel.ecmascript.compiled import Compiled

    seen: set[int] = set()
    pending: list[Any] = [
        machine.states,
        machine.transitions,
        machine.content,
        machine.data,
        machine.scripts,
    ]
    while pending:
        item = pending.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Compiled):
            yield item
        elif isinstance(item, tuple | list):
            pending.extend(item)
        elif is_dataclass(item) and not isinstance(item, type):
            pending.extend(
                getattr(item, f.name) for f in fields(item) if not f.name.startswith("_")
            )


class Instance:
    """One chart instance's context and what it keeps: compiled sources, the Python values
    of the system variables it holds, and the stored form Python last read."""

    __slots__ = (
        "api",
        "cap",
        "context",
        "current",
        "functions",
        "generation",
        "host",
        "limits",
        "names",
        "pending",
        "plans",
        "previous",
        "setup",
        "starting",
        "stored",
        "system",
        "version",
    )

    def __init__(self, setup: Setup, cap: int, limits: Limits = DEFAULT_LIMITS) -> None:
        context = Context(limits)
        self.context = context
        self.setup = setup
        self.api = _Api(context)
        self.functions: dict[tuple[Any, ...], Any] = {}
        self.plans: dict[Any, Any] = {}
        """How each source runs here (``variables._Plan``), by compiled source."""
        self.limits: Any = None
        """The macrostep limits the engine was last held to (by identity)."""
        self.generation = 0
        self.current: Callable[[], Any] | None = None
        """A weak reference to what holds the variables of the state the last call made
        (``variables.Generation``), while the engine alone holds them."""
        self.previous: Callable[[], Any] | None = None
        """The same for the state the current (or last) call resumed."""
        self.starting = False
        self.pending: tuple[Any, ...] | None = None
        """The event (``setEvent``'s arguments) a call set, until its next use of the
        engine."""
        """A call resumed the instance and has not written yet (the engine's log of what
        its writes replace starts with its first write)."""
        self.host = setup.host
        self.system: dict[str, Any] = {}
        self.names: set[str] = set()
        """The user variables, kept here between calls."""
        self.stored: dict[str, Any] = {}
        """The user variables' stored form as of ``version``."""
        self.version = -1
        self.cap = cap
        context.call(self.api.setup, setup.revivable, float(cap))
        if setup.host:
            context.call(self.api.define_host, setup.functions)

    def compiled(self, kind: str, source: str) -> Any:
        """The JavaScript function ``source`` compiles to here (compiled once)."""
        key = (kind, source)
        function = self.functions.get(key)
        if function is None:
            api = self.api
            compile_ = api.compile_expression if kind == "expression" else api.compile_location
            function = self.context.call(compile_, source)
            if len(self.functions) >= MAX_CACHED_FUNCTIONS:
                self.functions.clear()
                self.plans.clear()
            self.functions[key] = function
        return function

    def target(self, object_source: str, key: str, computed: bool) -> Any:
        """The function giving ``[object, key]`` a member location writes into (None when
        its parts do not compile on their own)."""
        cache_key = ("target", object_source, key, computed)
        function = self.functions.get(cache_key)
        if function is None:
            try:
                function = self.context.call(self.api.compile_target, object_source, key, computed)
            except JSFailure:
                return None
            self.functions[cache_key] = function
        return function

    def drain(self) -> None:
        """Run the promise jobs the last call queued, within the call's limits.

        Jobs left over (a chain that keeps queueing, or one past the time limit) fail the
        call: the caller aborts it, and the instance must not be used again (QuickJS
        cannot drop a queued job).
        """
        execute = self.context.context.execute_pending_job
        deadline = time.process_time() + self.context.limits.cpu_seconds
        for _ in range(MAX_JOBS):
            if not self.context.call(execute):
                return
            if time.process_time() > deadline:
                break
        raise JSFailure("promise jobs did not settle within the call's limits", limit=True)


class _Api:
    """The prelude's functions, looked up once (each starts its call's time limit afresh:
    ``Context.pick``), and the three an event calls, raw, with the clock whose ``deadline``
    the hot paths that call them reset themselves before and after (``_timed``, inlined)."""

    __slots__ = (
        "abort",
        "answer_host",
        "assign",
        "bind",
        "block_assign",
        "block_log",
        "block_progress",
        "clock",
        "compile_expression",
        "compile_location",
        "compile_target",
        "declare",
        "decode",
        "define_host",
        "evaluate",
        "fetch",
        "foreach_array",
        "foreach_end",
        "foreach_item",
        "forget_host_answers",
        "guard_add",
        "guard_progress",
        "new_block",
        "new_guards",
        "next_generation",
        "previous_stored",
        "raw_read_guards",
        "raw_read_guards_event",
        "raw_run_block",
        "read",
        "read_event",
        "read_guards",
        "read_guards_event",
        "run_block",
        "run_script",
        "set_cap",
        "set_event",
        "set_event_json",
        "set_system",
        "settle",
        "setup",
    )

    def __init__(self, context: Context) -> None:
        pick = context.pick
        self.abort = pick("abort")
        self.answer_host = pick("answerHost")
        self.assign = pick("assign")
        self.bind = pick("bind")
        self.block_assign = pick("blockAssign")
        self.block_log = pick("blockLog")
        self.block_progress = pick("blockProgress")
        self.compile_expression = pick("compileExpression")
        self.compile_location = pick("compileLocation")
        self.compile_target = pick("compileTarget")
        self.declare = pick("declare")
        self.decode = pick("decode")
        self.define_host = pick("defineHost")
        self.evaluate = pick("evaluate")
        self.fetch = pick("fetch")
        self.foreach_array = pick("foreachArray")
        self.foreach_end = pick("foreachEnd")
        self.foreach_item = pick("foreachItem")
        self.forget_host_answers = pick("forgetHostAnswers")
        self.guard_add = pick("guardAdd")
        self.guard_progress = pick("guardProgress")
        self.new_block = pick("newBlock")
        self.new_guards = pick("newGuards")
        self.next_generation = pick("nextGeneration")
        self.previous_stored = pick("previousStored")
        self.read = pick("read")
        self.read_event = pick("readEvent")
        self.read_guards = pick("readGuards")
        self.read_guards_event = pick("readGuardsEvent")
        self.run_block = pick("runBlock")
        self.run_script = pick("runScript")
        self.set_cap = pick("setCap")
        self.set_event = pick("setEvent")
        self.set_event_json = pick("setEventJSON")
        self.set_system = pick("setSystem")
        self.settle = pick("settle")
        self.setup = pick("setup")
        self.clock = context.clock
        raw = context.api
        self.raw_read_guards = raw("readGuards")
        self.raw_read_guards_event = raw("readGuardsEvent")
        self.raw_run_block = raw("runBlock")


class Checker:
    """A context that only compiles: the syntax checks of ``statifier.compile``."""

    def __init__(self) -> None:
        self.context = Context(DEFAULT_LIMITS)
        self._expression = self.context.pick("compileExpression")
        self._location = self.context.pick("compileLocation")
        self._script = self.context.pick("checkScript")
        self.globals: frozenset[str] = frozenset(
            json.loads(self.context.call(self.context.pick("globals")))
        )

    def syntax_error(self, kind: str, source: str) -> str | None:
        """Why ``source`` does not compile as a ``kind`` (expression, location, script)."""
        check = (
            self._script
            if kind == "script"
            else self._expression
            if kind == "expression"
            else self._location
        )
        try:
            self.context.call(check, source)
        except JSFailure as failure:
            if failure.limit:
                _local.checker = Checker()
            return failure.message
        return None


_local = threading.local()


def checker() -> Checker:
    """This thread's compile-time checker (made on first use)."""
    current: Checker | None = getattr(_local, "checker", None)
    if current is None:
        current = _local.checker = Checker()
    return current
