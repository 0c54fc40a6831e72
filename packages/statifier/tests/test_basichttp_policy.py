"""The outbound allow-list's address check against addresses that lead somewhere else.

An IPv6 address may carry an IPv4 address that a translator, relay or tunnel delivers to
(NAT64 under DNS64, 6to4, Teredo, the IPv4-compatible and -translated forms): such an
address is as public as the IPv4 address it leads to. Whatever the running Python's
``is_global`` tables say, the answer is the same.
"""

from __future__ import annotations

import ipaddress

import pytest
from statifier.basichttp import OutboundPolicy, PostRefused

ANY_HOST = OutboundPolicy(hosts=("*",))


@pytest.mark.parametrize(
    ("public", "internal"),
    [
        # NAT64, the well-known prefix: DNS64 answers a name with 64:ff9b::<its IPv4>.
        (
            "64:ff9b::808:808",
            {"64:ff9b::a9fe:a9fe": "169.254.169.254", "64:ff9b::a00:1": "10.0.0.1"},
        ),
        # 6to4: 2002:<IPv4>::/48.
        (
            "2002:808:808::1",
            {"2002:7f00:1::1": "127.0.0.1", "2002:a9fe:a9fe::1": "169.254.169.254"},
        ),
        # IPv4-compatible, ::<IPv4> (deprecated, still parsed).
        ("::808:808", {"::7f00:1": "127.0.0.1", "::a00:1": "10.0.0.1"}),
        # IPv4-translated (SIIT), ::ffff:0:<IPv4>.
        ("::ffff:0:808:808", {"::ffff:0:7f00:1": "127.0.0.1", "::ffff:0:c0a8:101": "192.168.1.1"}),
        # Teredo: the server (65.54.227.120 below) relays to the client behind its NAT,
        # stored inverted in the last 32 bits; both are reached, so both must be public.
        (
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
            {
                "2001:0:4136:e378:8000:63bf:3f57:fef5": "192.168.1.10",
                "2001:0:a00:1:8000:63bf:f7f7:f7f7": "10.0.0.1",
            },
        ),
    ],
    ids=["nat64", "6to4", "ipv4-compatible", "ipv4-translated", "teredo"],
)
def test_an_address_that_leads_to_ipv4_is_as_public_as_that_ipv4(
    public: str, internal: dict[str, str]
) -> None:
    ANY_HOST.check_address(public)
    for address, ipv4 in internal.items():
        with pytest.raises(PostRefused, match=rf"leads to {ipv4}, which is not public"):
            ANY_HOST.check_address(address)


@pytest.mark.parametrize(
    "address",
    [
        "fec0::1",  # site-local, deprecated but still routed inside some networks
        "feff::1",
        # The local-use NAT64 prefix: where its IPv4 sits depends on the operator's prefix
        # length, so not even a public-looking one is read as public.
        "64:ff9b:1::a00:1",
        "64:ff9b:1::808:808",
        "3fff::1",  # documentation (RFC 9637)
        "5f00::1",  # segment routing (RFC 9602), outside 2000::/3
    ],
)
def test_ipv6_is_public_only_in_global_unicast_and_outside_its_reserved_blocks(
    address: str,
) -> None:
    with pytest.raises(PostRefused, match="not public"):
        ANY_HOST.check_address(address)


def test_the_6to4_relay_anycast_is_refused() -> None:
    # Whichever relay answers 192.88.99.0/24 forwards into someone's 6to4 network.
    for address in ("192.88.99.1", "192.88.99.255", "::ffff:192.88.99.1"):
        with pytest.raises(PostRefused, match="not public"):
            ANY_HOST.check_address(address)


@pytest.mark.parametrize("is_global", [True, False])
def test_the_answer_does_not_depend_on_pythons_is_global(
    monkeypatch: pytest.MonkeyPatch, is_global: bool
) -> None:
    # Python 3.12.4 changed these tables; every process of a deployment must agree.
    for cls in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        monkeypatch.setattr(cls, "is_global", property(lambda _self: is_global))
    for address in ("1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808", "::ffff:1.1.1.1"):
        ANY_HOST.check_address(address)
    for address in ("127.0.0.1", "10.0.0.1", "::1", "fd00::1", "fe80::1", "224.0.0.1", "ff02::1"):
        with pytest.raises(PostRefused, match="not public"):
            ANY_HOST.check_address(address)


def test_networks_hold_the_ipv4_an_address_leads_to_or_the_ipv6_address_itself() -> None:
    internal_v4 = OutboundPolicy(hosts=("*",), networks=("10.0.0.0/8",))
    internal_v4.check_address("64:ff9b::a00:1")
    internal_v4.check_address("2002:a00:1::1")
    with pytest.raises(PostRefused, match=r"leads to 169\.254\.169\.254"):
        internal_v4.check_address("64:ff9b::a9fe:a9fe")
    with pytest.raises(PostRefused, match="not public"):
        internal_v4.check_address("64:ff9b:1::a00:1")
    local_nat64 = OutboundPolicy(hosts=("*",), networks=("64:ff9b:1::/48",))
    local_nat64.check_address("64:ff9b:1::a00:1")
    with pytest.raises(PostRefused, match=r"leads to 10\.0\.0\.1"):
        local_nat64.check_address("64:ff9b::a00:1")
