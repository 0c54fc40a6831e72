"""``statifier-oban install`` through ``cli.main`` against a real PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import click
import psycopg
import pytest
from statifier.cli import kit
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
    assert cli.main(["install", "--database-url", "dbname=x", "--prefix", "Bad-Name"]) == 2
    assert "not a plain identifier" in capsys.readouterr().err


def test_a_missing_database_url_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    assert cli.main(["install"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        "statifier-oban install: error: give --database-url URL, or set DATABASE_URL"
    )


def test_install_prints_a_json_record(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["install", "--database-url", database_url, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["installed"] == list(INDEXES)
    assert record["schema"] == "public"


def test_a_command_added_to_the_group_runs_with_the_shared_runner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @click.command("probe", cls=kit.Command, help="test only")
    @click.option("--code", type=int, default=0)
    def probe(code: int) -> int:
        if code < 0:
            raise kit.CommandError("negative")
        return code

    monkeypatch.setitem(cli.statifier_oban.commands, "probe", probe)
    assert cli.main(["probe", "--code", "3"]) == 3
    assert cli.main(["probe", "--code", "-1"]) == 1
    assert capsys.readouterr().err == "statifier-oban probe: error: negative\n"
    assert cli.main(["--help"]) == 0
    assert "probe" in capsys.readouterr().out
