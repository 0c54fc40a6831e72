"""``statifier-oban db start|status|url|stop``: a local PostgreSQL that stays up, with the
schema installed, found again by every command, and stopped with its data kept."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from statifier_oban.cli import main
from statifier_oban.embedded import DATA_DIR_PREFIX, KeptPostgres
from statifier_oban.schema import verify


@pytest.fixture
def data_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``$STATIFIER_OBAN_DB_DIR`` for this test (not under pytest's tmp_path: as root the
    server runs as another user, and a pytest starting meanwhile makes that root private
    again); the server stopped and the folder removed after it."""
    folder = Path(tempfile.mkdtemp(prefix=DATA_DIR_PREFIX))
    monkeypatch.setenv("STATIFIER_OBAN_DB_DIR", str(folder / "pg"))
    try:
        yield folder / "pg"
    finally:
        KeptPostgres(folder / "pg").stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(240)
def test_start_status_url_and_stop(data_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["db", "status"]) == 1
    assert capsys.readouterr().out == f"stopped: {data_root / 'data'}\n"
    assert main(["db", "url"]) == 1
    assert "no server runs in" in capsys.readouterr().err

    assert main(["db", "start"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(f"PostgreSQL started in {data_root / 'data'}, schema installed")
    [export] = captured.out.splitlines()
    words = shlex.split(export)
    assert words[0] == "export"
    name, _, url = words[1].partition("=")
    assert name == "DATABASE_URL"
    assert url.startswith("postgresql://postgres@/statifier?host=")
    assert asyncio.run(verify(url)) == []  # oban's tables, our indexes, the execution tables
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM statifier_history").fetchone() == (0,)

    assert main(["db", "url"]) == 0
    assert capsys.readouterr().out == f"{url}\n"
    assert main(["db", "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "running": True,
        "url": url,
        "data_dir": str(data_root / "data"),
    }
    assert main(["db", "start", "--json"]) == 0  # running: found, the schema checked again
    assert json.loads(capsys.readouterr().out)["url"] == url

    assert main(["db", "stop"]) == 0
    assert capsys.readouterr().out == f"stopped: {data_root / 'data'}\n"
    assert main(["db", "stop", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "stopped": False,
        "data_dir": str(data_root / "data"),
    }
    assert (data_root / "data" / "PG_VERSION").exists()
