"""The HTTP settings: addresses, tokens, and the Host/Origin allow-lists, checked before binding."""

from __future__ import annotations

import pytest

from gateway import ConfigError
from gateway.config import GatewaySettings
from gateway.server import http_options
from gateway.server.http import StaticTokens, security_settings

pytestmark = pytest.mark.anyio


def test_addresses_parse_with_ipv6_brackets_and_refuse_nonsense() -> None:
    assert (http_options("[::1]:8000", GatewaySettings()).host, 8000) == ("::1", 8000)
    assert http_options("localhost:0", GatewaySettings()).port == 0
    for bad in ("8000", ":8000", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(ConfigError, match="--http wants HOST:PORT"):
            http_options(bad, GatewaySettings())


def test_tokens_come_from_the_named_variable_and_never_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GW_TOKENS", " first , second ,")
    options = http_options("10.1.2.3:8000", GatewaySettings(tokens_env="GW_TOKENS"))
    assert options.tokens == ("first", "second")
    assert "first" not in repr(options)
    monkeypatch.setenv("OTHER", "third")
    assert http_options(
        "127.0.0.1:1", GatewaySettings(tokens_env="GW_TOKENS"), token_env="OTHER"
    ).tokens == ("third",)
    with pytest.raises(
        ConfigError, match=r"refusing to serve HTTP on 10\.1\.2\.3 without a bearer token"
    ):
        http_options("10.1.2.3:8000", GatewaySettings())
    with pytest.raises(ConfigError, match=r"refusing to serve HTTP on gw\.example\.com"):
        http_options("gw.example.com:8000", GatewaySettings())


async def test_static_tokens_match_exactly() -> None:
    verifier = StaticTokens(("alpha", "beta"))
    found = await verifier.verify_token("beta")
    assert found is not None
    assert found.client_id == "token-2"
    assert found.token == "token-2"  # the secret is kept nowhere
    assert await verifier.verify_token("bet") is None
    assert await verifier.verify_token("") is None


def test_host_and_origin_lists_follow_the_bound_address(monkeypatch: pytest.MonkeyPatch) -> None:
    loopback = security_settings(http_options("127.0.0.1:8000", GatewaySettings()))
    assert loopback.enable_dns_rebinding_protection
    assert "localhost:*" in loopback.allowed_hosts
    assert "http://127.0.0.1:*" in loopback.allowed_origins
    monkeypatch.setenv("GW_TOKENS", "t")
    settings = GatewaySettings(tokens_env="GW_TOKENS", allowed_hosts=["gw.example.com:*"])
    public = security_settings(http_options("10.1.2.3:8000", settings))
    assert public.allowed_hosts == ["gw.example.com:*", "10.1.2.3:*"]
    assert "https://10.1.2.3:*" in public.allowed_origins
    wildcard = security_settings(
        http_options("0.0.0.0:8000", GatewaySettings(tokens_env="GW_TOKENS"))
    )
    assert not wildcard.enable_dns_rebinding_protection
    named = security_settings(http_options("0.0.0.0:8000", settings))
    assert named.enable_dns_rebinding_protection
    assert named.allowed_hosts == ["gw.example.com:*"]
