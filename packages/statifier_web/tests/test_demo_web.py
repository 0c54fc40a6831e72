"""``statifier-oban demo --web``: the demo runs, then its executions stay up in the
console (a real process, on the test's database) until SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

SERVING = re.compile(r"the console at (http://127\.0\.0\.1:\d+)/console/ \(token (\S+)\)")


@pytest.mark.timeout(150)
def test_the_demo_leaves_its_executions_up_in_the_console(database_url: str) -> None:
    process = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments, no shell
        [sys.executable, "-m", "statifier_oban.cli", "demo", "--web", "--hold", "1s",
         "--database-url", database_url],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    seen: list[str] = []
    try:
        with ThreadPoolExecutor(max_workers=1) as reader:
            while (serving := SERVING.search(seen[-1] if seen else "")) is None:
                line = reader.submit(process.stdout.readline).result(timeout=120)
                assert line, "\n".join(seen)
                seen.append(line)
        assert any("demo passed" in line for line in seen), "\n".join(seen)
        url, token = serving.groups()
        headers = {"Authorization": f"Bearer {token}"}
        counts = httpx.get(f"{url}/api/counts", headers=headers).json()
        assert counts["counts"]["completed"] == 4, counts
        assert httpx.get(f"{url}/api/counts").status_code == 401
        listed = httpx.get(f"{url}/api/executions", headers=headers).json()["executions"]
        assert all(e["id"].startswith("card_") for e in listed)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        rest = process.stdout.read()
        assert "the console stopped" in rest
        assert "embedded" not in rest  # the test's own server: nothing embedded to stop
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
