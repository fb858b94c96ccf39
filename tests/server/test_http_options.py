"""The HTTP settings: addresses, tokens, and the Host/Origin allow-lists, checked before binding."""

from __future__ import annotations

import httpx2
import pytest

from gateway import ConfigError
from gateway.config import GatewaySettings
from gateway.server import http_options
from gateway.server.transports.http import StaticTokens, allowed_hosts
from gateway.server.transports.static_tokens import parse_tokens, token_label

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
    first, second = "first-" + "a" * 20, "second-" + "b" * 20
    monkeypatch.setenv("GW_TOKENS", f" {first} , {second} ,")
    options = http_options("10.1.2.3:8000", GatewaySettings(tokens_env="GW_TOKENS"))
    assert options.tokens == (first, second)
    assert first not in repr(options)
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
    # A short token is refused where others can reach the port, fine on loopback.
    monkeypatch.setenv("GW_TOKENS", f"{first},short")
    with pytest.raises(ConfigError, match=r"bearer token #2 in GW_TOKENS is shorter than 16"):
        http_options("0.0.0.0:8000", GatewaySettings(tokens_env="GW_TOKENS"))
    assert http_options("127.0.0.1:1", GatewaySettings(tokens_env="GW_TOKENS")).tokens[1] == "short"


async def test_static_tokens_match_exactly() -> None:
    verifier = StaticTokens(parse_tokens(("alpha", "beta"), "GW_TOKENS"))
    found = await verifier.verify_token("beta")
    assert found is not None
    assert found.client_id == token_label("beta")
    assert found.token == token_label("beta")  # the secret is kept nowhere
    assert "beta" not in found.client_id
    assert await verifier.verify_token("bet") is None
    assert await verifier.verify_token("") is None


async def test_a_static_tokens_identity_survives_revoking_reordering_and_inserting() -> None:
    """A token is its name or its digest's label, never its position: a revoked token's
    runs and sessions go to no other token."""
    ann, bob, cat = "ann-token-" + "a" * 16, "bob-token-" + "b" * 16, "cat-token-" + "c" * 16

    async def who(entries: tuple[str, ...], token: str) -> str | None:
        found = await StaticTokens(parse_tokens(entries, "GW_TOKENS")).verify_token(token)
        return None if found is None else found.client_id

    before = {t: await who((ann, f"bob={bob}"), t) for t in (ann, bob)}
    assert before == {ann: token_label(ann), bob: "bob"}
    assert await who((f"bob={bob}",), bob) == "bob"  # Ann's revoked
    assert await who((cat, f"bob={bob}", ann), ann) == token_label(ann)  # inserted, reordered
    assert await who((cat, ann), cat) not in before.values()
    # No label is an old positional one (`token-N`): what was stored under one stays unreached.
    assert not any(str(label).removeprefix("token-").isdigit() for label in before.values())
    # While rotating, a holder's old and new token are one caller.
    assert await who((f"bob={bob}", f"bob={cat}"), cat) == "bob"


def test_static_tokens_are_written_as_token_or_name_and_token() -> None:
    # base64 padding is no name: `=` followed by `=` only is part of the token.
    assert [t.label for t in parse_tokens(("QUJDREVG==", "ann.b_c-1=x=y"), "V")] == [
        token_label("QUJDREVG=="),
        "ann.b_c-1",
    ]
    assert parse_tokens(("ann.b_c-1=x=y",), "V")[0].secret == "x=y"
    for bad in ("a b=secret-value", "=secret-value", "token-1=secret-value", "Token-x=sv"):
        with pytest.raises(ValueError, match=r"entry #2 in V is not TOKEN or NAME=TOKEN") as e:
            parse_tokens(("fine", bad), "V")
        assert "secret-value" not in str(e.value)
    with pytest.raises(ValueError, match=r"entry #2 in V repeats a token of another name"):
        parse_tokens(("ann=same-secret", "bob=same-secret"), "V")


def test_a_bad_tokens_entry_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_TOKENS", "ann=" + "a" * 20 + ",bad name=" + "b" * 20)
    with pytest.raises(ConfigError, match=r"entry #2 in GW_TOKENS is not TOKEN or NAME=TOKEN"):
        http_options("127.0.0.1:1", GatewaySettings(tokens_env="GW_TOKENS"))
    # A name does not count toward a token's length: a short one is still refused.
    monkeypatch.setenv("GW_TOKENS", "a-long-enough-name=short")
    with pytest.raises(ConfigError, match=r"bearer token #1 in GW_TOKENS is shorter than 16"):
        http_options("0.0.0.0:8000", GatewaySettings(tokens_env="GW_TOKENS"))


def test_host_and_origin_rules_follow_the_bound_address(monkeypatch: pytest.MonkeyPatch) -> None:
    loopback = allowed_hosts(http_options("127.0.0.1:8000", GatewaySettings()))
    assert loopback is not None
    assert loopback.allows_host("localhost:8000")
    assert loopback.allows_host("[::1]:8000")
    assert not loopback.allows_host("localhost:8001")
    assert loopback.allows_origin("http://127.0.0.1:8000")
    assert not loopback.allows_origin("http://127.0.0.1:6274")
    # Bound to another loopback address, the URL it prints is reachable, by that address.
    other = allowed_hosts(http_options("127.0.0.2:8000", GatewaySettings()))
    assert other is not None
    assert other.allows_host("127.0.0.2:8000")
    assert other.allows_origin("http://127.0.0.2:8000")
    assert other.allows_host("localhost:8000")
    assert not other.allows_host("127.0.0.3:8000")
    monkeypatch.setenv("GW_TOKENS", "t" * 32)
    settings = GatewaySettings(tokens_env="GW_TOKENS", allowed_hosts=["gw.example.com:*"])
    public = allowed_hosts(http_options("10.1.2.3:8000", settings))
    assert public is not None
    assert public.allows_host("gw.example.com:443")
    assert public.allows_host("gw.example.com")
    assert public.allows_host("10.1.2.3:8000")
    assert not public.allows_host("127.0.0.1:8000")
    assert public.allows_origin("https://10.1.2.3:8000")
    wildcard = allowed_hosts(http_options("0.0.0.0:8000", GatewaySettings(tokens_env="GW_TOKENS")))
    assert wildcard is None
    named = allowed_hosts(http_options("0.0.0.0:8000", settings))
    assert named is not None
    assert named.allows_host("gw.example.com:8000")
    assert not named.allows_host("0.0.0.0:8000")


def test_a_host_pattern_that_does_not_parse_is_a_config_error() -> None:
    settings = GatewaySettings(allowed_hosts=["gw.example.com:port"])
    with pytest.raises(ConfigError, match=r"'gw\.example\.com:port' is not HOST, HOST:PORT"):
        http_options("127.0.0.1:8000", settings)
    settings = GatewaySettings(allowed_origins=["gw.example.com"])
    with pytest.raises(ConfigError, match=r"is not http\(s\)://HOST"):
        http_options("127.0.0.1:8000", settings)


def test_idle_connections_outlive_the_mcp_clients_own() -> None:
    """A server that closes an idle connection when its client may still reuse it loses that
    client's next request, and the mcp SDK's `Client` (httpx2) dies of it; uvicorn's default
    (5 s) is httpx2's own."""
    keep_alive = http_options("127.0.0.1:8000", GatewaySettings()).keep_alive
    expiry = httpx2.Limits().keepalive_expiry
    assert expiry is not None
    assert keep_alive > 10 * expiry
    assert http_options("127.0.0.1:8000", GatewaySettings(http_keep_alive=7)).keep_alive == 7
