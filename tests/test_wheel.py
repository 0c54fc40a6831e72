"""The wheels work outside the checkout: built, installed into a fresh virtualenv, run.

Every workspace package is built; the fresh virtualenv gets the wheels (and their
dependencies from the index), then runs ``statifier check`` and the demo from them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    """A fresh virtualenv with every workspace package's wheel installed.

    It lives in a folder of its own that other users may traverse: run as root, the
    embedded PostgreSQL of the demo runs ``pg_ctl`` from this virtualenv as a dedicated
    system user, which pytest's private (0700) temporary folders would lock out.
    """
    uv = shutil.which("uv")
    assert uv is not None, "uv is needed to build and install the wheels"
    work = Path(tempfile.mkdtemp(prefix="statifier-wheel-"))
    work.chmod(0o755)
    try:
        yield _install(uv, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _install(uv: str, work: Path) -> Path:
    wheels = work / "wheels"
    for package in PACKAGES:
        name = package.replace("_", "-")
        _run([uv, "build", "--package", name, "--wheel", "-o", str(wheels), "-q"], REPO)
    venv = work / "venv"
    _run([uv, "venv", "-q", "--python", sys.executable, str(venv)], work)
    python = venv / "bin" / "python"
    _run(
        [uv, "pip", "install", "-q", "--python", str(python), *map(str, wheels.glob("*.whl"))], work
    )
    return venv


def _clean_env() -> dict[str, str]:
    # Nothing from the checkout's environment may leak into the installed run.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def test_wheels_carry_licence_readme_and_typing(installed: Path) -> None:
    wheels = sorted((installed.parent / "wheels").glob("*.whl"))
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


def test_the_demo_runs_from_the_wheels(installed: Path, tmp_path: Path) -> None:
    """``statifier-oban demo`` finds the demo package and its chart without the checkout."""
    out = _run([str(installed / "bin" / "statifier-oban"), "demo"], tmp_path, _clean_env())
    assert "demo passed" in out, out
