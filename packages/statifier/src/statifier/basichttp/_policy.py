"""The host's allow-list for outbound BasicHTTP POSTs: charts may be untrusted.

A chart names any URL it likes in ``<send type="basichttp" target=...>``; the host decides
which it may reach. ``OutboundPolicy`` is that decision, pure and checked twice: the URL
(scheme, port, host name) when the send is made, and every address the host name
resolves to when the client connects (``statifier.basichttp.client``), so a name that
resolves to an internal address, or is made to later (DNS rebinding), is refused on the
address actually connected to.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Self
from urllib.parse import urlsplit

from statifier.core.planner import is_http_url

from ._errors import BasicHTTPError, PostRefused
from ._message import OutboundRequest

MAX_BODY_BYTES: Final = 65_536
"""The largest request body an outbound POST sends, by default."""

TIMEOUT_S: Final = 10.0
"""Seconds one attempt may take (resolving, connecting, sending, the answer's status line
and headers), by default."""

ATTEMPTS: Final = 5
"""Attempts a durable POST makes before its failure is final, by default."""

DEFAULT_PORTS: Final = (80, 443)
"""The ports an outbound POST may reach, by default."""

type Network = ipaddress.IPv4Network | ipaddress.IPv6Network
type Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a checked URL points: its scheme, host (lower case, IPv6 without brackets)
    and port."""

    scheme: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class OutboundPolicy:
    """Which URLs outbound BasicHTTP POSTs may reach, and their bounds.

    ``hosts`` are the host names a POST may go to: ``api.example.com`` (that name),
    ``*.example.com`` (its subdomains, not the name itself), an IP address, or ``*`` (any
    host). None by default: every POST is refused until the host names some. Whatever
    the name, every address it resolves to must be public (globally routable); the
    loopback, private, link-local, shared, reserved and multicast ranges are refused
    unless one of ``networks`` (CIDR blocks, e.g. ``127.0.0.0/8``) holds the address. An
    IPv6 address that leads to an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo) is as
    public as that IPv4 address; any other IPv6 address must be global unicast.
    ``ports`` are the ports allowed (None: any), ``schemes`` ``https`` and ``http`` by
    default. ``max_body_bytes`` bounds the request body, ``timeout_s`` one attempt, and
    ``attempts`` how often a durable POST is tried before it fails for good. Redirects are
    never followed.
    """

    hosts: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    ports: tuple[int, ...] | None = DEFAULT_PORTS
    schemes: tuple[str, ...] = ("https", "http")
    max_body_bytes: int = MAX_BODY_BYTES
    timeout_s: float = TIMEOUT_S
    attempts: int = ATTEMPTS
    _networks: tuple[Network, ...] = field(init=False, repr=False, compare=False)
    _names: frozenset[str] = field(init=False, repr=False, compare=False)
    _suffixes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        hosts = tuple(_host_pattern(host) for host in _strings(self.hosts, "hosts"))
        networks = tuple(_network(text) for text in _strings(self.networks, "networks"))
        if self.ports is not None:
            ports = tuple(self.ports)
            if any(
                isinstance(p, bool) or not isinstance(p, int) or not 0 < p < 65536 for p in ports
            ):
                raise BasicHTTPError(f"ports must be integers in 1..65535, not {self.ports!r}")
            object.__setattr__(self, "ports", ports)
        schemes = tuple(_strings(self.schemes, "schemes"))
        if not set(schemes) <= {"http", "https"}:
            raise BasicHTTPError(f"schemes are http and https, not {self.schemes!r}")
        _positive(self.max_body_bytes, "max_body_bytes")
        _positive(self.attempts, "attempts")
        if isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, int | float):
            raise BasicHTTPError(f"timeout_s must be a number, not {self.timeout_s!r}")
        if not 0 < self.timeout_s <= 600:
            raise BasicHTTPError(f"timeout_s must be in (0, 600] seconds, not {self.timeout_s}")
        object.__setattr__(self, "hosts", hosts)
        object.__setattr__(self, "schemes", schemes)
        object.__setattr__(self, "_networks", networks)
        object.__setattr__(self, "_names", frozenset(h for h in hosts if not h.startswith("*")))
        suffixes = tuple(h[1:] for h in hosts if h.startswith("*.") or h == "*")
        object.__setattr__(self, "_suffixes", suffixes)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Self:
        """The policy the environment describes (every process that steps executions or
        runs their jobs reads the same): ``STATIFIER_BASICHTTP_ALLOW`` (``hosts``),
        ``STATIFIER_BASICHTTP_NETWORKS`` (``networks``), ``STATIFIER_BASICHTTP_PORTS``
        (``ports``, or ``any``), each a list separated by commas or spaces, and
        ``STATIFIER_BASICHTTP_TIMEOUT`` (seconds), ``STATIFIER_BASICHTTP_ATTEMPTS`` and
        ``STATIFIER_BASICHTTP_MAX_BODY`` (bytes); an unset variable keeps the default.
        ``BasicHTTPError`` names the variable that is wrong."""
        options: dict[str, object] = {}
        for name, key in (("ALLOW", "hosts"), ("NETWORKS", "networks")):
            items = _items(environ, name)
            if items is not None:
                options[key] = items
        ports = _items(environ, "PORTS")
        if ports is not None:
            options["ports"] = None if ports == ("any",) else _numbers(ports, "PORTS", int)
        for name, key, kind in (
            ("TIMEOUT", "timeout_s", float),
            ("ATTEMPTS", "attempts", int),
            ("MAX_BODY", "max_body_bytes", int),
        ):
            items = _items(environ, name)
            if items is not None:
                if len(items) != 1:
                    raise BasicHTTPError(f"${ENV_PREFIX}{name} must hold one number")
                (options[key],) = _numbers(items, name, kind)
        try:
            return cls(**options)  # type: ignore[arg-type]
        except BasicHTTPError as exc:
            raise BasicHTTPError(f"${ENV_PREFIX}*: {exc}") from None

    @property
    def enabled(self) -> bool:
        """Whether any host is allowed at all."""
        return bool(self.hosts)

    def check(self, request: OutboundRequest) -> Endpoint:
        """Where ``request`` goes, if the host makes it: its URL passes ``check_url`` and
        its body is at most ``max_body_bytes``; ``PostRefused`` says why not."""
        endpoint = self.check_url(request.url)
        size = len(request.body)
        if size > self.max_body_bytes:
            limit = self.max_body_bytes
            raise PostRefused(f"the message is {size} bytes, over the limit of {limit}")
        return endpoint

    def check_url(self, url: str) -> Endpoint:
        """Where ``url`` points, if its scheme, port and host are allowed; ``PostRefused``
        says why not. Its addresses are checked when the client connects
        (``check_address``)."""
        if not self.hosts:
            raise PostRefused(
                "no outbound BasicHTTP host is allowed (the host's allow-list is empty)"
            )
        if not is_http_url(url):
            raise PostRefused("the target is not an http or https URL")
        parts = urlsplit(url)
        scheme = parts.scheme
        host = (parts.hostname or "").rstrip(".")
        port = parts.port or (443 if scheme == "https" else 80)
        if scheme not in self.schemes:
            raise PostRefused(f"the scheme {scheme} is not allowed")
        if self.ports is not None and port not in self.ports:
            raise PostRefused(f"port {port} is not allowed")
        if not host.isascii():
            raise PostRefused("the host name is not ASCII (write it in its xn-- form)")
        if not self._allows_host(host):
            raise PostRefused(f"the host {host[:255]} is not on the allow-list")
        return Endpoint(scheme, host, port)

    def check_address(self, address: str) -> None:
        """Refuse (``PostRefused``) an address a checked host resolved to, unless it is
        public or in one of ``networks``: an IPv6 address that leads to IPv4 addresses
        passes when each of those does."""
        try:
            ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            raise PostRefused(f"{address[:64]!r} is not an IP address") from None
        if self._holds(ip):
            return
        if isinstance(ip, ipaddress.IPv4Address):
            if not _public_ipv4(ip):
                raise PostRefused(f"the address {ip} is not public and not in an allowed network")
            return
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            # The packet ends up at the IPv4 address (through a translator, relay or
            # tunnel), so that is what must be public; a DNS64 resolver answers any name
            # with 64:ff9b::<its IPv4 address>, internal ones included.
            for v4 in embedded:
                if not self._holds(v4) and not _public_ipv4(v4):
                    raise PostRefused(
                        f"the address {ip} leads to {v4}, which is not public and not in an"
                        " allowed network"
                    )
            return
        if not _public_ipv6(ip):
            raise PostRefused(f"the address {ip} is not public and not in an allowed network")

    def _holds(self, ip: Address) -> bool:
        return any(ip in network for network in self._networks)

    def _allows_host(self, host: str) -> bool:
        if host in self._names or "" in self._suffixes:
            return True
        literal = _literal(host)
        if literal is not None:
            return literal in self._names
        return any(host.endswith(suffix) for suffix in self._suffixes if suffix)


ENV_PREFIX: Final = "STATIFIER_BASICHTTP_"
"""The prefix of the environment variables ``OutboundPolicy.from_env`` and
``Locations.from_env`` read."""


# What is not public, written out rather than read from ``ipaddress``'s ``is_global``,
# whose tables differ between Python patch releases (3.12.4 changed them): the same
# address must get the same answer in every process of a deployment. From IANA's
# special-purpose registries; a range only some deployments route publicly (192.0.0.9,
# the ORCHIDv2 block) is refused with its block: a host names it in ``networks``.
_NOT_PUBLIC_IPV4: Final = tuple(
    ipaddress.IPv4Network(block)
    for block in (
        "0.0.0.0/8",  # this network
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # shared (carrier-grade NAT)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata services
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # the deprecated 6to4 relay anycast: a relay of someone else's
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the limited broadcast address
    )
)

_GLOBAL_UNICAST: Final = ipaddress.IPv6Network("2000::/3")
"""The only IPv6 addresses that may be public by themselves: everything else (loopback,
unique local, link-local, the deprecated site-local ``fec0::/10``, multicast, the
local-use NAT64 prefix) is not."""

_NOT_PUBLIC_IPV6: Final = tuple(
    ipaddress.IPv6Network(block)
    for block in (
        "2001::/23",  # IETF protocol assignments (Teredo, within it, is judged by its IPv4)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")
_IPV4_TRANSLATED: Final = ipaddress.IPv6Network("::ffff:0:0:0/96")


def _public_ipv4(ip: ipaddress.IPv4Address) -> bool:
    return not any(ip in block for block in _NOT_PUBLIC_IPV4)


def _public_ipv6(ip: ipaddress.IPv6Address) -> bool:
    return ip in _GLOBAL_UNICAST and not any(ip in block for block in _NOT_PUBLIC_IPV6)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...] | None:
    """The IPv4 addresses an IPv6 address leads to (None: it is IPv6 through and through).

    The local-use NAT64 prefix ``64:ff9b:1::/48`` is not unwrapped: where its IPv4 address
    sits depends on the prefix length the operator chose (RFC 6052: /48 to /96), which
    the policy cannot know, so any reading of it could be steered to an internal address;
    outside ``2000::/3``, it is refused unless ``networks`` holds it."""
    if ip.ipv4_mapped is not None:
        return (ip.ipv4_mapped,)
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64 or ip in _IPV4_TRANSLATED:
        return (low,)
    # ``::`` and ``::1`` are in ``::/96`` too, but are IPv6's own (refused as not in
    # 2000::/3), not IPv4 addresses 0.0.0.0 and 0.0.0.1.
    if ip in _IPV4_COMPATIBLE and int(ip) > 1:
        return (low,)
    if ip.sixtofour is not None:
        return (ip.sixtofour,)
    if ip.teredo is not None:
        # The Teredo server relays, the client (behind its NAT) receives: both are reached.
        return ip.teredo
    return None


def _items(environ: Mapping[str, str], name: str) -> tuple[str, ...] | None:
    """The items of ``$STATIFIER_BASICHTTP_<name>`` (None: unset or blank)."""
    text = environ.get(ENV_PREFIX + name)
    if text is None or not text.strip():
        return None
    return tuple(item for item in text.replace(",", " ").split() if item)


def _numbers[N: (int, float)](items: tuple[str, ...], name: str, kind: type[N]) -> tuple[N, ...]:
    try:
        return tuple(kind(item) for item in items)
    except ValueError:
        what = "integers" if kind is int else "numbers"
        raise BasicHTTPError(f"${ENV_PREFIX}{name} must hold {what}, not {items!r:.100}") from None


def _strings(values: object, what: str) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, tuple | list | frozenset | set):
        raise BasicHTTPError(f"{what} must be a sequence of strings, not {values!r:.100}")
    if not all(isinstance(value, str) and value for value in values):
        raise BasicHTTPError(f"{what} must be non-empty strings, not {values!r:.100}")
    return tuple(values)


def _host_pattern(text: str) -> str:
    """A host entry in the form ``_allows_host`` compares: lower case, IP addresses in
    their compressed form, ``*`` and ``*.suffix`` kept."""
    host = text.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "*":
        return host
    literal = _literal(host)
    if literal is not None:
        return literal
    name = host[2:] if host.startswith("*.") else host
    if not name or not name.isascii() or any(c in name for c in "/:@*?# "):
        raise BasicHTTPError(f"{text!r} is not a host name, *.suffix, an IP address or *")
    return host


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def _network(text: str) -> Network:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise BasicHTTPError(f"{text!r} is not a network (CIDR, like 127.0.0.0/8)") from None


def _is_port(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 < value < 65536


def _positive(value: object, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BasicHTTPError(f"{what} must be a positive integer, not {value!r}")
