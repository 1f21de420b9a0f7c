"""Which address a request comes from, behind trusted reverse proxies.

The per-IP limit of the public entry keys on the client address. By default that is the
connecting peer and `X-Forwarded-For` is ignored: anyone can send that header, so
trusting it from arbitrary peers would let a client pick its own rate-limit key. When the
peer is one of `settings.trusted_proxies` (IPs or CIDRs), the client is the right-most
entry of `X-Forwarded-For` that is not itself a trusted proxy: each proxy appends the
address it saw, so entries to the right of the first untrusted one were written by
proxies we trust and entries to its left are whatever the client claimed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from functools import lru_cache

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_network(value: str) -> Network:
    """`value` (an IP or a CIDR) as a network; ValueError with the value when it is neither."""
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError as error:
        raise ValueError(f"{value!r} is not an IP address or CIDR") from error


@lru_cache(maxsize=16)
def trusted_networks(values: tuple[str, ...]) -> tuple[Network, ...]:
    """The networks of the `trusted_proxies` setting (parsed once per distinct value)."""
    return tuple(parse_network(v) for v in values)


def parse_address(value: str) -> Address | None:
    """An address from a peer or forwarded entry (`1.2.3.4`, `1.2.3.4:80`, `[::1]:80`,
    `::1`); None when it is none of these."""
    text = value.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(address: Address | None, networks: Sequence[Network]) -> bool:
    return address is not None and any(address in n for n in networks)


def forwarded_entries(headers: Iterable[str]) -> list[str]:
    """The entries of every `X-Forwarded-For` header, in order (left = furthest hop)."""
    return [e.strip() for h in headers for e in h.split(",") if e.strip()]


def resolve_client_ip(
    peer: str | None, forwarded_for: Iterable[str], trusted: Sequence[Network]
) -> str | None:
    """The client address of a request from `peer` carrying the `X-Forwarded-For` header
    values `forwarded_for`, trusting only proxies in `trusted`.

    An untrusted (or unknown) peer is the client, whatever the header says. Behind trusted
    proxies the answer is the right-most untrusted entry; when every entry is a trusted
    proxy, the left-most one. A malformed entry cannot be attributed to anyone, so the
    request counts against the trusted hop that forwarded it.
    """
    if peer is None or not _trusted(parse_address(peer), trusted):
        return peer
    client = peer
    for entry in reversed(forwarded_entries(forwarded_for)):
        address = parse_address(entry)
        if address is None:
            return client
        client = str(address)
        if not _trusted(address, trusted):
            return client
    return client
