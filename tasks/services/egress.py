"""The egress guard: an outbound call built from tenant data goes only where the operator allows.

A tenant chooses its deploy hook's URL; without this guard the worker would
POST wherever that points, the operator's loopback, private network or cloud
metadata service included, and hand part of the answer back. `resolve` turns a
URL into a `Destination`: the host resolved once, every address it resolves to
checked (one bad record among good ones is refused: DNS answers can be mixed to
sneak one through), and one address pinned, so the connection goes to the
address that was checked, not to whatever a second lookup would say.

Refused unless the operator allows it (SWITCHYARD_EGRESS_ALLOW: comma-separated
CIDRs or host names): every address that is not globally routable (loopback,
private, link-local and so the metadata service at 169.254.169.254, carrier-
grade NAT, multicast, reserved, unspecified; IPv4 mapped into IPv6 is judged as
the IPv4 it carries).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from tasks.settings import Settings, add_check, get_settings

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


class EgressRefused(Exception):
    """The destination is not one the operator lets tenant data reach."""


@dataclass(frozen=True)
class Allow:
    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, raw: str) -> Allow:
        """`10.0.0.0/8, 127.0.0.1, hooks.internal` -> networks and host names; ValueError names
        an entry that is neither."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in (e.strip() for e in raw.split(",")):
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if not _is_host_name(entry):
                    raise ValueError(f"SWITCHYARD_EGRESS_ALLOW: {entry!r} is neither a CIDR "
                                     "nor a host name") from None
                hosts.add(entry.lower().rstrip("."))
        return cls(tuple(networks), frozenset(hosts))

    def admits(self, ip: IP) -> bool:
        return any(ip in n for n in self.networks if n.version == ip.version)


def _is_host_name(entry: str) -> bool:
    labels = entry.rstrip(".").split(".")
    return all(label and len(label) <= 63 and label.replace("-", "").isalnum()
               and not label.startswith("-") for label in labels)


def refusal(ip: IP, allow: Allow) -> str | None:
    """Why tenant data may not reach `ip`, or None when it may."""
    judged: IP = ip
    if isinstance(ip, ipaddress.IPv6Address):  # an IPv4 address inside: judged as itself
        judged = ip.ipv4_mapped or ip.sixtofour or ip
    if allow.admits(judged) or allow.admits(ip):
        return None
    for kind in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private",
                 "site_local"):
        if getattr(judged, f"is_{kind}", False):
            return f"{judged} is a {kind.replace('_', '-')} address"
    if not judged.is_global:
        return f"{judged} is not a public address"
    return None


@dataclass(frozen=True)
class Destination:
    """Where to connect (the pinned address) and what to call it (Host header, TLS name)."""
    url: str
    scheme: str
    host: str
    port: int
    address: str

    @property
    def pinned_url(self) -> str:
        """The URL with its host replaced by the checked address."""
        parts = urlsplit(self.url)
        literal = f"[{self.address}]" if ":" in self.address else self.address
        return parts._replace(netloc=f"{literal}:{self.port}").geturl()

    @property
    def host_header(self) -> str:
        default = {"http": 80, "https": 443}[self.scheme]
        return self.host if self.port == default else f"{self.host}:{self.port}"


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve(url: str, allow: Allow, resolver: Resolver | None = None) -> Destination:
    """Check `url` and pin one address for it; EgressRefused says why not.

    A failure to resolve is an OSError (socket.gaierror), left to the caller:
    nothing was sent, and the name may resolve later.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise EgressRefused("only http(s) URLs with a host can be called")
    host = parts.hostname.lower().rstrip(".")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise EgressRefused("the URL's port is not a number from 0 to 65535") from None
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        found = (resolver or system_resolver)(host, port)
        addresses = [ipaddress.ip_address(a.split("%")[0]) for a in found]
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    if host not in allow.hosts:
        for ip in addresses:
            why = refusal(ip, allow)
            if why is not None:
                raise EgressRefused(
                    f"{host} is not reachable from here: {why} (the operator can allow it "
                    "with SWITCHYARD_EGRESS_ALLOW)")
    return Destination(url, scheme, host, port, str(addresses[0]))


@lru_cache(maxsize=4)
def _parsed(entries: str) -> Allow:
    return Allow.parse(entries)


def allowed() -> Allow:
    """The operator's SWITCHYARD_EGRESS_ALLOW, parsed."""
    return _parsed(get_settings().egress_allow)


def allowed_for_packages() -> Allow:
    """What a sandboxed package install may reach: SWITCHYARD_EGRESS_ALLOW and the registries
    SWITCHYARD_CODE_REGISTRY_HOSTS names."""
    s = get_settings()
    return _parsed(",".join(e for e in (s.egress_allow, s.code_registry_hosts) if e))


def _check(settings: Settings) -> None:
    Allow.parse(settings.egress_allow)
    Allow.parse(settings.code_registry_hosts)


add_check(_check)
