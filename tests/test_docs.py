"""The README and the documentation say what the code does: their examples are checked.

Every fenced block of the README and of ``docs/`` carries a marker, an HTML comment
(invisible on GitHub and in the site) on the line right before it, saying how it is
checked; a block without one fails here:

* ``<!-- doctest: run -->``: a Python block runs as it is, from the repository root, and
  each ``print(...)  # text`` line (at any indentation) must print ``text``, in order;
* ``<!-- doctest: database -->``: the same, for a program that works on the PostgreSQL
  database ``$DATABASE_URL`` names, its schema installed (what ``statifier-oban db start``
  gives a reader). A page's programs run one after the other, each in a namespace of its
  own, on one fresh database of this run's server;
* ``<!-- doctest: excerpt PATH -->``: the block is a verbatim excerpt of ``PATH`` (at any
  indentation), a file that is itself tested (the examples run in
  ``packages/statifier_oban/tests/test_examples.py``);
* ``<!-- doctest: pytest -->``: the block is a test module; a page's such blocks run
  together under pytest (``pytester``), with the ``examples/`` charts beside them and the
  plugins' fixtures on this run's database server, and every test they define must pass;
* ``<!-- doctest: diagram PATH -->``: a Mermaid block is what ``statifier diagram PATH``
  draws;
* ``<!-- doctest: walkthrough -->``: a console session ``tests/test_getting_started.py``
  replays;
* ``<!-- doctest: fragment -->``: the block is a piece of something larger (an XML
  element, a call in context, a shell session against a server, output shown) and is not
  run; a Python fragment must parse (``await`` allowed at its top level) and an XML one
  must be well-formed. The pages a new user reads first have no Python fragments.

Besides: every ``uv run statifier ...`` line of the first pages runs and exits 0, every
concrete ``statifier``/``statifier-oban`` command line in the README and the docs parses
with the command's own parser, and every flag of a usage synopsis (``[--prefix P]``) is one
the command has: a renamed or misspelled flag fails here.
"""

from __future__ import annotations

import ast
import contextlib
import glob
import io
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import statifier.cli
from statifier.chart import xmltree
from statifier.cli import kit

from tools import cli_reference

ROOT = Path(__file__).resolve().parents[1]
FIRST_STEPS = [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]
"""The pages a new user reads first: every Python block there is checked."""
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_MARKER = re.compile(
    r"^<!-- doctest: (run|database|pytest|walkthrough|fragment|(?:excerpt|diagram) \S+) -->$"
)
_FENCE = re.compile(r"^```(\w*)$")
_PRINT = re.compile(r"^\s*print\((.*)\)\s+# (.+)$")
_SYNOPSIS = re.compile(r"[\[\]()|]|\.\.\.")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page, with the doctest marker right before it, if any."""

    page: Path
    line: int
    lang: str
    text: str
    marker: str | None

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``; a marker not followed by a block is an error."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    marker: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if match := _MARKER.match(line):
            assert marker is None, f"{page.name}:{i + 1}: two markers in a row"
            marker = match.group(1)
        elif fence := _FENCE.match(line):
            end = lines.index("```", i + 1)
            found.append(Block(page, i + 1, fence.group(1), "\n".join(lines[i + 1 : end]), marker))
            marker = None
            i = end
        elif line.strip():
            assert marker is None, f"{page.name}:{i + 1}: a doctest marker must precede a block"
        i += 1
    assert marker is None, f"{page.name}: a doctest marker at the end"
    return found


def marked(kind: str) -> list[Block]:
    """Every block of every page whose marker starts with ``kind``."""
    return [b for page in PAGES for b in blocks(page) if (b.marker or "").startswith(kind)]


def command_lines(page: Path) -> Iterator[tuple[int, str]]:
    """Shell lines of ``page``'s code (4-space indented or fenced), continuations joined."""
    fenced = False
    pending = ""
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")):
            continue
        text = pending + line.strip()
        if text.endswith("\\"):
            pending = text[:-1] + " "
            continue
        pending = ""
        yield number, text


def argv_of(line: str, program: str) -> list[str] | None:
    """The arguments of ``line`` if it runs ``program`` (with or without ``uv run``)."""
    if not line.removeprefix("uv run ").startswith(program + " "):
        return None
    words = shlex.split(line, comments=True)
    if words[:2] == ["uv", "run"]:
        words = words[2:]
    if not words or words[0] != program:
        return None
    if ">" in words:  # output redirected to a file
        words = words[: words.index(">")]
    return words[1:]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_block_is_checked_or_marked_a_fragment(page: Path) -> None:
    unmarked = [str(b) for b in blocks(page) if b.marker is None]
    assert not unmarked, f"blocks without a doctest marker (see tests/test_docs.py): {unmarked}"


def test_a_block_is_unmarked_unless_a_known_marker_comes_right_before_it(
    tmp_path: Path,
) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n```python\nx = 1\n```\n\n<!-- doctest: fragmnet -->\n```xml\n<a/>\n```\n"
        "\n<!-- doctest: fragment -->\n```xml\n<b/>\n```\n",
        encoding="utf-8",
    )
    assert [(b.line, b.marker) for b in blocks(page)] == [(3, None), (8, None), (13, "fragment")]


def test_the_first_pages_have_no_python_fragments() -> None:
    fragments = [
        str(b)
        for page in FIRST_STEPS
        for b in blocks(page)
        if b.lang == "python" and b.marker == "fragment"
    ]
    assert not fragments, f"a first page's Python block must run: {fragments}"


def run_block(block: Block) -> None:
    """Run ``block`` as a program of its own; its ``print(...)  # text`` lines must print
    their text, in order."""
    expected = [m.group(2) for m in map(_PRINT.match, block.text.splitlines()) if m]
    code = compile(block.text, str(block), "exec")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"__name__": "__main__"})  # noqa: S102 - our own documentation
    assert out.getvalue().splitlines() == expected, str(block)


@pytest.mark.parametrize("block", marked("run"), ids=str)
def test_a_runnable_block_prints_what_it_says(
    block: Block, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    run_block(block)


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES if any(b.marker == "database" for b in blocks(page))],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_the_programs_of_a_page_run_on_one_database(
    page: Path, monkeypatch: pytest.MonkeyPatch, statifier_database_url: str
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("DATABASE_URL", statifier_database_url)
    for block in blocks(page):
        if block.marker == "database":
            run_block(block)


@pytest.mark.parametrize(
    "block", [b for b in marked("fragment") if b.lang in ("python", "xml")], ids=str
)
def test_a_fragment_is_well_formed(block: Block) -> None:
    # Not run, but its Python parses (top-level await allowed) and its XML is XML.
    if block.lang == "python":
        compile(block.text, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    else:
        wrapped = f'<fragment xmlns="{xmltree.SCXML_NS}">\n{block.text}\n</fragment>'
        xmltree.parse(wrapped.encode())


@pytest.mark.parametrize("block", marked("excerpt"), ids=str)
def test_an_excerpt_is_in_its_file(block: Block) -> None:
    assert block.marker is not None
    source = (ROOT / block.marker.split()[1]).read_text(encoding="utf-8")
    for indent in ("", "    ", "        ", "            "):
        body = "\n".join(indent + line if line else line for line in block.text.splitlines())
        if body in source:
            return
    pytest.fail(f"{block} is not an excerpt of {block.marker.split()[1]}")


_TEST = re.compile(r"^(async )?def test_", re.MULTILINE)


@pytest.mark.parametrize(
    "page",
    [page for page in PAGES if any(b.marker == "pytest" for b in blocks(page))],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_the_test_modules_of_a_page_pass(
    page: Path,
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    statifier_postgres: Any,
    statifier_schema_template: str,
) -> None:
    modules = [b for b in blocks(page) if b.marker == "pytest"]
    for block in modules:
        pytester.makepyfile(**{f"test_{page.stem}_{block.line}": block.text})
    shutil.copytree(ROOT / "examples", pytester.path / "examples", ignore=_not_charts)
    # The durable fixtures use this run's server and template (statifier_oban's plugin).
    monkeypatch.setenv("DATABASE_URL", statifier_postgres.url)
    pytester.makeconftest(
        "import pytest\n\n\n"
        '@pytest.fixture(scope="session")\n'
        "def statifier_schema_template():\n"
        f"    return {statifier_schema_template!r}\n"
    )
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    defined = sum(len(_TEST.findall(block.text)) for block in modules)
    result.assert_outcomes(passed=defined)


def _not_charts(directory: str, names: list[str]) -> list[str]:
    """``shutil.copytree``'s filter: only the charts of ``examples/`` are copied."""
    return [name for name in names if not name.endswith(".scxml")]


@pytest.mark.parametrize("block", marked("diagram"), ids=str)
def test_a_diagram_is_what_statifier_draws(
    block: Block, capsys: pytest.CaptureFixture[str]
) -> None:
    assert block.marker is not None
    assert statifier.cli.main(["diagram", str(ROOT / block.marker.split()[1])]) == 0
    assert capsys.readouterr().out.rstrip("\n") == block.text


@pytest.mark.parametrize(
    ("page", "line"),
    [
        (page, line)
        for page in FIRST_STEPS
        for _, line in command_lines(page)
        if argv_of(line, "statifier") is not None
    ],
    ids=lambda value: value.name if isinstance(value, Path) else value,
)
def test_a_statifier_command_of_the_first_pages_runs(
    page: Path, line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    argv = argv_of(line, "statifier")
    assert argv is not None
    expanded = [match for word in argv for match in (sorted(glob.glob(word)) or [word])]
    code = statifier.cli.main(expanded)
    assert code == 0, capsys.readouterr()


def _documented_commands() -> list[Any]:
    """Every command line of the docs: concrete ones, and usage synopses (``[--flag X]``)."""
    found = []
    for page in PAGES:
        for number, line in command_lines(page):
            for program in ("statifier", "statifier-oban"):
                argv = argv_of(line, program)
                if argv is not None:
                    where = f"{page.relative_to(ROOT)}:{number}"
                    found.append(pytest.param(program, argv, id=where))
    return found


def _root(program: str) -> click.Command:
    """The click command tree of ``program``."""
    if program == "statifier":
        from statifier.cli._commands import statifier as command
    else:
        from statifier_oban.cli._main import statifier_oban as command
    return command


def _command_of(program: str, argv: list[str]) -> tuple[click.Command, click.Context, list[str]]:
    """The (sub)command ``argv`` names, following groups, with its context and the rest."""
    command = _root(program)
    ctx = click.Context(command, info_name=program)
    rest = list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        found = command.get_command(ctx, rest[0])
        if found is None:
            break
        ctx = click.Context(found, info_name=rest[0], parent=ctx)
        command, rest = found, rest[1:]
    return command, ctx, rest


def _options(program: str, argv: list[str]) -> set[str]:
    """The option strings of the (sub)command ``argv`` names."""
    command, ctx, _ = _command_of(program, argv)
    return {name for param in command.get_params(ctx) for name in param.opts if name[:1] == "-"}


@pytest.mark.parametrize(("program", "argv"), _documented_commands())
def test_a_documented_command_line_parses(program: str, argv: list[str]) -> None:
    if any(_SYNOPSIS.search(word) for word in argv):  # a usage synopsis: its flags exist
        flags = {m for word in argv for m in re.findall(r"--[a-z][a-z-]*", word)}
        assert flags <= _options(program, argv), f"unknown: {flags - _options(program, argv)}"
        return
    command, ctx, rest = _command_of(program, argv)
    assert not isinstance(command, click.Group) or not rest, f"no command {rest[:1]}"
    # Parsing only (no callback runs): an unknown option or a bad value raises here.
    command.parse_args(ctx, rest)


def test_the_cli_reference_is_what_the_commands_say() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert cli_reference.page_block(page) == cli_reference.render(), (
        "run: uv run python -m tools.cli_reference --write"
    )


@pytest.mark.parametrize("program", ["statifier", "statifier-oban"])
def test_every_command_fails_in_the_one_error_format(program: str) -> None:
    # kit.Command turns the errors its groups declare into the one-line format.
    root = _root(program)
    for command, _ in cli_reference._commands(root, click.Context(root, info_name=program)):
        assert isinstance(command, kit.Command | kit.Group), command.name
