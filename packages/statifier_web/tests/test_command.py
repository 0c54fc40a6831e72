"""``statifier-oban web``: served by a real process (tokens from the environment, stopped
by SIGTERM with status 0), and the settings it refuses before serving."""

from __future__ import annotations

import importlib.abc
import json
import os
import re
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from oban import Oban
from psycopg_pool import AsyncConnectionPool
from statifier_oban.cli import _main as cli
from statifier_oban.cli import main

from web_support.charts import CARD
from web_support.rig import OTHER_TOKEN, TOKEN, executions_on

TOKENS = {"STATIFIER_WEB_TOKENS": TOKEN}

PUBLIC = "0.0.0.0"  # noqa: S104 - refused before anything binds it

READY = re.compile(r"the console at (http://127\.0\.0\.1:\d+)/console/, the API under")


def read_line(process: subprocess.Popen[str], timeout: float = 30.0) -> str:
    """The process's next line of output (fails after ``timeout`` seconds)."""
    assert process.stdout is not None
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(process.stdout.readline).result(timeout=timeout)


def test_the_server_serves_until_sigterm(database_url: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# the operators\n{OTHER_TOKEN}\n")
    environment = {
        **os.environ,
        "STATIFIER_WEB_TOKENS": TOKEN,
        "PYTHONUNBUFFERED": "1",
        "STATIFIER_BASICHTTP_URL": "https://statifier.example.com/ops",
        "STATIFIER_BASICHTTP_KEY": "k" * 32,
    }
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-m", "statifier_oban.cli", "web", "--database-url", database_url,
         "--port", "0", "--token-file", str(tokens)],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        line = read_line(process)
        ready = READY.search(line)
        assert ready is not None, line
        assert line.rstrip().endswith("(2 token(s)), loop uvloop")
        assert read_line(process).rstrip() == (
            "statifier-oban web: BasicHTTP locations under"
            " https://statifier.example.com/ops/basichttp/"
        )
        url = ready.group(1)
        assert httpx.get(f"{url}/health").json()["status"] == "ok"
        assert httpx.get(f"{url}/api/counts").status_code == 401
        for token in (TOKEN, OTHER_TOKEN):
            answer = httpx.get(f"{url}/api/counts", headers={"Authorization": f"Bearer {token}"})
            assert answer.json()["total"] == 0
        assert httpx.get(f"{url}/console/login").status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert process.stdout is not None
        assert "statifier-oban web: stopped" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def printed_spans(text: str) -> list[dict[str, Any]]:
    """The spans OpenTelemetry's console exporter printed among other lines of ``text``
    (each an indented JSON object starting a line)."""
    decoder = json.JSONDecoder()
    spans, start = [], text.find("{\n")
    while start != -1:
        span, end = decoder.raw_decode(text, start)
        spans.append(span)
        start = text.find("{\n", end)
    return spans


async def test_the_server_with_otel_continues_a_callers_trace(
    database_url: str, pool: AsyncConnectionPool, tmp_path: Path
) -> None:
    await executions_on(pool, Oban(pool=pool, name="otel_web_client")).register(CARD)
    environment = {
        **os.environ, **TOKENS, "PYTHONUNBUFFERED": "1", "OTEL_SERVICE_NAME": "web",
        "OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none",
    }  # fmt: skip
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-m", "statifier_oban.cli", "web", "--database-url", database_url,
         "--port", "0", "--otel", "--loop", "asyncio"],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    trace_id, caller = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        line = read_line(process)
        ready = READY.search(line)
        assert ready is not None, line
        assert line.rstrip().endswith(", loop asyncio")  # the standard loop traces as well
        async with httpx.AsyncClient(base_url=ready.group(1)) as client:
            started = await client.post(
                "/api/executions",
                json={"chart": "card", "id": "card_w"},
                headers={
                    "Authorization": f"Bearer {TOKEN}",
                    "traceparent": f"00-{trace_id}-{caller}-01",
                },
            )
        assert started.status_code == 201, started.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.stdout is not None
    printed = printed_spans(process.stdout.read())
    assert {span["context"]["trace_id"] for span in printed} == {f"0x{trace_id}"}
    by_id = {span["context"]["span_id"]: span for span in printed}
    [create] = [span for span in printed if span["name"] == "Create:card"]
    assert create["resource"]["attributes"]["service.name"] == "web"
    assert create["attributes"]["statifier.execution.id"] == "card_w"
    [timer] = [span for span in printed if span["parent_id"] == create["context"]["span_id"]]
    assert timer["name"] == "ScheduleTimer:authorization.expired"
    # FastAPI traces the request itself once a provider is set (its SERVER span continues
    # the header): Create is under that span, which is the caller's child.
    ancestors, parent = [], create["parent_id"]
    while parent in by_id:
        ancestors.append(by_id[parent])
        parent = by_id[parent]["parent_id"]
    assert parent == f"0x{caller}"
    assert [span["kind"] for span in ancestors][-1] == "SpanKind.SERVER"


@pytest.mark.parametrize(
    ("arguments", "environment", "message"),
    [
        ([], {}, "no bearer token: put one in a file for --token-file"),
        ([], {"STATIFIER_WEB_TOKENS": "short"}, "a token must be 16 to 512 characters long"),
        (["--open", "--host", PUBLIC], {}, "an open app (no token) is served on loopback only"),
        (["--base-path", "ops/"], TOKENS, "a base path is like /statifier"),
        (["--open"], TOKENS, "--open serves without authentication: give no token"),
    ],
    ids=["no-token", "short-token", "open-public", "base-path", "open-with-tokens"],
)  # fmt: skip
def test_what_the_command_refuses_to_serve(
    database_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    arguments: list[str],
    environment: dict[str, str],
    message: str,
) -> None:
    monkeypatch.delenv("STATIFIER_WEB_TOKENS", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    status = main(["web", "--database-url", database_url, "--port", "0", *arguments])
    assert status == 1
    err = capsys.readouterr().err
    assert err.startswith("statifier-oban web: error: ")
    assert message in err
    assert TOKEN not in err


def test_a_taken_port_is_one_line_of_error(
    database_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATIFIER_WEB_TOKENS", TOKEN)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["web", "--database-url", database_url, "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"statifier-oban web: error: cannot listen on 127.0.0.1:{port}: ")
    assert "Traceback" not in err


class _WithoutWeb(importlib.abc.MetaPathFinder):
    """An import finder for which ``statifier_web`` is not installed."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        """Refuse ``statifier_web`` and its modules; leave the rest to the others."""
        if name.partition(".")[0] == "statifier_web":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["web"], "web needs the package statifier_web: pip install 'statifier-oban[web]'"),
        (["demo", "--web"], "--web needs the web console: pip install 'statifier-demo[web]'"),
    ],
    ids=["web", "demo-web"],
)
def test_without_the_web_package_the_commands_name_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    for name in [m for m in sys.modules if m.partition(".")[0] == "statifier_web"]:
        monkeypatch.delitem(sys.modules, name)
    for name in [m for m in sys.modules if m.startswith("statifier_oban.cli._web")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_WithoutWeb(), *sys.meta_path])
    monkeypatch.setattr(cli.statifier_oban, "commands", dict(cli.statifier_oban.commands))
    cli.statifier_oban.commands.pop("web", None)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err
