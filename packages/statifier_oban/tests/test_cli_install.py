"""``statifier-oban install`` through ``cli.main`` against a real PostgreSQL."""

from __future__ import annotations

import argparse
from typing import Any

import psycopg
import pytest
from statifier_oban.cli import _main as cli
from statifier_oban.schema import INDEXES, OBAN_TABLES, TIMER_DEDUP_INDEX, TIMER_PENDING_INDEX

PIECES = [*OBAN_TABLES, *INDEXES]


def present(url: str, schema: str) -> list[str]:
    """Which of our tables and indexes exist in ``schema``, sorted."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s) ORDER BY 1",
            [schema, PIECES],
        ).fetchall()
    return [name for (name,) in rows]


def test_install_creates_everything_and_says_so(
    make_database: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = make_database("template0")

    assert cli.main(["install", "--database-url", url]) == 0

    assert present(url, "public") == sorted(PIECES)
    out, err = capsys.readouterr()
    assert TIMER_DEDUP_INDEX in out
    assert TIMER_PENDING_INDEX in out
    assert "'public'" in out
    assert "dbname=test_" in out
    assert err == ""


def test_install_twice_succeeds(database_url: str) -> None:
    assert cli.main(["install", "--database-url", database_url]) == 0
    assert cli.main(["install", "--database-url", database_url]) == 0
    assert present(database_url, "public") == sorted(PIECES)


def test_install_with_a_prefix(database_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["install", "--database-url", database_url, "--prefix", "tenant_cli"]) == 0
    assert present(database_url, "tenant_cli") == sorted(PIECES)
    assert "'tenant_cli'" in capsys.readouterr().out


def test_install_defaults_to_database_url_from_the_environment(
    make_database: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = make_database("template0")
    monkeypatch.setenv("DATABASE_URL", url)
    assert cli.main(["install"]) == 0
    assert present(url, "public") == sorted(PIECES)


def test_an_unreachable_database_exits_1_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql://nobody@/x?host=/nonexistent-statifier-socket-dir&password=hunter2"

    assert cli.main(["install", "--database-url", url]) == 1

    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("statifier-oban install: error: cannot connect to ")
    assert err.count("\n") == 1
    assert "hunter2" not in err


def test_an_invalid_prefix_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["install", "--database-url", "dbname=x", "--prefix", "Bad-Name"])
    assert exit_.value.code == 2
    assert "not a plain identifier" in capsys.readouterr().err


def test_a_missing_database_url_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["install"])
    assert exit_.value.code == 2
    assert "--database-url" in capsys.readouterr().err


def test_commands_are_registered_one_function_each() -> None:
    assert cli.commands["install"].run is cli.install_command
    assert "install" in cli.build_parser().format_help()


def test_a_registered_command_gets_its_own_subparser(monkeypatch: pytest.MonkeyPatch) -> None:
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--code", type=int, default=0)

    def run(args: argparse.Namespace) -> int:
        code: int = args.code
        return code

    command = cli.Command(name="probe", help="test only", add_arguments=add_arguments, run=run)
    monkeypatch.setitem(cli.commands, "probe", command)

    assert cli.main(["probe", "--code", "3"]) == 3
