"""The BasicHTTP Event I/O processor's pure parts (SCXML C.2, D.2): what the core makes of a
``<send type="basichttp">``, the messages, the allow-list and the locations."""

from __future__ import annotations

import json
from typing import Any

import pytest
import statifier
from statifier.basichttp import (
    BasicHTTPError,
    Locations,
    OutboundPolicy,
    OutboundRequest,
    PostRefused,
    PostRejected,
    outbound,
    read_post,
)
from statifier.core import effects as fx
from statifier.core import planner, position
from statifier.core.events import BASIC_HTTP_EVENT_PROCESSOR, SCXML_EVENT_PROCESSOR, Event

NS = 'xmlns="http://www.w3.org/2005/07/scxml"'
HTTP_TYPE = BASIC_HTTP_EVENT_PROCESSOR
KEY = b"k" * 16


def chart(body: str, datamodel: str = "python") -> statifier.Machine:
    return statifier.compile(
        f'<scxml {NS} datamodel="{datamodel}" initial="s">{body}<final id="f"/></scxml>'
    )


def effects_of(body: str, **options: Any) -> list[fx.Effect]:
    _, effects = statifier.initialize(chart(body), session_id="s1", **options)
    return effects


def sends(effects: list[fx.Effect]) -> list[fx.Send]:
    return [e for e in effects if isinstance(e, fx.Send)]


def errors(effects: list[fx.Effect]) -> list[tuple[str, str | None, str | None]]:
    return [(e.name, e.sendid, e.message) for e in effects if isinstance(e, fx.ErrorRaised)]


# -- the core ---------------------------------------------------------------------------


@pytest.mark.parametrize("send_type", ["basichttp", HTTP_TYPE])
def test_a_basichttp_send_to_a_url_is_planned_as_a_post(send_type: str) -> None:
    effects = effects_of(
        f'<state id="s"><onentry><send type="{send_type}" event="go" '
        'target="https://hooks.example.com/in?x=1"><param name="a" expr="1"/></send>'
        "</onentry></state>"
    )
    (send,) = sends(effects)
    assert (send.event, send.target, send.data) == (
        "go",
        "https://hooks.example.com/in?x=1",
        {"a": 1},
    )
    instruction = planner.plan_effect("s1", send)
    assert instruction == planner.Post(send, "https://hooks.example.com/in?x=1")
    assert not errors(effects)


def test_a_basichttp_send_may_have_no_event_name() -> None:
    effects = effects_of(
        '<state id="s"><onentry><send type="basichttp" target="http://a.example/">'
        '<param name="_scxmleventname" expr="\'named\'"/></send></onentry></state>'
    )
    (send,) = sends(effects)
    assert send.event == ""  # the POST carries no name of its own


def test_a_send_of_another_type_still_needs_an_event_name() -> None:
    with pytest.raises(statifier.ChartError, match="needs event or eventexpr"):
        chart('<state id="s"><onentry><send target="http://a.example/"/></onentry></state>')


def test_a_basichttp_send_without_target_raises_error_communication_with_its_id() -> None:
    # SCXML D.2 (W3C test 577): on the internal queue, the rest of the block aborted.
    effects = effects_of(
        '<state id="s"><onentry><send id="h" type="basichttp" event="go"/>'
        '<send event="after"/></onentry></state>'
    )
    assert errors(effects) == [("error.communication", "h", "a BasicHTTP send needs a target URL")]
    assert sends(effects) == []


@pytest.mark.parametrize(
    "target",
    [
        "ftp://a.example/x",
        "/relative/path",
        "#_parent",
        "http://user:pw@a.example/",
        "http:///no-host",
        "http://a.example:99999/",
        "http://a.example/a b",
        "http://a.example/" + "x" * (planner.MAX_URL_LENGTH - len("http://a.example/") + 1),
    ],
)
def test_a_basichttp_send_to_what_is_no_http_url_raises_error_execution(target: str) -> None:
    effects = effects_of(
        f'<state id="s"><onentry><send id="h" type="basichttp" event="go" '
        f'targetexpr="{json.dumps(target)[1:-1]!r}"/></onentry></state>'.replace("\"'", "\"'")
    )
    (found,) = errors(effects)
    assert found[:2] == ("error.execution", "h")
    assert "is not an http or https URL" in (found[2] or "")


def test_the_longest_url_is_accepted() -> None:
    url = "http://a.example/" + "x" * (planner.MAX_URL_LENGTH - len("http://a.example/"))
    assert len(url) == planner.MAX_URL_LENGTH
    assert planner.parse_target(url, "s1", "basichttp") == planner.HttpTarget(url)
    assert isinstance(planner.parse_target(url + "x", "s1", "basichttp"), planner.UnsupportedTarget)


def test_a_url_is_not_an_scxml_target_and_an_scxml_target_is_no_url() -> None:
    assert isinstance(planner.parse_target("http://a.example/", "s1"), planner.UnsupportedTarget)
    assert isinstance(
        planner.parse_target("#_scxml_s2", "s1", "basichttp"), planner.UnsupportedTarget
    )
    assert planner.parse_target("#_scxml_s2", "s1", "scxml") == planner.SessionTarget("s2")


def test_routes_do_not_judge_urls() -> None:
    # A host with a routes snapshot still plans the POST: its allow-list judges it.
    effects = effects_of(
        '<state id="s"><onentry><send type="basichttp" event="go" target="http://a.example/"/>'
        "</onentry></state>",
        routes=frozenset(),
    )
    assert len(sends(effects)) == 1
    assert not errors(effects)


@pytest.mark.parametrize("expr", ["[1]", "{'a': 1}", "7"])
def test_a_type_that_is_no_string_raises_error_execution(expr: str) -> None:
    effects = effects_of(
        f'<state id="s"><onentry><send id="t" typeexpr="{expr}" event="go" '
        'target="http://a.example/"/></onentry></state>'
    )
    (found,) = errors(effects)
    assert found[:2] == ("error.execution", "t")
    assert "is not supported" in (found[2] or "")


def test_a_delayed_basichttp_send_fires_as_a_post() -> None:
    effects = effects_of(
        '<state id="s"><onentry><send type="basichttp" event="go" delay="1s" '
        'target="http://a.example/"/></onentry></state>'
    )
    (delayed,) = [e for e in effects if isinstance(e, fx.SendDelayed)]
    assert planner.plan_effect("s1", delayed) == planner.Schedule(delayed)
    assert planner.fire("s1", delayed) == planner.Post(delayed, "http://a.example/")


@pytest.mark.parametrize("datamodel", ["python", "ecmascript"])
def test_ioprocessors_hold_the_basichttp_location_the_host_gives(datamodel: str) -> None:
    location = "https://app.example/basichttp/s1/cap"
    machine = chart(
        "<datamodel><data id=\"a\" expr=\"_ioprocessors['basichttp']['location']\"/>"
        f"<data id=\"b\" expr=\"_ioprocessors['{HTTP_TYPE}']['location']\"/></datamodel>"
        '<state id="s"/>',
        datamodel,
    )
    state, _ = statifier.initialize(machine, session_id="s1", basichttp_location=location)
    assert (state.datamodel["a"], state.datamodel["b"]) == (location, location)
    again = position.loads(position.dumps(state), machine)
    assert again.datamodel["_ioprocessors"]["basichttp"] == {"location": location}


def test_without_a_location_there_is_no_basichttp_entry() -> None:
    state, effects = statifier.initialize(
        chart(
            '<datamodel><data id="a" expr="_ioprocessors[\'basichttp\']"/></datamodel>'
            '<state id="s"/>'
        ),
        session_id="s1",
    )
    assert set(state.datamodel["_ioprocessors"]) == {"scxml", SCXML_EVENT_PROCESSOR}
    assert [name for name, _, _ in errors(effects)] == ["error.execution"]


# -- events received ----------------------------------------------------------------------


def test_a_received_post_is_an_external_event_with_its_raw_message() -> None:
    event = planner.received_post(None, {"a": "1"}, "POST / HTTP/1.1\r\n\r\na=1")
    assert (event.name, event.type, event.origintype) == ("HTTP.POST", "external", HTTP_TYPE)
    # A POST names no address to answer at: the sender passes one as data if it wants one.
    assert (event.origin, event.sendid, event.invokeid) == (None, None, None)
    variable = event.as_system_variable()
    assert variable["raw"] == "POST / HTTP/1.1\r\n\r\na=1"
    assert "caller_context" not in variable
    assert "raw" not in Event(name="x").as_system_variable()
    assert "raw" not in Event(name="x", caller_context={"t": 1}).as_system_variable()


def test_an_event_with_raw_survives_its_stored_form() -> None:
    event = planner.received_post("go", None, "raw text")
    stored = position.event_payload(event)
    assert stored["raw"] == "raw text"
    assert position.event_from_payload(stored) == event
    assert "raw" not in position.event_payload(Event(name="x"))
    with pytest.raises(position.CorruptPosition, match="raw"):
        position.event_from_payload({**stored, "raw": 5})


@pytest.mark.parametrize("datamodel", ["python", "ecmascript"])
def test_the_chart_reads_raw_from_event(datamodel: str) -> None:
    expr = "_event.raw.indexOf('a=1') >= 0" if datamodel == "ecmascript" else "'a=1' in _event.raw"
    machine = chart(
        f'<state id="s"><transition event="go" cond="{expr}" target="f"/></state>', datamodel
    )
    state, _ = statifier.initialize(machine, session_id="s1")
    state, _ = statifier.handle_event(state, planner.received_post("go", None, "POST /\r\n\r\na=1"))
    assert state.final_configuration == ("f",)


def test_post_failed_carries_the_reason_status_and_attempts() -> None:
    event = planner.post_failed("h", "answered 503", status=503, attempts=5)
    assert (event.name, event.type, event.sendid) == ("error.communication", "platform", "h")
    assert event.data == {"message": "answered 503", "status": 503, "attempts": 5}
    assert planner.post_failed(None, "no").data == {"message": "no"}


# -- outbound messages ----------------------------------------------------------------------


def post(data: Any, event: str = "go", url: str = "http://a.example/in") -> planner.Post:
    effect = fx.Send(
        event=event, target=url, type="basichttp", data=data, send_id="s_1", c_index=0,
        owner=("onentry", 1, 0), id_from_author=False, macrostep=1, microstep=1, round=0,
    )  # fmt: skip
    return planner.Post(effect, url)


def test_fields_go_as_a_form_with_the_event_name_first() -> None:
    request = outbound(post({"a": "x y", "n": 2, "f": 1.5, "t": True, "no": False, "z": None}))
    assert request == OutboundRequest(
        "http://a.example/in",
        "application/x-www-form-urlencoded",
        b"_scxmleventname=go&a=x+y&n=2&f=1.5&t=true&no=false&z=",
        "s_1",
    )


def test_no_data_is_a_form_with_the_name_only_or_nothing() -> None:
    assert outbound(post(None)).body == b"_scxmleventname=go"
    assert outbound(post(None, event="")).body == b""


def test_a_name_field_of_the_data_counts_only_without_an_event() -> None:
    assert outbound(post({"_scxmleventname": "own"}, event="")).body == b"_scxmleventname=own"
    assert outbound(post({"_scxmleventname": "own"})).body == b"_scxmleventname=own"


def test_text_content_is_the_body_and_the_name_goes_into_the_query() -> None:
    request = outbound(post("this is some content", url="http://a.example/in?x=1#frag"))
    assert request.content_type == "text/plain; charset=utf-8"
    assert request.body == b"this is some content"
    assert request.url == "http://a.example/in?x=1&_scxmleventname=go"


@pytest.mark.parametrize("data", [[1, 2], {"a": {"b": 1}}, {"a": [1]}, 7])
def test_structured_content_is_json(data: Any) -> None:
    request = outbound(post(data, event=""))
    assert request.content_type == "application/json"
    assert json.loads(request.body) == data
    assert request.url == "http://a.example/in"


# -- inbound messages -----------------------------------------------------------------------

FORM = "application/x-www-form-urlencoded"


def test_a_form_becomes_a_named_event_with_its_fields() -> None:
    received = read_post("/b/s/c", FORM, b"_scxmleventname=test&Var1=2&a=x&a=y&e=")
    assert received.name == "test"
    assert received.data == {"Var1": "2", "a": ["x", "y"], "e": ""}
    assert received.raw == (
        "POST /b/s/c HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\r\n"
        "_scxmleventname=test&Var1=2&a=x&a=y&e="
    )
    assert received.event().name == "test"


def test_without_a_name_the_event_is_the_method() -> None:
    received = read_post("/b/s/c", "text/plain", b"some content")
    assert (received.name, received.data) == (None, "some content")
    assert received.event().name == "HTTP.POST"


def test_the_name_may_come_from_the_query_or_a_json_object() -> None:
    assert read_post("/x?_scxmleventname=q", "application/json", b"[1]").name == "q"
    received = read_post("/x", "application/json; charset=utf-8", b'{"_scxmleventname":"j","v":1}')
    assert (received.name, received.data) == ("j", {"v": 1})
    assert read_post("/x", "application/json", b'{"_scxmleventname":"j"}').data is None


@pytest.mark.parametrize(
    ("target", "content_type", "body"),
    [
        ("/x?_scxmleventname=a", FORM, b"_scxmleventname=b"),
        ("/x", FORM, b"_scxmleventname=a&_scxmleventname=a"),
        ("/x?_scxmleventname=a", "application/json", b'{"_scxmleventname":"b"}'),
    ],
)
def test_a_name_given_twice_is_refused(target: str, content_type: str, body: bytes) -> None:
    with pytest.raises(PostRejected, match="given 2 times") as caught:
        read_post(target, content_type, body)
    assert caught.value.status == 400


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/octet-stream", b"\x00", 415),
        ("text/plain; charset=latin-1", b"x", 415),
        (None, b"x", 415),
        ("text/plain", b"\xff\xfe", 400),
        ("application/json", b"{", 400),
        ("application/json", b'{"_scxmleventname": 1}', 400),
        (FORM, b"_scxmleventname=a%20b", 400),
        (FORM, b"_scxmleventname=", 400),
    ],
)
def test_what_cannot_be_an_event_is_refused(
    content_type: str | None, body: bytes, status: int
) -> None:
    with pytest.raises(PostRejected) as caught:
        read_post("/x", content_type, body)
    assert caught.value.status == status


def test_an_empty_post_without_a_type_is_an_event_without_data() -> None:
    received = read_post("/x", None, b"")
    assert (received.name, received.data) == (None, None)
    assert "Content-Type: (none)" in received.raw


def test_the_body_limit_is_inclusive() -> None:
    assert read_post("/x", "text/plain", b"x" * 10, max_bytes=10).data == "x" * 10
    with pytest.raises(PostRejected) as caught:
        read_post("/x", "text/plain", b"x" * 11, max_bytes=10)
    assert caught.value.status == 413


def test_json_nested_too_deep_is_refused() -> None:
    with pytest.raises(PostRejected, match="nested"):
        read_post("/x", "application/json", b"[" * 300 + b"]" * 300)


# -- the allow-list -------------------------------------------------------------------------


def test_nothing_is_allowed_by_default() -> None:
    policy = OutboundPolicy()
    assert not policy.enabled
    with pytest.raises(PostRefused, match="allow-list is empty"):
        policy.check_url("https://a.example/")


@pytest.mark.parametrize(
    ("hosts", "url", "allowed"),
    [
        (("a.example",), "https://a.example/x", True),
        (("a.example",), "https://A.Example./x", True),
        (("a.example",), "https://b.a.example/x", False),
        (("*.a.example",), "https://b.a.example/x", True),
        (("*.a.example",), "https://a.example/x", False),
        (("*.a.example",), "https://ba.example/x", False),
        (("*",), "https://anything.example/x", True),
        (("*",), "https://203.0.113.9/x", True),
        (("203.0.113.9",), "https://203.0.113.9/x", True),
        (("[2001:db8::1]",), "https://[2001:DB8:0::1]/x", True),
        (("203.0.113.9",), "https://203.0.113.10/x", False),
    ],
)
def test_hosts_are_allowed_by_name_suffix_address_or_star(
    hosts: tuple[str, ...], url: str, allowed: bool
) -> None:
    policy = OutboundPolicy(hosts=hosts)
    if allowed:
        assert policy.check_url(url).port == 443
    else:
        with pytest.raises(PostRefused, match="not on the allow-list"):
            policy.check_url(url)


def test_ports_and_schemes_are_checked() -> None:
    policy = OutboundPolicy(hosts=("a.example",))
    assert policy.check_url("http://a.example/").port == 80
    with pytest.raises(PostRefused, match="port 8080"):
        policy.check_url("http://a.example:8080/")
    assert OutboundPolicy(hosts=("a.example",), ports=None).check_url("http://a.example:8080/")
    with pytest.raises(PostRefused, match="scheme http"):
        OutboundPolicy(hosts=("a.example",), schemes=("https",)).check_url("http://a.example/")


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("127.0.0.1", False),
        ("::1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),  # noqa: S104 - an address refused, not bound
        ("224.0.0.1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:93.184.215.14", True),
    ],
)
def test_only_public_addresses_are_reached_by_default(address: str, allowed: bool) -> None:
    policy = OutboundPolicy(hosts=("*",))
    if allowed:
        policy.check_address(address)
    else:
        with pytest.raises(PostRefused, match="not public"):
            policy.check_address(address)


def test_networks_allow_internal_addresses_explicitly() -> None:
    policy = OutboundPolicy(hosts=("*",), networks=("127.0.0.0/8", "10.0.0.0/24"))
    policy.check_address("127.0.0.5")
    policy.check_address("::ffff:127.0.0.1")
    policy.check_address("10.0.0.255")
    with pytest.raises(PostRefused):
        policy.check_address("10.0.1.0")


def test_the_body_limit_is_inclusive_outbound() -> None:
    policy = OutboundPolicy(hosts=("a.example",), max_body_bytes=10)
    policy.check(OutboundRequest("http://a.example/", "text/plain", b"x" * 10, "s"))
    with pytest.raises(PostRefused, match="11 bytes, over the limit of 10"):
        policy.check(OutboundRequest("http://a.example/", "text/plain", b"x" * 11, "s"))


@pytest.mark.parametrize(
    "options",
    [
        {"hosts": "a.example"},
        {"hosts": ("a/b",)},
        {"hosts": ("a.example:80",)},
        {"networks": ("not-a-net",)},
        {"ports": (0,)},
        {"ports": (65536,)},
        {"ports": (True,)},
        {"schemes": ("ftp",)},
        {"max_body_bytes": 0},
        {"attempts": 0},
        {"timeout_s": 0},
        {"timeout_s": 600.5},
    ],
)
def test_a_wrong_policy_is_refused_when_made(options: dict[str, Any]) -> None:
    with pytest.raises(BasicHTTPError):
        OutboundPolicy(**options)


def test_the_bounds_of_a_policy_are_inclusive() -> None:
    OutboundPolicy(ports=(1, 65535), attempts=1, max_body_bytes=1, timeout_s=600)


def test_the_policy_reads_the_environment() -> None:
    policy = OutboundPolicy.from_env(
        {
            "STATIFIER_BASICHTTP_ALLOW": "a.example, *.b.example",
            "STATIFIER_BASICHTTP_NETWORKS": "127.0.0.0/8",
            "STATIFIER_BASICHTTP_PORTS": "any",
            "STATIFIER_BASICHTTP_TIMEOUT": "2.5",
            "STATIFIER_BASICHTTP_ATTEMPTS": "3",
            "STATIFIER_BASICHTTP_MAX_BODY": "100",
        }
    )
    assert policy.hosts == ("a.example", "*.b.example")
    assert (policy.ports, policy.timeout_s, policy.attempts, policy.max_body_bytes) == (
        None, 2.5, 3, 100
    )  # fmt: skip
    policy.check_address("127.0.0.1")
    assert OutboundPolicy.from_env({"STATIFIER_BASICHTTP_PORTS": "8080 443"}).ports == (8080, 443)
    assert OutboundPolicy.from_env({}) == OutboundPolicy()
    with pytest.raises(BasicHTTPError, match="STATIFIER_BASICHTTP_ATTEMPTS"):
        OutboundPolicy.from_env({"STATIFIER_BASICHTTP_ATTEMPTS": "many"})
    with pytest.raises(BasicHTTPError, match="one number"):
        OutboundPolicy.from_env({"STATIFIER_BASICHTTP_TIMEOUT": "1 2"})


# -- locations --------------------------------------------------------------------------------


def test_a_location_carries_a_capability_only_the_key_makes() -> None:
    locations = Locations("https://app.example/base/", KEY)
    location = locations.location("card/1")
    prefix = "https://app.example/base/basichttp/card%2F1/"
    assert location.startswith(prefix)
    capability = location[len(prefix) :]
    assert len(capability) == 32
    assert capability == locations.capability("card/1")
    assert locations.verify("card/1", capability)
    assert not locations.verify("card/1", capability[:-1] + ("A" if capability[-1] != "A" else "B"))
    assert not locations.verify("card/2", capability)
    assert not Locations("https://app.example/base", b"j" * 16).verify("card/1", capability)
    # The same key and base give the same location on every node, every time.
    assert Locations("https://app.example/base", KEY).location("card/1") == location


def test_a_session_location_differs_from_an_execution_location() -> None:
    locations = Locations("https://app.example", KEY)
    session = locations.capability("x", "session")
    assert session != locations.capability("x")
    assert locations.verify("x", session, "session")
    assert not locations.verify("x", session)


@pytest.mark.parametrize(
    ("base", "key"),
    [
        ("ftp://app.example", KEY),
        ("https://app.example?q=1", KEY),
        ("https://app.example", b"k" * 15),
        ("https://app.example", "k" * 16),
    ],
)
def test_a_wrong_base_or_key_is_refused(base: str, key: Any) -> None:
    with pytest.raises(BasicHTTPError):
        Locations(base, key)


def test_locations_read_the_environment() -> None:
    assert Locations.from_env({}) is None
    found = Locations.from_env(
        {"STATIFIER_BASICHTTP_URL": "https://app.example", "STATIFIER_BASICHTTP_KEY": "k" * 16}
    )
    assert found is not None
    assert found.location("a") == Locations("https://app.example", KEY).location("a")
    with pytest.raises(BasicHTTPError, match="STATIFIER_BASICHTTP_KEY"):
        Locations.from_env({"STATIFIER_BASICHTTP_URL": "https://app.example"})
    assert "k" * 16 not in repr(found)
