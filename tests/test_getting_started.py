"""The getting-started page's command-line session, walked through from a fresh data
directory: every ``$`` line of the block marked ``<!-- doctest: walkthrough -->`` runs, exits 0
and prints what the page shows (``...`` in a shown line stands for any text).

The commands run in-process through ``statifier_oban.cli.main`` (``uv run statifier-oban
ARGS`` is ``main(ARGS)``), from the repository root; ``eval "$(COMMAND)"`` runs the command
and sets the variables its ``export NAME=VALUE`` lines print, as the shell would. What a
command prints on stderr (its notes) comes before what it prints on stdout, as on a
terminal. The embedded server it starts is stopped at the end, whatever happened.
"""

from __future__ import annotations

import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from statifier_oban.cli import main
from statifier_oban.embedded import DATA_DIR_PREFIX, KeptPostgres

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "getting-started.md"
MARKER = "<!-- doctest: walkthrough -->"
_EVAL = re.compile(r'^eval "\$\((.*)\)"$')


@dataclass
class Step:
    """One ``$`` line of the session and the lines the page shows after it."""

    command: str
    shown: list[str] = field(default_factory=list)


def session() -> list[Step]:
    """The session of the block marked ``<!-- doctest: walkthrough -->``."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(MARKER) + 2  # the marker, then the opening fence
    end = lines.index("```", start)
    steps: list[Step] = []
    for line in lines[start:end]:
        if line.startswith("$ "):
            steps.append(Step(line[2:]))
        else:
            steps[-1].shown.append(line)
    return steps


def matches(shown: str, printed: str) -> bool:
    """Whether a printed line is the shown one (``...`` standing for any text)."""
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, printed) is not None


def run(command: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``uv run statifier-oban ARGS``: its status, stdout and stderr."""
    words = shlex.split(command)
    assert words[:3] == ["uv", "run", "statifier-oban"], command
    code = main(words[3:])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.timeout(300)
def test_the_getting_started_session_runs_as_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = session()
    assert steps[0].command == 'eval "$(uv run statifier-oban db start)"'
    # Not under pytest's tmp_path: as root, the server runs as another user, and a pytest
    # starting meanwhile makes its own temporary root private again.
    root = Path(tempfile.mkdtemp(prefix=DATA_DIR_PREFIX))
    data = root / "pg"
    monkeypatch.setenv("STATIFIER_OBAN_DB_DIR", str(data))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.chdir(ROOT)
    try:
        for step in steps:
            evaluated = _EVAL.match(step.command)
            code, out, err = run(evaluated.group(1) if evaluated else step.command, capsys)
            assert code == 0, f"{step.command}: status {code}\n{err}"
            if evaluated:
                for words in map(shlex.split, out.splitlines()):
                    assert words[0] == "export", out
                    name, _, value = words[1].partition("=")
                    monkeypatch.setenv(name, value)
                out = ""
            printed = err.splitlines() + out.splitlines()
            assert len(printed) == len(step.shown), f"{step.command}:\n{err}{out}"
            for shown, line in zip(step.shown, printed, strict=True):
                assert matches(shown, line), (
                    f"{step.command}:\n  shown:   {shown}\n  printed: {line}"
                )
        assert not KeptPostgres(data).running()
        assert (data / "data" / "PG_VERSION").exists()  # the data stays for the next start
    finally:
        KeptPostgres(data).stop()
        shutil.rmtree(root, ignore_errors=True)
