"""The client address behind trusted proxies: `X-Forwarded-For` counts only when the
connecting peer is a trusted proxy, and then its right-most untrusted entry is the client."""

from __future__ import annotations

from typing import Any

import pytest
from graph_stack import open_stack
from test_graph_kernel import SIGNUP

from stateward.http.client_ip import resolve_client_ip, trusted_networks
from stateward.settings import Settings

PROXIES = trusted_networks(("10.0.0.0/8", "192.168.1.1", "fd00::/8"))


def test_the_header_is_ignored_when_no_proxy_is_trusted() -> None:
    assert resolve_client_ip("10.1.2.3", ["6.6.6.6"], trusted_networks(())) == "10.1.2.3"


def test_the_header_is_ignored_from_a_peer_that_is_not_a_trusted_proxy() -> None:
    assert resolve_client_ip("203.0.113.9", ["6.6.6.6"], PROXIES) == "203.0.113.9"


def test_behind_a_trusted_proxy_the_right_most_untrusted_entry_is_the_client() -> None:
    chain = ["6.6.6.6, 198.51.100.7", "10.0.0.5"]  # spoofed, real client, inner proxy
    assert resolve_client_ip("192.168.1.1", chain, PROXIES) == "198.51.100.7"


def test_a_trusted_proxy_without_the_header_is_itself_the_client() -> None:
    assert resolve_client_ip("10.0.0.1", [], PROXIES) == "10.0.0.1"


def test_when_every_entry_is_a_trusted_proxy_the_furthest_one_is_the_client() -> None:
    assert resolve_client_ip("10.0.0.1", ["10.0.0.3, 10.0.0.2"], PROXIES) == "10.0.0.3"


def test_ports_and_ipv6_entries_are_understood() -> None:
    assert resolve_client_ip("fd00::1", ["[2001:db8::7]:4711"], PROXIES) == "2001:db8::7"
    assert resolve_client_ip("10.0.0.1", ["198.51.100.7:80"], PROXIES) == "198.51.100.7"


def test_a_malformed_entry_counts_against_the_trusted_hop_that_forwarded_it() -> None:
    assert resolve_client_ip("10.0.0.1", ["6.6.6.6, garbage, 10.0.0.2"], PROXIES) == "10.0.0.2"


def test_the_setting_is_a_comma_list_and_rejects_what_is_not_an_ip_or_cidr() -> None:
    env = {"STATEWARD_TRUSTED_PROXIES": " 10.0.0.0/8, ::1 ,"}
    assert Settings.from_env(env).trusted_proxies == ("10.0.0.0/8", "::1")
    assert Settings.from_env({}).trusted_proxies == ()
    with pytest.raises(ValueError, match=r"STATEWARD_TRUSTED_PROXIES: 'proxy\.local'"):
        Settings.from_env({"STATEWARD_TRUSTED_PROXIES": "proxy.local"})


async def _public_start(stack: Any, forwarded: str) -> str | None:
    response = await stack.client.post(
        "/graphql",
        json={"query": 'mutation{startPublic(workflow:"acme/web/signup"){token}}'},
        headers={"X-Forwarded-For": forwarded},
    )
    errors = response.json().get("errors")
    return str(errors[0]["extensions"]["code"]) if errors else None


@pytest.mark.parametrize("trusted", [True, False])
async def test_the_public_rate_limit_keys_on_the_forwarded_client_only_behind_a_trusted_proxy(
    db_url: str, trusted: bool
) -> None:
    proxies = ("127.0.0.1",) if trusted else ()  # httpx's ASGI transport connects as it
    stack, close = await open_stack(db_url, public_rate_limit=1, trusted_proxies=proxies)
    try:
        await stack.ok("mutation($d:JSON!){addWorkflow(definition:$d){id}}", {"d": SIGNUP})
        assert await _public_start(stack, "198.51.100.1") is None
        second = await _public_start(stack, "198.51.100.2")
        assert second == (None if trusted else "RATE_LIMITED")
        assert await _public_start(stack, "198.51.100.1") == "RATE_LIMITED"
    finally:
        await close()
