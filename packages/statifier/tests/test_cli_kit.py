"""``statifier.cli.kit``: the pieces both command lines share, pinned.

Bounded JSON arguments, the one duration and time format, the table and record printer,
the exit statuses and the one error format, the import-path rule for user code, and a
closed pipe, which needs a real process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import click
import pytest
from statifier.chart.durations import parse_duration
from statifier.cli import kit, main
from statifier.values import MAX_DEPTH, ValueRefused, parse_json

REPO = Path(__file__).resolve().parents[3]
CARD = REPO / "examples" / "card_authorization.scxml"


# -- bounded JSON ----------------------------------------------------------------------------


def test_json_at_the_depth_limit_parses_and_one_deeper_is_refused() -> None:
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    with pytest.raises(ValueRefused, match=f"^JSON nested more than {MAX_DEPTH} levels deep$"):
        parse_json("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_json_ten_thousand_deep_is_one_line_not_a_recursion_error() -> None:
    with pytest.raises(ValueRefused) as refused:
        parse_json('{"a":' * 10_000 + "1" + "}" * 10_000)
    assert "\n" not in str(refused.value)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = json.dumps(["[" * 1_000, '\\"{' * 500])
    assert parse_json(text) == ["[" * 1_000, '\\"{' * 500]


def test_json_at_the_size_limit_parses_and_one_more_character_is_refused() -> None:
    text = '"' + "x" * 98 + '"'
    assert parse_json(text, max_chars=100) == "x" * 98
    with pytest.raises(ValueRefused, match=r"^JSON longer than 99 characters \(100\)$"):
        parse_json(text, max_chars=99)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a": -Infinity}', "{x", ""])
def test_what_is_not_json_is_refused(text: str) -> None:
    with pytest.raises(ValueRefused, match=r"^not JSON: "):
        parse_json(text)


def test_a_json_option_names_itself_and_the_bound() -> None:
    @click.command(cls=kit.Command)
    @click.option("--data", type=kit.JSON)
    @click.option("--meta", type=kit.JSON_OBJECT)
    def command(data: Any, meta: Any) -> None:
        print(json.dumps([data, meta]))

    deep = "[" * 10_000
    assert kit.run(command, ["--data", deep], prog="prog") == kit.EXIT_USAGE
    assert kit.run(command, ["--meta", "[1]"], prog="prog") == kit.EXIT_USAGE
    assert kit.run(command, ["--data", "[1]", "--meta", '{"a": 1}'], prog="prog") == 0


# -- durations and times ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0ms"),
        (999, "999ms"),
        (1_000, "1s"),
        (1_500, "1.5s"),
        (59_999, "59.999s"),
        (60_000, "1m"),
        (90_000, "1m 30s"),
        (900_000, "15m"),
        (3_600_000, "1h"),
        (86_400_000, "1d"),
        (7 * 86_400_000 + 2 * 3_600_000, "7d 2h"),
        (86_400_000 + 61_001, "1d 1m 1.001s"),
        (-1_500, "-1.5s"),
    ],
)
def test_durations_print_with_their_units(ms: int, text: str) -> None:
    assert kit.format_duration(ms) == text
    assert kit.text_of(kit.Duration(ms)) == text
    assert kit.json_of(kit.Duration(ms)) == ms
    if ms >= 0:
        assert parse_duration(text) == ms


def test_times_print_as_utc_iso_8601_to_the_second() -> None:
    moment = datetime(2026, 12, 2, 9, 30, 5, 999_000, tzinfo=timezone(timedelta(hours=2)))
    assert kit.format_time(moment) == "2026-12-02T07:30:05Z"
    assert kit.format_time(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05Z"
    assert kit.json_of({"at": datetime(2026, 1, 2, tzinfo=UTC)}) == {"at": "2026-01-02T00:00:00Z"}


# -- the printer -----------------------------------------------------------------------------


def test_a_table_is_tab_separated_under_a_header_or_one_json_object_per_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [
        {"id": "a", "n": 1, "when": datetime(2026, 1, 2, tzinfo=UTC), "left": None},
        {"id": "b", "n": 2, "when": None, "left": kit.Duration(90_000)},
    ]
    kit.Output(False).table(("id", "n", "when", "left"), rows)
    assert capsys.readouterr().out.splitlines() == [
        "id\tn\twhen\tleft",
        "a\t1\t2026-01-02T00:00:00Z\t-",
        "b\t2\t-\t1m 30s",
    ]
    kit.Output(True).table(("id", "n", "when", "left"), rows)
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [
        {"id": "a", "n": 1, "when": "2026-01-02T00:00:00Z", "left": None},
        {"id": "b", "n": 2, "when": None, "left": 90_000},
    ]


def test_a_record_aligns_its_labels_or_is_one_json_object(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fields: list[tuple[str, object]] = [("id", "x"), ("datamodel", {"b": 1, "a": [1]})]
    kit.Output(False).record(fields)
    assert capsys.readouterr().out.splitlines() == [
        "id         x",
        'datamodel  {"a": [1], "b": 1}',
    ]
    kit.Output(True).record(fields)
    assert json.loads(capsys.readouterr().out) == {"id": "x", "datamodel": {"b": 1, "a": [1]}}


# -- control characters in text output ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x00", "\\x00"),  # C0: NUL, BEL, ESC, the last one
        ("\x07", "\\x07"),
        ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),
        ("\x1f", "\\x1f"),
        ("a\tb", "a\\tb"),  # a cell's tab and line breaks would move the columns and rows
        ("a\nb", "a\\nb"),
        ("a\rb", "a\\rb"),
        ("\x7f", "\\x7f"),  # DEL
        ("\x80", "\\x80"),  # C1: the first, NEL, CSI, the last one
        ("\x85", "\\x85"),
        ("\x9b2J", "\\x9b2J"),
        ("\x9f", "\\x9f"),
        ("\u200e\u200f", "\\u200e\\u200f"),  # marks, separators, embeddings, overrides, isolates
        ("\u2028\u2029", "\\u2028\\u2029"),
        ("\u202a\u202e", "\\u202a\\u202e"),
        ("\u2066\u2069", "\\u2066\\u2069"),
        ("\u200d\u2027\u202f\u2065\u206a", "\u200d\u2027\u202f\u2065\u206a"),  # their neighbours
        (" \xa0é中🙂\\x1b", " \xa0é中🙂\\x1b"),  # printable, and a backslash: as they are
    ],
)
def test_text_output_escapes_every_control_character(text: str, shown: str) -> None:
    assert kit.visible(text) == shown
    assert kit.text_of(text) == shown


def test_values_print_escaped_in_text_and_exact_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    evil = "go\x1b]0;owned\x07\tcell\nrow\x7f\x9b1A"
    shown = "go\\x1b]0;owned\\x07\\tcell\\nrow\\x7f\\x9b1A"
    text, as_json = kit.Output(False), kit.Output(True)
    text.table(("event", "data"), [{"event": evil, "data": {"v": evil}}])
    text.record([("event", evil)])
    text.line(f"sent {evil}")
    text.note(f"notice: {evil}")
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "event\tdata",
        f'{shown}\t{{"v": "go\\u001b]0;owned\\u0007\\tcell\\nrow\\u007f\\u009b1A"}}',
        f"event  {shown}",
        f"sent {shown}",
    ]
    assert captured.err == f"notice: {shown}\n"
    as_json.table(("event",), [{"event": evil}])
    as_json.record([("event", evil)])
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [{"event": evil}, {"event": evil}]


# -- exits and the one error format ----------------------------------------------------------


class LibraryError(Exception):
    """Stands in for a library's base error, which a group declares."""


@click.group(cls=kit.Group, errors=(LibraryError,))
def tool() -> None:
    """A group to run."""


@tool.command()
@click.argument("what")
def act(what: str) -> int:
    """Fail in the way ``what`` names."""
    if what == "command":
        raise kit.CommandError("it   cannot\n go on")
    if what == "library":
        raise LibraryError("the library said no")
    if what == "escape":
        raise LibraryError("no event 'x\x1b[2J\x9b1A'")
    if what == "interrupt":
        raise KeyboardInterrupt
    if what == "other":
        raise RuntimeError("a bug")
    return 3


@pytest.mark.parametrize(
    ("what", "status", "err"),
    [
        ("command", kit.EXIT_ERROR, "tool act: error: it cannot go on\n"),
        ("library", kit.EXIT_ERROR, "tool act: error: the library said no\n"),
        ("escape", kit.EXIT_ERROR, "tool act: error: no event 'x\\x1b[2J\\x9b1A'\n"),
        ("interrupt", kit.EXIT_INTERRUPTED, "\n"),  # the blank line closes the ^C echo
        ("fine", 3, ""),
    ],
)
def test_every_failure_is_one_line_and_a_status(
    what: str, status: int, err: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kit.run(tool, ["act", what], prog="tool") == status
    assert capsys.readouterr().err == err


def test_an_unknown_error_is_a_bug_and_keeps_its_traceback() -> None:
    with pytest.raises(RuntimeError, match="a bug"):
        kit.run(tool, ["act", "other"], prog="tool")


def test_a_usage_error_is_status_2_and_says_where_help_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert kit.run(tool, ["act", "x", "--nope"], prog="tool") == kit.EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [
        "tool act: error: No such option '--nope'.",
        "Try 'tool act --help' for help.",
    ]


def test_a_lazy_subcommand_whose_package_is_missing_names_the_extra(
    capsys: pytest.CaptureFixture[str],
) -> None:
    group = kit.Group("tool")
    group.lazy(
        "extra",
        "statifier_no_such_package_for_tests.cli:command",
        help="needs more",
        needs="statifier_no_such_package_for_tests",
        hint=kit.install_hint("statifier-oban", "persistence"),
    )
    assert kit.run(group, ["--help"], prog="tool") == 0
    assert "extra  needs more" in capsys.readouterr().out
    assert kit.run(group, ["extra", "--help"], prog="tool") == kit.EXIT_ERROR
    assert capsys.readouterr().err == (
        "tool extra: error: extra needs the package statifier_no_such_package_for_tests: "
        "pip install 'statifier-oban[persistence]'\n"
    )


def test_without_click_the_command_says_which_extra_to_install() -> None:
    probe = textwrap.dedent(
        """
        import sys

        class NoClick:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "click":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)

        sys.meta_path.insert(0, NoClick())
        from statifier.cli import main
        sys.exit(main(["check", "x.scxml"]))
        """
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed program
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert done.stderr == (
        "statifier: error: the command line needs click: pip install 'statifier[cli]'\n"
    )


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    # Enough output to fill the pipe: the reader takes one line and closes it, so the
    # command's next write meets a closed pipe (as with `statifier check ... | head -1`).
    argv = [sys.executable, "-m", "statifier", "check", *[str(CARD)] * 3_000]
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith(str(CARD).encode())
    process.stdout.close()
    _, err = process.communicate(timeout=60)
    assert err == b""
    assert process.returncode == kit.EXIT_BROKEN_PIPE


# -- user code: one rule ---------------------------------------------------------------------


def test_set_import_path_adds_what_is_named_and_drops_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # python -m puts the working directory first (as '' or its path): it goes.
    monkeypatch.setattr(sys, "path", [str(tmp_path), "/lib", ""])
    kit.set_import_path(["extra", "extra"])
    assert sys.path == [str(tmp_path / "extra"), "/lib"]
    monkeypatch.setattr(sys, "path", ["", "/lib"])
    kit.set_import_path(["."])
    assert sys.path == [str(tmp_path), "/lib"]


def test_a_module_in_the_working_directory_is_imported_only_with_path_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kit_probe_rules.py").write_text("VALUE = 1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "kit_probe_rules", raising=False)
    kit.set_import_path([])
    with pytest.raises(kit.CommandError) as refused:
        kit.import_module("kit_probe_rules", "--module")
    assert refused.value.message == (
        "--module kit_probe_rules: cannot import 'kit_probe_rules': 'kit_probe_rules' is in "
        "the working directory, which is not on the import path: add --path . (or set "
        "PYTHONPATH)"
    )
    kit.set_import_path(["."])
    assert kit.import_module("kit_probe_rules", "--module").VALUE == 1
    monkeypatch.delitem(sys.modules, "kit_probe_rules")


def test_a_module_nowhere_gets_no_path_hint() -> None:
    with pytest.raises(kit.CommandError) as refused:
        kit.import_module("statifier_kit_nowhere", "--module")
    assert "--path" not in refused.value.message
    assert "ModuleNotFoundError" in refused.value.message


# -- check --json ----------------------------------------------------------------------------


def test_check_json_prints_a_record_per_diagnostic_and_per_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.scxml"
    assert main(["check", "--json", str(CARD), str(missing)]) == 1
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    charts = [r for r in records if r["record"] == "chart"]
    assert [(r["file"], r["result"]) for r in charts] == [
        (str(CARD), "ok"),
        (str(missing), "failed"),
    ]
    (unreadable,) = [
        r for r in records if r["record"] == "diagnostic" and r["file"] == str(missing)
    ]
    assert unreadable["code"] == "unreadable-file"
    assert unreadable["severity"] == "error"
    assert charts[0]["states"] > 0
