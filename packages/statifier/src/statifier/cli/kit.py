"""The pieces every statifier command line is made of, on click (ADR 23).

Both console scripts (``statifier``, ``statifier-oban``) and the demo's are built from
these, so that every command reads its arguments, prints and fails the same way:

* :func:`run`: runs a command tree and owns the exit: ``0`` done, ``1`` an error the
  command reports (one line, ``PROG COMMAND: error: MESSAGE``, on stderr), ``2`` a usage
  error (the same line, then where help is), ``130`` interrupted, ``141`` stdout closed
  early (``... | head -1``: quiet, as a process killed by SIGPIPE).
* :class:`Group` and :class:`Command`: a command raising :class:`CommandError`, or one of
  the error types its root :class:`Group` lists, fails with that one line; a group's
  subcommands may live in modules imported only when used (:meth:`Group.lazy`), with
  the install hint of the extra they need.
* Parameter types: :data:`JSON` and :data:`JSON_OBJECT` (bounded: ``statifier.values.
  parse_json``), :data:`DURATION` (``statifier.chart.durations.parse_duration``),
  :class:`Pair` (``NAME=VALUE``).
* Output: :class:`Output` prints a table (tab-separated with a header line) or a record
  (aligned ``label  value`` lines), or, with ``--json`` (:func:`json_option`), one JSON
  object per line; values pass through :func:`text_of` and :func:`json_of`, so a time
  prints as UTC ISO-8601 (:func:`format_time`) and a :class:`Duration` as ``7d 2h``
  (``format_duration``) in text and as milliseconds in JSON. Text output (a value, a
  sentence, a note, an error line) shows its control characters escaped (:func:`visible`:
  ``\\x1b``, ``\\t``, ``\\n``), so what a chart, an event or a stored row holds can
  neither drive the terminal nor break a table's columns and lines; JSON output is exact.
* User code: every command that imports it takes ``--path DIR`` (:func:`path_option`) and
  follows one rule (:func:`set_import_path`): modules come from the import path plus each
  ``--path``, never from the working directory unless it is named (``--path .``);
  :func:`import_module` and :func:`load_functions` say so when a module is found there.
* :func:`install_hint` (``statifier.errors``'s): ``pip install 'statifier-oban[persistence]'``.
* Logs: every :class:`Command` takes ``--log-format text|json`` (``$STATIFIER_LOG_FORMAT``):
  ``json`` logs one object per line on stderr (``statifier.logs``), with trace and span
  ids when tracing is on; :func:`log_format` is the running command's choice (a command
  that configures logging itself, such as ``statifier-oban worker``, reads it).

This module needs click (the ``statifier[cli]`` extra; ``statifier-oban`` has it).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Final, TextIO

import click

from statifier import logs
from statifier.chart.durations import InvalidDuration, format_duration, parse_duration
from statifier.datamodel.host import HostFunctionError, HostFunctions, import_functions
from statifier.errors import install_hint
from statifier.values import ValueRefused, brief, format_time, parse_json

__all__ = [
    "DURATION",
    "EXIT_BROKEN_PIPE",
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "JSON",
    "JSON_OBJECT",
    "LOG_FORMAT_ENV",
    "MAX_JSON_ARGUMENT",
    "ClosedPipe",
    "Command",
    "CommandError",
    "Duration",
    "DurationType",
    "Group",
    "JsonType",
    "Output",
    "Pair",
    "format_duration",
    "format_time",
    "functions_option",
    "import_module",
    "install_hint",
    "json_of",
    "json_option",
    "load_functions",
    "log_format",
    "not_on_path_hint",
    "path_option",
    "run",
    "set_import_path",
    "text_of",
    "version_option",
    "visible",
]

EXIT_ERROR = 1
"""A command failed (the reason is the one line on stderr)."""
EXIT_USAGE = 2
"""The command line was wrong (unknown option, bad value, missing argument)."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT)."""
EXIT_BROKEN_PIPE = 141
"""Standard output was closed before the command finished (128 + SIGPIPE)."""

MAX_JSON_ARGUMENT = 1_000_000
"""The most characters a JSON argument may have (nesting: ``statifier.values.MAX_DEPTH``)."""


class CommandError(click.ClickException):
    """A command cannot go on: printed as ``PROG COMMAND: error: MESSAGE``, status 1."""

    exit_code = EXIT_ERROR

    def __init__(self, message: object) -> None:
        super().__init__(" ".join(str(message).split()) or type(message).__name__)
        ctx = click.get_current_context(silent=True)
        self.command_path: str | None = ctx.command_path if ctx is not None else None


# -- commands ------------------------------------------------------------------------------


class ClosedPipe(Exception):
    """Standard output was closed while a command wrote to it."""


LOG_FORMAT_ENV = "STATIFIER_LOG_FORMAT"
"""The environment variable ``--log-format`` reads when it is not given."""

_LOG_FORMAT = "statifier.log_format"
"""Where a command's context keeps its ``--log-format``."""


def _log_format(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    ctx.meta[_LOG_FORMAT] = value
    if value == "json" and not ctx.resilient_parsing:
        logs.configure("json")
    return value


def _log_format_option() -> click.Option:
    return click.Option(
        ["--log-format"],
        type=click.Choice(logs.FORMATS),
        default="text",
        show_default=True,
        envvar=LOG_FORMAT_ENV,
        show_envvar=True,
        expose_value=False,
        callback=_log_format,
        help="log lines as text or as one JSON object per line (with trace and span ids "
        "when tracing is on)",
    )


def log_format() -> str:
    """The running command's ``--log-format`` (``text`` outside a command)."""
    ctx = click.get_current_context(silent=True)
    found = ctx.meta.get(_LOG_FORMAT) if ctx is not None else None
    return found if isinstance(found, str) else "text"


class Command(click.Command):
    """A command whose failures are one line: :class:`CommandError`, or an instance of one
    of the error types a group above it lists (:attr:`Group.errors`). Every one takes
    ``--log-format``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(_log_format_option())

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; turn a known error into a :class:`CommandError` naming it."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise ClosedPipe from exc  # click would exit 1 for it; run() says 141
        except CommandError as exc:
            exc.command_path = exc.command_path or ctx.command_path
            raise
        except Exception as exc:
            if not isinstance(exc, _known_errors(ctx)):
                raise
            error = CommandError(exc)
            error.command_path = ctx.command_path
            raise error from exc


def _known_errors(ctx: click.Context) -> tuple[type[BaseException], ...]:
    """The error types the groups above ``ctx``'s command declare (:attr:`Group.errors`)."""
    known: list[type[BaseException]] = []
    parent = ctx.parent
    while parent is not None:
        if isinstance(parent.command, Group):
            known.extend(parent.command.errors)
        parent = parent.parent
    return tuple(known)


@dataclass(frozen=True, slots=True)
class _Lazy:
    """A subcommand imported when first used: ``module:attribute``, and what it needs."""

    target: str
    help: str
    needs: str | None
    hint: str | None


class Group(click.Group):
    """A group of :class:`Command` s whose subcommands may be imported only when used.

    ``errors`` are the exception types its commands (and those of its subgroups) may raise
    for a failure the user should read as one line (a library's base error, say).
    """

    command_class = Command
    group_class = type

    def __init__(
        self, *args: Any, errors: tuple[type[BaseException], ...] = (), **kwargs: Any
    ) -> None:
        self._lazy: dict[str, _Lazy] = {}
        self._order: list[str] = []
        super().__init__(*args, **kwargs)
        self.errors = errors
        """The exception types whose errors its commands print as one line (status 1)."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Add a subcommand (listed where it was first added or declared lazy)."""
        super().add_command(cmd, name)
        key = name or cmd.name
        if key is not None and key not in self._order:
            self._order.append(key)

    def lazy(
        self,
        name: str,
        target: str,
        *,
        help: str,
        needs: str | None = None,
        hint: str | None = None,
    ) -> None:
        """Add subcommand ``name``, the click command at ``target`` (``module:attribute``).

        ``needs`` names the top-level package the module imports that an extra provides;
        without it, the subcommand fails with ``hint`` (an :func:`install_hint`).
        """
        self._lazy[name] = _Lazy(target, help, needs, hint)
        if name not in self._order:
            self._order.append(name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand, the lazy ones included, in the order they were added."""
        known = [name for name in self._order if name in self.commands or name in self._lazy]
        return known + [name for name in self.commands if name not in known]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand, imported now if it is lazy (a stub saying what to install if
        the package it needs is missing)."""
        found = self.commands.get(cmd_name)
        if found is not None or cmd_name not in self._lazy:
            return found
        lazy = self._lazy[cmd_name]
        module_name, _, attribute = lazy.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if lazy.needs is None or exc.name != lazy.needs:
                raise
            return _missing(cmd_name, lazy)
        command = getattr(module, attribute)
        if not isinstance(command, click.Command):  # pragma: no cover - a wrong target
            raise TypeError(f"{lazy.target} is not a click command")
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the subcommands without importing the lazy ones (their help is given)."""
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(limit=80)))
            else:
                rows.append((name, self._lazy[name].help))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _missing(name: str, lazy: _Lazy) -> click.Command:
    """A stand-in for a subcommand whose package is not installed: it says what to do."""

    def fail(_args: tuple[str, ...]) -> None:
        raise CommandError(f"{name} needs the package {lazy.needs}: {lazy.hint}")

    return Command(
        name,
        callback=fail,
        params=[click.Argument(["_args"], nargs=-1, type=click.UNPROCESSED)],
        help=f"{lazy.help} (not installed: {lazy.hint})",
        context_settings={"ignore_unknown_options": True, "help_option_names": []},
    )


def run(command: click.Command, argv: Sequence[str] | None, *, prog: str) -> int:
    """Run ``command`` on ``argv`` (default ``sys.argv[1:]``) and return the exit status.

    Never raises for what a user can do: errors print one line (see the module docstring),
    help and ``--version`` print and return 0, and a closed standard output ends the run
    quietly.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            result = command.main(args=args, prog_name=prog, standalone_mode=False)
        finally:
            sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
    except (BrokenPipeError, ClosedPipe):
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (KeyboardInterrupt, click.Abort):
        return EXIT_INTERRUPTED
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else prog
        _error(where, exc.format_message())
        if exc.ctx is not None and exc.ctx.command.get_help_option(exc.ctx) is not None:
            print(f"Try '{where} --help' for help.", file=sys.stderr)
        return EXIT_USAGE
    except CommandError as exc:
        _error(exc.command_path or prog, exc.format_message())
        return exc.exit_code
    except click.ClickException as exc:
        _error(prog, exc.format_message())
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return result if isinstance(result, int) else 0


def _error(where: str, message: str) -> None:
    # A message quotes what it failed on (an event name, a chart's text): escaped, as
    # every text output is.
    print(visible(f"{where}: error: {message}"), file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    """Point standard output at the null device, so that the interpreter's last flush at
    exit does not raise about the closed pipe again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured stream)
        pass


def version_option[F: Callable[..., Any]](distribution: str) -> Callable[[F], F]:
    """``--version``: ``COMMAND X.Y.Z`` (the command path, then the installed version of
    ``distribution``)."""

    def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if not value or ctx.resilient_parsing:
            return
        print(f"{ctx.command_path} {metadata.version(distribution)}")
        ctx.exit(0)

    return click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=show,
        help="Show the version and exit.",
    )


# -- parameter types -----------------------------------------------------------------------


class JsonType(click.ParamType[Any, Any]):
    """A JSON argument, read by :func:`statifier.values.parse_json` within
    :data:`MAX_JSON_ARGUMENT` characters and ``MAX_DEPTH`` levels; ``object_only`` takes a
    JSON object only."""

    name = "json"

    def __init__(self, *, object_only: bool = False) -> None:
        self.object_only = object_only

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The parsed value (a usage error naming the option if it is not one)."""
        if not isinstance(value, str):
            return value
        try:
            parsed = parse_json(value, max_chars=MAX_JSON_ARGUMENT)
        except ValueRefused as exc:
            self.fail(f"{brief(value, 60)}: {exc}", param, ctx)
        if self.object_only and not isinstance(parsed, dict):
            self.fail(f"{brief(value, 60)}: expected a JSON object", param, ctx)
        return parsed


JSON = JsonType()
"""Any JSON value."""
JSON_OBJECT = JsonType(object_only=True)
"""A JSON object."""


class DurationType(click.ParamType[int, Any]):
    """A duration as ``parse_duration`` reads it (``7d``, ``15min``, ``1h 30m``), in ms."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """Milliseconds (a usage error naming the option if ``value`` is no duration)."""
        if isinstance(value, int):
            return value
        try:
            return parse_duration(str(value))
        except InvalidDuration as exc:
            self.fail(str(exc), param, ctx)


DURATION = DurationType()
"""A duration, converted to milliseconds."""


class Pair(click.ParamType[tuple[str, str], Any]):
    """``NAME=VALUE`` as a ``(name, value)`` tuple, both non-empty; ``example`` shows one."""

    name = "pair"

    def __init__(self, metavar: str, example: str) -> None:
        self.metavar = metavar
        self.example = example

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str:
        """``NAME=VALUE`` as given."""
        return self.metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The pair (a usage error showing the expected shape otherwise)."""
        if isinstance(value, tuple):
            return value
        name, sep, rest = str(value).partition("=")
        if not sep or not name.strip() or not rest.strip():
            self.fail(f"expected {self.metavar} (e.g. {self.example}), not {value!r}", param, ctx)
        return name.strip(), rest.strip()


# -- output --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Duration:
    """A duration to print: ``7d 2h`` in text, whole milliseconds in JSON."""

    ms: int


_UNICODE_CONTROLS: Final = (
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
)
"""The marks and overrides that reorder or break the text around them (left-to-right and
right-to-left marks, embeddings, overrides and isolates), and the line and paragraph
separators."""

_ESCAPES: dict[int, str] = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))},
    **{code: f"\\u{code:04x}" for code in _UNICODE_CONTROLS},
    ord("\t"): "\\t",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
}
"""How :func:`visible` writes each control character: as Python writes it in a string."""

_CONTROL = re.compile(f"[{re.escape(''.join(map(chr, _ESCAPES)))}]")
"""Any character :func:`visible` escapes: a text without one is returned as it is."""


def visible(text: str) -> str:
    """``text`` with its control characters escaped as Python writes them (``\\x1b``,
    ``\\x9b``, ``\\t``, ``\\n``, ``\\u202e``): the C0 characters, DEL, the C1 characters,
    and the marks, embeddings, overrides and isolates of bidirectional text with the line
    and paragraph separators, which make a line read other than it is.

    ESC, BEL and CSI start the sequences that retitle a window, clear the screen or move
    the cursor; a tab or a line break inside a table cell, a sentence or an error line
    moves the columns and lines after it. A backslash is left as it is: text output is for
    reading, and ``--json`` gives every character exactly.
    """
    if _CONTROL.search(text) is None:
        return text
    return text.translate(_ESCAPES)


def text_of(value: object) -> str:
    """How a value reads in a table cell or a record line (control characters escaped:
    :func:`visible`)."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Duration):
        return format_duration(value.ms)
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    # Visible already: json.dumps escapes every character outside printable ASCII.
    return json.dumps(json_of(value), sort_keys=True)


def json_of(value: object) -> Any:
    """The JSON form of a value: times as ISO-8601 strings, durations in milliseconds."""
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, Duration):
        return value.ms
    if isinstance(value, Mapping):
        return {str(key): json_of(item) for key, item in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        items = sorted(value, key=repr) if isinstance(value, frozenset | set) else value
        return [json_of(item) for item in items]
    if value is None or isinstance(value, str | bool | int | float):
        return value
    return repr(value)


def json_option[F: Callable[..., Any]](function: F) -> F:
    """``--json``: print JSON, one object per line, instead of text."""
    return click.option("--json", "as_json", is_flag=True, help="print JSON, one object per line")(
        function
    )


class Output:
    """Where a command prints what it found: text for people, or JSON with ``--json``."""

    def __init__(self, as_json: bool, out: TextIO | None = None) -> None:
        self.as_json = as_json
        self.out = out

    def _print(self, text: str) -> None:
        print(text, file=self.out if self.out is not None else sys.stdout)

    def table(
        self, columns: Sequence[str], rows: Iterable[Mapping[str, object]], *, header: bool = True
    ) -> None:
        """Rows with the same columns: tab-separated under a header line, or one JSON
        object per row."""
        if not self.as_json and header:
            self._print("\t".join(columns))
        for row in rows:
            if self.as_json:
                self.record_json({column: row.get(column) for column in columns})
            else:
                self._print("\t".join(text_of(row.get(column)) for column in columns))

    def record(self, fields: Sequence[tuple[str, object]], data: object | None = None) -> None:
        """One thing: ``label  value`` lines aligned on the labels, or one JSON object
        (``data`` if given, else the fields by label)."""
        if self.as_json:
            self.record_json(data if data is not None else dict(fields))
            return
        width = max((len(label) for label, _ in fields), default=0)
        for label, value in fields:
            self._print(f"{label:<{width}}  {text_of(value)}")

    def record_json(self, data: object) -> None:
        """One JSON object on one line (JSON mode only)."""
        self._print(json.dumps(json_of(data), sort_keys=False, separators=(",", ":")))

    def line(self, text: str, data: object | None = None) -> None:
        """A sentence in text mode (control characters escaped: :func:`visible`); ``data``
        as one JSON object in JSON mode."""
        if self.as_json:
            if data is not None:
                self.record_json(data)
        else:
            self._print(visible(text))

    def note(self, text: str) -> None:
        """A line for the person at the terminal, on stderr in both modes (control
        characters escaped: :func:`visible`)."""
        print(visible(text), file=sys.stderr, flush=True)


# -- user code -----------------------------------------------------------------------------


def path_option[F: Callable[..., Any]](function: F) -> F:
    """``--path DIR`` (repeatable): where the command imports user code from."""
    return click.option(
        "--path",
        "paths",
        multiple=True,
        metavar="DIR",
        help="add DIR to the import path before importing user code (repeatable; the "
        "working directory is not on it unless named, e.g. --path .)",
    )(function)


def set_import_path(paths: Sequence[str]) -> None:
    """The one rule of every command that imports user code: ``paths`` first, then the
    interpreter's path, without the working directory unless ``paths`` names it.

    ``python -m`` puts the working directory first on the path; a command must not import
    whatever file sits where it was started, so that entry (and ``''``) is removed.
    """
    cwd = os.getcwd()
    wanted = [os.path.abspath(path) for path in paths]
    if sys.path and sys.path[0] in ("", cwd) and cwd not in wanted:
        del sys.path[0]
    while "" in sys.path:
        sys.path.remove("")
    rest = [entry for entry in sys.path if entry not in wanted]
    sys.path[:] = [*dict.fromkeys(wanted), *rest]
    importlib.invalidate_caches()


def not_on_path_hint(module: str) -> str | None:
    """Why ``module`` does not import when its file is in the working directory: the
    sentence naming ``--path``, or None when that is not the reason."""
    top = module.partition(".")[0]
    if not top.isidentifier():
        return None
    try:
        if importlib.util.find_spec(top) is not None:
            return None
    except (ImportError, ValueError):
        return None
    cwd = Path.cwd()
    here = (cwd / f"{top}.py").is_file() or (cwd / top).is_dir()
    on_path = {os.path.abspath(entry or ".") for entry in sys.path}
    if not here or str(cwd) in on_path:
        return None
    return (
        f"{top!r} is in the working directory, which is not on the import path: "
        "add --path . (or set PYTHONPATH)"
    )


def import_module(name: str, option: str) -> ModuleType:
    """Import the user module ``name`` that ``option`` names; :class:`CommandError` (with
    the ``--path`` hint when it applies) if it does not import."""
    try:
        return importlib.import_module(name)
    except Exception as exc:
        hint = not_on_path_hint(name) if isinstance(exc, ModuleNotFoundError) else None
        detail = hint or f"{type(exc).__name__}: {exc}"
        raise CommandError(f"{option} {name}: cannot import {name!r}: {detail}") from None


def load_functions(spec: str | None, option: str = "--functions") -> HostFunctions | None:
    """The host functions ``MODULE:NAME`` names (None without one), imported from the path
    :func:`set_import_path` set; :class:`CommandError` if they cannot be loaded."""
    if spec is None:
        return None
    try:
        return import_functions(spec)
    except HostFunctionError as exc:
        module = spec.partition(":")[0]
        hint = not_on_path_hint(module)
        if hint is None:
            raise CommandError(f"{option} {exc}") from None
        raise CommandError(f"{option} {spec}: cannot import {module!r}: {hint}") from None


def functions_option[F: Callable[..., Any]](function: F) -> F:
    """``--functions MODULE:NAME`` (or ``$STATIFIER_FUNCTIONS``): the host functions charts
    may call, imported by :func:`load_functions`."""
    return click.option(
        "--functions",
        metavar="MODULE:NAME",
        envvar="STATIFIER_FUNCTIONS",
        show_envvar=True,
        help="a mapping of host functions the charts call, e.g. myapp.rules:FUNCTIONS",
    )(function)
