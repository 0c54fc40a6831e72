"""Who may call: bearer tokens on every route but /health (over real HTTP), the settings
that refuse to serve unguarded, and bounded request bodies."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from psycopg_pool import AsyncConnectionPool
from statifier_web import (
    MAX_TOKEN_LENGTH,
    MIN_TOKEN_LENGTH,
    WebConfigError,
    WebSettings,
    tokens_from_environment,
    tokens_from_file,
)
from statifier_web._auth import Gate

from web_support.rig import OTHER_TOKEN, TOKEN, WebRig, web_rig

ROUTES = [
    ("GET", "/api/executions"),
    ("GET", "/api/counts"),
    ("GET", "/api/openapi.json"),
    ("GET", "/api/executions/x"),
    ("GET", "/api/executions/x/history"),
    ("POST", "/api/executions"),
    ("POST", "/api/executions/x/events"),
    ("POST", "/api/executions/x/cancel"),
    ("POST", "/api/executions/x/park"),
    ("POST", "/api/executions/x/unpark"),
]


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-token-0123456789abcdef", f"Basic {TOKEN}", f"Bearer {TOKEN}x", "Bearer"],
    ids=["none", "wrong", "basic", "longer", "empty"],
)
async def test_every_api_route_needs_a_valid_bearer_token(
    web: WebRig, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    async with httpx.AsyncClient(base_url=web.url, headers=headers) as anonymous:
        for method, path in ROUTES:
            response = await anonymous.request(method, path, json={"name": "x", "chart": "card"})
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error"]["code"] == "unauthorized"
    assert (await web.executions.counts())["active"] == 0  # nothing was started


async def test_any_configured_token_is_accepted_and_health_needs_none(web: WebRig) -> None:
    async with httpx.AsyncClient(base_url=web.url) as anonymous:
        health = await anonymous.get("/health")
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "database": "ok"}
        other = await anonymous.get(
            "/api/counts", headers={"Authorization": f"bearer {OTHER_TOKEN}"}
        )
        assert other.status_code == 200


async def test_the_openapi_document_describes_the_api(web: WebRig) -> None:
    document = (await web.client.get("/api/openapi.json")).json()
    assert document["info"]["title"] == "statifier"
    paths = document["paths"]
    assert set(paths) == {
        "/health",
        "/api/executions",
        "/api/counts",
        "/api/executions/{execution_id}",
        "/api/executions/{execution_id}/events",
        "/api/executions/{execution_id}/cancel",
        "/api/executions/{execution_id}/park",
        "/api/executions/{execution_id}/unpark",
        "/api/executions/{execution_id}/history",
    }
    start = paths["/api/executions"]["post"]
    assert {p["name"] for p in start["parameters"]} == {"Idempotency-Key"}
    assert {"201", "200", "401", "404", "409", "413", "422"} <= set(start["responses"])
    schemes = document["components"]["securitySchemes"]
    assert next(iter(schemes.values()))["scheme"].lower() == "bearer"
    assert "ExecutionDetail" in document["components"]["schemas"]


async def test_an_open_app_takes_requests_without_a_token(pool: AsyncConnectionPool) -> None:
    async with (
        web_rig(pool, tokens=(), open=True) as rig,
        httpx.AsyncClient(base_url=rig.url) as anonymous,
    ):
        assert (await anonymous.get("/api/counts")).status_code == 200


def test_settings_refuse_to_serve_unguarded() -> None:
    with pytest.raises(WebConfigError, match="no bearer token"):
        WebSettings()
    with pytest.raises(WebConfigError, match="give no tokens"):
        WebSettings(tokens=(TOKEN,), open=True)
    WebSettings(open=True)


@pytest.mark.parametrize(
    ("length", "accepted"),
    [
        (MIN_TOKEN_LENGTH - 1, False),
        (MIN_TOKEN_LENGTH, True),
        (MAX_TOKEN_LENGTH, True),
        (MAX_TOKEN_LENGTH + 1, False),
    ],
)
def test_token_lengths_are_bounded(length: int, accepted: bool) -> None:
    token = "t" * length
    if accepted:
        assert WebSettings(tokens=(token,)).tokens == (token,)
    else:
        with pytest.raises(WebConfigError, match="characters long") as raised:
            WebSettings(tokens=(token,))
        assert token not in str(raised.value)  # a refused token is not echoed


@pytest.mark.parametrize(
    "token", ["has space-0123456789", "tab\t0123456789abcdef", "n\u00e9-0123456789abcdef"]
)
def test_tokens_are_printable_ascii_without_whitespace(token: str) -> None:
    with pytest.raises(WebConfigError, match="printable ASCII"):
        WebSettings(tokens=(token,))


@pytest.mark.parametrize(
    "options",
    [
        {"session_secret": b"short"},
        {"max_body_bytes": 0},
        {"page_size": -1},
        {"poll_interval_s": 0},
        {"max_streams": True},
        {"templates": Path("/nonexistent/templates")},
    ],
    ids=["secret", "body", "page", "poll", "streams", "templates"],
)
def test_settings_are_checked(options: dict[str, object]) -> None:
    with pytest.raises(WebConfigError):
        WebSettings(tokens=(TOKEN,), **options)  # type: ignore[arg-type]


def test_the_gate_knows_each_token_by_its_digest() -> None:
    gate = Gate(WebSettings(tokens=(TOKEN, OTHER_TOKEN)))
    assert gate.identify(TOKEN) == hashlib.sha256(TOKEN.encode()).hexdigest()
    assert gate.identify(OTHER_TOKEN) == hashlib.sha256(OTHER_TOKEN.encode()).hexdigest()
    assert gate.identify(TOKEN[:-1]) is None
    assert gate.identify(None) is None


def test_tokens_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    assert tokens_from_environment({"STATIFIER_WEB_TOKENS": f" {TOKEN},{OTHER_TOKEN}\n"}) == (
        TOKEN,
        OTHER_TOKEN,
    )
    assert tokens_from_environment({}) == ()
    path = tmp_path / "tokens"
    path.write_text(f"# operators\n{TOKEN}\n\n  {OTHER_TOKEN}  \n")
    assert tokens_from_file(path) == (TOKEN, OTHER_TOKEN)
    with pytest.raises(WebConfigError, match="cannot read tokens"):
        tokens_from_file(tmp_path / "missing")


LIMIT = 300


@pytest.fixture
async def small(pool: AsyncConnectionPool) -> AsyncIterator[WebRig]:
    """An app whose request bodies are bounded to ``LIMIT`` bytes."""
    async with web_rig(pool, max_body_bytes=LIMIT) as rig:
        yield rig


def event_body(size: int) -> bytes:
    """An event's JSON body of exactly ``size`` bytes."""
    empty = json.dumps({"name": "note", "data": ""}).encode()
    body = json.dumps({"name": "note", "data": "x" * (size - len(empty))}).encode()
    assert len(body) == size
    return body


async def test_a_body_of_the_limit_is_taken_and_one_byte_more_is_413(small: WebRig) -> None:
    await small.client.post("/api/executions", json={"chart": "card", "id": "b"})
    headers = {"Content-Type": "application/json"}
    taken = await small.client.post(
        "/api/executions/b/events", content=event_body(LIMIT), headers=headers
    )
    assert taken.status_code == 200, taken.text
    over = await small.client.post(
        "/api/executions/b/events", content=event_body(LIMIT + 1), headers=headers
    )
    assert over.status_code == 413
    assert over.json() == {
        "error": {
            "code": "request_too_large",
            "message": f"the request body is over the {LIMIT} byte limit",
            "limit": LIMIT,
        }
    }
    assert (await small.executions.get("b")).step_count == 2  # the large one drove nothing


async def test_a_chunked_body_is_counted_as_it_arrives(small: WebRig) -> None:
    await small.client.post("/api/executions", json={"chart": "card", "id": "c"})
    body = event_body(LIMIT + 200)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 64):
            yield body[start : start + 64]

    over = await small.client.post(
        "/api/executions/c/events",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert over.status_code == 413
    assert over.json()["error"]["code"] == "request_too_large"
    assert (await small.executions.get("c")).step_count == 1

    async def few() -> AsyncIterator[bytes]:
        small_body = event_body(LIMIT)
        for start in range(0, len(small_body), 64):
            yield small_body[start : start + 64]

    taken = await small.client.post(
        "/api/executions/c/events", content=few(), headers={"Content-Type": "application/json"}
    )
    assert taken.status_code == 200
