"""The JSON API over real HTTP on loopback (a real uvicorn) against real PostgreSQL:
start, events, get, list, counts, cancel, park, unpark, idempotency keys, typed errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import statifier
from psycopg_pool import AsyncConnectionPool
from statifier_web._service import keyed_id

from web_support.charts import CARD
from web_support.rig import WebRig, web_rig


async def start(web: WebRig, **body: Any) -> httpx.Response:
    """POST /api/executions with ``body`` (chart ``card`` unless given)."""
    headers = {}
    if "key" in body:
        headers["Idempotency-Key"] = body.pop("key")
    return await web.client.post("/api/executions", json={"chart": "card", **body}, headers=headers)


KEY = "Idempotency-Key"


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The typed error body of a failed answer."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"]["message"], str)
    return dict(body["error"])


async def test_start_get_and_the_pending_timer_with_its_due_time(web: WebRig) -> None:
    before = datetime.now(UTC)
    response = await start(web, id="card_1", datamodel={"hold": "2h"}, metadata={"c": "c1"})
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"{web.url}/api/executions/card_1"
    answer = response.json()
    assert answer["outcome"] == "stepped"
    execution = answer["execution"]
    assert execution["id"] == "card_1"
    assert execution["status"] == "active"
    assert execution["chart"] == {"name": "card", "version": None, "identity": CARD.identity}
    assert execution["configuration"] == ["authorized"]
    assert execution["active_states"] == ["authorized"]
    assert execution["datamodel"] == {"captures": 0, "hold": "2h", "note": ""}
    assert execution["metadata"] == {"c": "c1"}
    assert execution["step_count"] == 1
    assert execution["invocations"] == []

    got = await web.client.get("/api/executions/card_1")
    assert got.status_code == 200
    detail = got.json()
    [timer] = detail["timers"]
    assert (timer["send_id"], timer["event"], timer["job_state"]) == (
        "hold", "authorization.expired", "scheduled"
    )  # fmt: skip
    due = datetime.fromisoformat(timer["due_at"])
    assert due.utcoffset() == timedelta(0)
    assert before + timedelta(hours=2) - timedelta(seconds=5) <= due
    assert due <= datetime.now(UTC) + timedelta(hours=2)
    assert datetime.fromisoformat(detail["created_at"]).utcoffset() == timedelta(0)


async def test_a_start_with_an_idempotency_key_is_applied_once(web: WebRig) -> None:
    first = await start(web, key="order-17")
    again = await start(web, key="order-17")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["outcome"] == "stepped"
    assert again.json()["outcome"] == "already_applied"
    execution_id = first.json()["execution"]["id"]
    assert execution_id == keyed_id("order-17")
    assert again.json()["execution"]["id"] == execution_id
    assert again.headers["location"].endswith(f"/api/executions/{execution_id}")
    assert (await web.client.get("/api/counts")).json()["total"] == 1
    # With an id of the caller's, the key still guards it.
    assert (await start(web, id="mine", key="k2")).status_code == 201
    assert (await start(web, id="mine", key="k2")).status_code == 200
    taken = await start(web, id="mine", key="k3")
    assert taken.status_code == 409
    assert error_of(taken)["code"] == "execution_exists"
    # The same key for another chart is a mistake, not a retry.
    other = statifier.compile(CARD.source, name="other")
    await web.executions.register(other)
    reused = await start(web, chart="other", key="order-17")
    assert reused.status_code == 422
    assert error_of(reused)["code"] == "idempotency_key_reused"


async def test_events_are_stepped_and_a_key_applies_once(web: WebRig) -> None:
    await start(web, id="card_2")
    send = {"name": "capture.requested"}
    first = await web.client.post(
        "/api/executions/card_2/events", json=send, headers={"Idempotency-Key": "req-1"}
    )
    again = await web.client.post(
        "/api/executions/card_2/events", json=send, headers={"Idempotency-Key": "req-1"}
    )
    assert first.status_code == again.status_code == 200
    assert first.json()["outcome"] == "stepped"
    assert again.json()["outcome"] == "already_applied"
    detail = again.json()["execution"]
    assert detail["active_states"] == ["capturing"]
    assert detail["datamodel"]["captures"] == 1
    assert detail["timers"] == []  # leaving authorized cancelled the hold
    noted = await web.client.post(
        "/api/executions/card_2/events", json={"name": "note", "data": {"by": ["a", 1, None]}}
    )
    assert noted.json()["execution"]["datamodel"]["note"] == {"by": ["a", 1, None]}
    done = await web.client.post(
        "/api/executions/card_2/events", json={"name": "capture.succeeded"}
    )
    assert done.json()["execution"]["status"] == "completed"
    assert done.json()["execution"]["outcome"]["configuration"] == ["settled"]
    late = await web.client.post("/api/executions/card_2/events", json={"name": "note"})
    assert late.status_code == 409
    assert error_of(late) == {
        "code": "execution_terminal",
        "message": "execution 'card_2' is completed",
        "execution_id": "card_2",
        "status": "completed",
    }


async def test_cancel_park_and_unpark(web: WebRig) -> None:
    await start(web, id="c")
    await start(web, id="p")
    cancelled = await web.client.post("/api/executions/c/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["timers"] == []
    again = await web.client.post("/api/executions/c/cancel")
    assert again.status_code == 409
    assert error_of(again)["code"] == "execution_terminal"

    parked = await web.client.post("/api/executions/p/park")
    assert parked.json()["status"] == "needs_migration"
    refused = await web.client.post("/api/executions/p/events", json={"name": "capture.requested"})
    assert refused.status_code == 409
    assert error_of(refused)["code"] == "execution_parked"
    assert error_of(await web.client.post("/api/executions/p/cancel"))["code"] == (
        "execution_parked"
    )
    twice = await web.client.post("/api/executions/p/park")
    assert twice.status_code == 409
    assert error_of(twice)["code"] == "invalid_transition"
    unparked = await web.client.post("/api/executions/p/unpark")
    assert unparked.json()["status"] == "active"
    assert error_of(await web.client.post("/api/executions/p/unpark"))["code"] == (
        "invalid_transition"
    )
    stepped = await web.client.post("/api/executions/p/events", json={"name": "capture.requested"})
    assert stepped.json()["execution"]["active_states"] == ["capturing"]


async def test_list_filters_pages_and_counts(web: WebRig) -> None:
    for n in range(5):
        await start(web, id=f"e{n}", metadata={"even": n % 2 == 0})
    await web.client.post("/api/executions/e1/cancel")
    listed = (await web.client.get("/api/executions")).json()
    assert [e["id"] for e in listed["executions"]] == ["e0", "e1", "e2", "e3", "e4"]
    assert listed["after"] is None
    assert set(listed["executions"][0]) >= {"id", "status", "chart", "updated_at", "metadata"}
    assert "datamodel" not in listed["executions"][0]  # a list stays light

    first = (await web.client.get("/api/executions", params={"limit": 2})).json()
    assert ([e["id"] for e in first["executions"]], first["after"]) == (["e0", "e1"], "e1")
    second = (await web.client.get("/api/executions", params={"limit": 2, "after": "e1"})).json()
    assert [e["id"] for e in second["executions"]] == ["e2", "e3"]
    cancelled = await web.client.get("/api/executions", params={"status": "cancelled"})
    assert [e["id"] for e in cancelled.json()["executions"]] == ["e1"]
    even = await web.client.get("/api/executions", params={"metadata": '{"even": true}'})
    assert [e["id"] for e in even.json()["executions"]] == ["e0", "e2", "e4"]
    by_chart = await web.client.get("/api/executions", params={"chart": "nope"})
    assert by_chart.json()["executions"] == []
    by_revision = await web.client.get("/api/executions", params={"revision": CARD.identity})
    assert len(by_revision.json()["executions"]) == 5

    counts = (await web.client.get("/api/counts")).json()
    assert counts == {
        "counts": {
            "active": 4, "completed": 0, "failed": 0, "cancelled": 1, "needs_migration": 0
        },
        "total": 5,
    }  # fmt: skip
    even_counts = await web.client.get("/api/counts", params={"metadata": '{"even": true}'})
    assert even_counts.json()["total"] == 3


async def test_unknown_ids_and_charts_are_404(web: WebRig) -> None:
    for method, path, body in [
        ("GET", "/api/executions/nope", None),
        ("POST", "/api/executions/nope/events", {"name": "x"}),
        ("POST", "/api/executions/nope/cancel", None),
        ("POST", "/api/executions/nope/park", None),
        ("POST", "/api/executions/nope/unpark", None),
    ]:
        response = await web.client.request(method, path, json=body)
        assert response.status_code == 404, (method, path)
        assert error_of(response) == {
            "code": "execution_not_found",
            "message": "no execution 'nope'",
            "execution_id": "nope",
        }
    missing = await start(web, chart="nothing")
    assert missing.status_code == 404
    assert error_of(missing)["code"] == "chart_not_registered"
    route = await web.client.get("/api/nothing")
    assert route.status_code == 404
    assert error_of(route)["code"] == "not_found"


async def test_ids_with_any_printable_characters_are_reachable(web: WebRig) -> None:
    odd = "a/b?c#d%e<f>"
    created = await start(web, id=odd)
    assert created.status_code == 201
    assert created.headers["location"] == f"{web.url}/api/executions/a/b%3Fc%23d%25e%3Cf%3E"
    quoted = httpx.URL("/api/executions/").join("a%2Fb%3Fc%23d%25e%3Cf%3E").raw_path.decode()
    got = await web.client.get(quoted)
    assert got.status_code == 200, got.text
    assert got.json()["id"] == odd
    sent = await web.client.post(f"{quoted}/events", json={"name": "capture.requested"})
    assert sent.json()["execution"]["active_states"] == ["capturing"]


@pytest.mark.parametrize(
    ("path", "body", "headers", "where"),
    [
        ("/api/executions/x/events", {"name": "two words"}, {}, "name"),
        ("/api/executions/x/events", {"name": ""}, {}, "name"),
        ("/api/executions/x/events", {"name": "n", "extra": 1}, {}, "extra"),
        ("/api/executions/x/events", {"name": "n"}, {KEY: "a b"}, KEY),
        ("/api/executions/x/events", {"name": "n"}, {KEY: "k" * 201}, KEY),
        ("/api/executions", {"chart": "card", "datamodel": [1]}, {}, "datamodel"),
        ("/api/executions", {"chart": "card", "id": "x" * 201}, {}, "id"),
        ("/api/executions", {}, {}, "chart"),
    ],
    ids=["spaced-name", "empty-name", "extra-field", "spaced-key", "long-key", "datamodel-list",
         "long-id", "no-chart"],
)  # fmt: skip
async def test_bad_input_is_422_naming_the_field(
    web: WebRig, path: str, body: dict[str, Any], headers: dict[str, str], where: str
) -> None:
    await start(web, id="x")
    response = await web.client.post(path, json=body, headers=headers)
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "invalid_request"
    assert any(where in problem["location"] for problem in error["problems"]), error


async def test_values_the_engine_cannot_store_are_422(web: WebRig) -> None:
    await start(web, id="v")
    deep: Any = 1
    for _ in range(300):
        deep = [deep]
    too_deep = await web.client.post(
        "/api/executions/v/events", json={"name": "note", "data": deep}
    )
    assert too_deep.status_code == 422
    assert error_of(too_deep)["code"] == "invalid_argument"
    assert "data" in error_of(too_deep)["message"]
    seeded = await start(web, id="w", datamodel={"x": deep})
    assert seeded.status_code == 422
    bad_filter = await web.client.get("/api/executions", params={"metadata": "[1]"})
    assert bad_filter.status_code == 422
    assert error_of(bad_filter)["code"] == "invalid_argument"
    assert (await web.client.get("/api/executions", params={"limit": 0})).status_code == 422
    assert (await web.client.get("/api/executions", params={"limit": 1001})).status_code == 422
    assert (await web.client.get("/api/executions", params={"status": "nope"})).status_code == 422
    not_json = await web.client.post(
        "/api/executions/v/events", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert not_json.status_code == 422


async def test_a_chart_invoking_a_type_without_a_handler_here_is_not_stepped(web: WebRig) -> None:
    invoking = statifier.compile(
        """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="invoking" initial="a">
  <state id="a"><transition event="go" target="b"/></state>
  <state id="b"><invoke type="myapp:capture"/></state>
</scxml>"""
    )
    await web.executions.register(invoking)
    refused = await start(web, chart="invoking", id="i1")
    assert refused.status_code == 501
    assert error_of(refused)["code"] == "invoke_handler_missing"
    assert error_of(refused)["invoke_types"] == ["myapp:capture"]
    await web.executions.create(invoking, execution_id="i2")
    sent = await web.client.post("/api/executions/i2/events", json={"name": "go"})
    assert sent.status_code == 501
    assert error_of(sent)["invoke_types"] == ["myapp:capture"]
    assert (await web.executions.get("i2")).step_count == 1  # nothing was driven


async def test_the_history_of_an_execution_pages_oldest_first(web: WebRig) -> None:
    await start(web, id="h1")
    await web.client.post(
        "/api/executions/h1/events",
        json={"name": "capture.requested", "data": {"amount": 3}},
        headers={KEY: "req-9"},
    )
    await web.client.post("/api/executions/h1/park")
    await web.client.post("/api/executions/h1/unpark")
    whole = await web.client.get("/api/executions/h1/history")
    assert whole.status_code == 200, whole.text
    entries = whole.json()["entries"]
    assert [(e["seq"], e["kind"]) for e in entries] == [
        (1, "created"), (2, "event"), (3, "parked"), (4, "unparked")
    ]  # fmt: skip
    event = entries[1]
    assert event["event"] == {"name": "capture.requested", "data": {"amount": 3},
                              "data_clipped": False}  # fmt: skip
    assert (event["key"], event["trigger"]["source"]) == ("req-9", "api")
    assert (event["configuration_before"], event["configuration_after"]) == (
        ["authorized"], ["capturing"]
    )  # fmt: skip
    assert event["timers_cancelled"] == ["hold"]
    assert entries[0]["timers_armed"][0]["send_id"] == "hold"
    assert "due_at" in entries[0]["timers_armed"][0]
    first = (await web.client.get("/api/executions/h1/history", params={"limit": 2})).json()
    assert ([e["seq"] for e in first["entries"]], first["after"]) == ([1, 2], 2)
    rest = await web.client.get("/api/executions/h1/history", params={"after": 2})
    assert [e["seq"] for e in rest.json()["entries"]] == [3, 4]
    last = await web.client.get("/api/executions/h1/history", params={"before": 5, "limit": 1})
    assert [e["seq"] for e in last.json()["entries"]] == [4]
    both = await web.client.get("/api/executions/h1/history", params={"after": 1, "before": 3})
    assert both.status_code == 422
    assert (await web.client.get("/api/executions/nope/history")).status_code == 404
    assert (
        await web.client.get("/api/executions/h1/history", params={"limit": 0})
    ).status_code == 422


SHARED = statifier.compile(
    """<scxml xmlns="http://www.w3.org/2005/07/scxml" name="shared" datamodel="ecmascript"
       initial="open">
  <datamodel>
    <data id="o" expr="({k: 1, f: function () { return 1 }})"/>
    <data id="p" expr="o"/><data id="n" expr="NaN"/>
  </datamodel>
  <state id="open">
    <transition event="loop"><assign location="o.self" expr="o"/></transition>
  </state>
</scxml>"""
)
"""An ECMAScript chart whose position keeps o and p as one object ({"$ref": 0}, #objects),
a method and NaN as tags, and on ``loop`` a cycle."""


async def test_an_ecmascript_charts_variables_are_plain_json(
    web: WebRig, pool: AsyncConnectionPool
) -> None:
    await web.executions.register(SHARED)
    started = await web.client.post("/api/executions", json={"chart": "shared", "id": "js"})
    assert started.status_code == 201, started.text
    assert started.json()["execution"]["datamodel"] == {"o": {"k": 1}, "p": {"k": 1}, "n": None}
    looped = await web.client.post("/api/executions/js/events", json={"name": "loop"})
    circular = {"k": 1, "self": "[Circular]"}
    assert looped.json()["execution"]["datamodel"] == {"o": circular, "p": circular, "n": None}
    got = await web.client.get("/api/executions/js")
    assert got.json()["datamodel"] == {"o": circular, "p": circular, "n": None}
    # The console's page of it, from an open app over the same database.
    async with web_rig(pool, tokens=(), open=True) as console:
        page = (await console.client.get("/console/executions/js")).text
    assert "[Circular]" in page
    assert "$ref" not in page
    assert "#objects" not in page
