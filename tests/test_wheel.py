"""The built distributions work outside the checkout: built, installed into a fresh virtualenv, run.

Every workspace package is built the way an installer builds it from PyPI: an sdist
first, then the wheel from that sdist alone (``uv build``'s default), so an sdist that
leans on the checkout (a licence symlinked from the repository root, say) fails the
build. One fresh virtualenv gets those wheels and their dependencies (at the versions
the workspace locks), then runs ``statifier check``, ``--version`` and the demo (with a
fault injected) from them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CARD = REPO / "examples" / "card_authorization.scxml"
PACKAGES = sorted(path.parent.name for path in (REPO / "packages").glob("*/pyproject.toml"))
"""Every workspace member (``statifier``, ``statifier_oban``, ``statifier_demo``...)."""


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(  # noqa: S603 - argv from this module's fixed lists, no shell
        argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=False, env=env
    )
    assert done.returncode == 0, f"{argv}: {done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    """A fresh virtualenv with every workspace package's wheel installed, each wheel built
    from the package's sdist (both are kept in the ``dist`` folder beside it).

    It lives in a folder of its own that other users may traverse: run as root, the
    embedded PostgreSQL of the demo runs ``pg_ctl`` from this virtualenv as a dedicated
    system user, which pytest's private (0700) temporary folders would lock out.
    """
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build and install the distributions"
    work = Path(tempfile.mkdtemp(prefix="statifier-wheel-"))
    work.chmod(0o755)
    try:
        yield _install(uv, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _install(uv: str, work: Path) -> Path:
    dist = work / "dist"
    # No --wheel or --sdist: uv builds each sdist, then the wheel from the unpacked sdist.
    _run([uv, "build", "--all-packages", "-o", str(dist), "-q"], REPO)
    venv = work / "venv"
    _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], work)
    python = venv / "bin" / "python"
    # The dependencies first: the packages' closure exported from the lock (with each
    # file's URL and hash), installed from uv's cache as the sync before this run left it.
    # Resolved against the index instead, erlpack (oban's dependency, an sdist alone) was
    # compiled again at every run, 13 of this fixture's 18 seconds: the index answers for
    # its sdist as if it had changed. Then the wheels, and ``pip check`` holds each wheel's
    # requirements to what is installed.
    locked = work / "pylock.toml"
    _run(
        [uv, "export", "--frozen", "--all-packages", "--no-default-groups",
         "--no-emit-workspace", "--format", "pylock.toml", "-q", "-o", str(locked)],
        REPO,
    )  # fmt: skip
    _cached_first([uv, "pip", "install", "-q", "--python", str(python), "-r", str(locked)], work)
    wheels = [str(wheel) for wheel in dist.glob("*.whl")]
    _run([uv, "pip", "install", "-q", "--no-deps", "--python", str(python), *wheels], work)
    _run([uv, "pip", "check", "-q", "--python", str(python)], work)
    return venv


def _cached_first(argv: list[str], cwd: Path) -> None:
    """``argv`` offline; where the cache lacks a file (it was cleaned since the sync), again
    with the network."""
    done = subprocess.run(  # noqa: S603 - argv from this module's fixed lists, no shell
        [*argv, "--offline"], cwd=cwd, capture_output=True, timeout=600, check=False
    )
    if done.returncode != 0:
        _run(argv, cwd)


def _clean_env() -> dict[str, str]:
    # Nothing from the checkout's environment may leak into the installed run.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_wheels_carry_licence_readme_and_typing(installed: Path) -> None:
    wheels = sorted((installed.parent / "dist").glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == PACKAGES
    for wheel in wheels:
        names = zipfile.ZipFile(wheel).namelist()
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        assert any(n.endswith("/py.typed") for n in names)
        metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
        text = zipfile.ZipFile(wheel).read(metadata).decode()
        assert "License-Expression: MIT" in text
        assert "Author: statifier contributors" in text
        assert "Project-URL: Documentation" in text
        assert "Description-Content-Type: text/markdown" in text


def test_statifier_check_runs_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    chart = tmp_path / "card.scxml"
    shutil.copy(CARD, chart)
    bin_dir = installed / "bin"
    out = _run(
        [str(bin_dir / "statifier"), "check", "--strict", str(chart)], tmp_path, _clean_env()
    )
    assert f"{chart}: ok (4 states, 6 transitions, 3 notes)" in out
    where = _run(
        [str(bin_dir / "python"), "-c", "import statifier; print(statifier.__file__)"],
        tmp_path,
        _clean_env(),
    )
    assert Path(where.strip()).is_relative_to(installed), where
    assert not Path(where.strip()).is_relative_to(REPO / "packages")


def _declared(package: str) -> str:
    with (REPO / "packages" / package / "pyproject.toml").open("rb") as file:
        return str(tomllib.load(file)["project"]["version"])


def test_versions_come_from_the_installed_metadata(installed: Path, tmp_path: Path) -> None:
    bin_dir = installed / "bin"
    engine, oban = _declared("statifier"), _declared("statifier_oban")
    assert _run([str(bin_dir / "statifier"), "--version"], tmp_path, _clean_env()) == (
        f"statifier {engine}\n"
    )
    assert _run([str(bin_dir / "statifier-oban"), "--version"], tmp_path, _clean_env()) == (
        f"statifier-oban {oban}\n"
    )
    script = (
        "import statifier, statifier_oban; print(statifier.__version__, statifier_oban.__version__)"
    )
    assert _run([str(bin_dir / "python"), "-c", script], tmp_path, _clean_env()) == (
        f"{engine} {oban}\n"
    )


def test_the_demo_runs_from_the_wheels_and_its_checks_catch_a_fault(
    installed: Path, tmp_path: Path
) -> None:
    """``statifier-oban demo`` finds the demo package and its chart without the checkout,
    on an embedded server of its own, and ``--fault no-capture`` fails exactly the checks
    it should (status 1, one line of error).

    The shortest hold the demo's own tests use: what is checked here is that it runs from
    the wheels, not its timing. The story without a fault, with the rows it leaves, is
    ``test_cli_demo``'s (from the checkout); this is the suite's one run of a fault."""
    argv = [str(installed / "bin" / "statifier-oban"), "demo", "--hold", "1s"]
    done = subprocess.run(  # noqa: S603 - the installed command, fixed arguments, no shell
        [*argv, "--fault", "no-capture"],
        cwd=tmp_path,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out, err = done.stdout, done.stderr
    assert done.returncode == 1, out + err
    assert "starting an embedded PostgreSQL" in out
    assert re.search(r"FAIL\s+card A \(card_a\) ended settled", out), out
    assert re.search(r"FAIL\s+card A's hold job was cancelled by the capture", out), out
    assert re.search(r"FAIL\s+three holds applied in all", out), out
    assert re.search(r"ok\s+card D's hold job was delivered twice", out), out
    assert "demo FAILED: 3 of 12 checks failed" in out
    assert err.startswith("statifier-oban demo: error: ")
    assert err.count("\n") == 1


def test_sdists_carry_their_licence_as_a_file_and_no_tests(installed: Path) -> None:
    licence = (REPO / "LICENSE").read_bytes()
    sdists = sorted((installed.parent / "dist").glob("*.tar.gz"))
    assert [s.name.split("-")[0] for s in sdists] == PACKAGES
    for sdist in sdists:
        with tarfile.open(sdist) as archive:
            root = sdist.name.removesuffix(".tar.gz")
            member = archive.getmember(f"{root}/LICENSE")
            assert member.isfile(), f"{sdist.name}: LICENSE is not a regular file"
            extracted = archive.extractfile(member)
            assert extracted is not None
            assert extracted.read() == licence
            assert not [n for n in archive.getnames() if "/tests/" in n]
            info = archive.extractfile(f"{root}/PKG-INFO")
            assert info is not None
            assert "License-Expression: MIT" in info.read().decode()


def test_every_package_licence_is_the_repository_licence() -> None:
    licence = (REPO / "LICENSE").read_bytes()
    for package in PACKAGES:
        path = REPO / "packages" / package / "LICENSE"
        assert not path.is_symlink(), f"{path} is a symlink: sdists would ship it dangling"
        assert path.read_bytes() == licence, f"{path} differs from the repository's LICENSE"


def test_the_installed_packages_carry_the_licence_their_sdists_gave_them(installed: Path) -> None:
    """The wheels were built from the sdists alone: the licence each installed package
    carries is the file its sdist held, not the checkout's."""
    licences = list(
        installed.glob("lib/python*/site-packages/statifier*.dist-info/licenses/LICENSE")
    )
    assert len(licences) == len(PACKAGES), licences
    assert {path.read_bytes() for path in licences} == {(REPO / "LICENSE").read_bytes()}
