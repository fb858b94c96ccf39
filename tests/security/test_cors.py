"""CORS over real HTTP: a browser app on an `allowed_origins` origin (the MCP Inspector UI at
http://localhost:6274) can call `/mcp`; no other origin is named, and `*` never is.

A browser sends a preflight `OPTIONS` (without the token) before a JSON POST, and hands the
page an answer only when it names the page's origin; it lets the page read only the headers
the answer exposes (the session id, the bearer challenge)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest

from gateway.server import HttpOptions, http_app
from tests.server.support import calculator_agent, calculator_gateway, serve
from tests.servers.asgi import serve_on_loopback

from .wire import LEGACY, calculate, calculated, initialize

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

INSPECTOR = "http://localhost:6274"
TOKEN = "cors-test-token-" + "x" * 16
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PREFLIGHT = {
    "Origin": INSPECTOR,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization,content-type,mcp-protocol-version,"
    "mcp-session-id,mcp-method,mcp-name,mcp-param-region,x-other",
}


@asynccontextmanager
async def gateway(host: str = "127.0.0.1") -> AsyncGenerator[tuple[str, httpx2.AsyncClient]]:
    """A gateway with tokens on, allowing the Inspector's origin; its URL and a client."""
    server = serve(calculator_gateway(), expose_tools=True)
    options = HttpOptions(host, 0, tokens=(TOKEN,), allowed_origins=(INSPECTOR,))
    async with (
        serve_on_loopback(http_app(server, options)) as base,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        yield f"{base}/mcp", http


def split(value: str) -> list[str]:
    return [part.strip().lower() for part in value.split(",")]


async def test_a_preflight_from_an_allowed_origin_is_answered_before_the_token() -> None:
    async with gateway() as (url, http):
        with anyio.fail_after(30):
            answer = await http.options(url, headers=PREFLIGHT)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == INSPECTOR
    assert split(answer.headers["access-control-allow-methods"]) == ["get", "post", "delete"]
    allowed = split(answer.headers["access-control-allow-headers"])
    for name in ("authorization", "content-type", "mcp-protocol-version", "mcp-session-id"):
        assert name in allowed
    assert "last-event-id" in allowed  # a GET stream resumed
    assert {"mcp-method", "mcp-name", "mcp-param-region"} <= set(allowed)  # 2026-07-28
    assert "x-other" not in allowed
    assert int(answer.headers["access-control-max-age"]) > 0
    assert "origin" in split(answer.headers["vary"])
    assert "access-control-allow-credentials" not in answer.headers
    assert "mcp-session-id" not in answer.headers


async def test_answers_to_an_allowed_origin_name_it_and_expose_what_a_client_reads() -> None:
    origin = {"Origin": INSPECTOR}
    token = {"Authorization": f"Bearer {TOKEN}"}
    async with gateway() as (url, http):
        with anyio.fail_after(30):
            refused = await http.post(url, json=initialize(), headers={**MCP_HEADERS, **origin})
            opened = await http.post(
                url, json=initialize(), headers={**MCP_HEADERS, **origin, **token}
            )
            session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], **origin, **token}
            versioned = {**MCP_HEADERS, **session, "MCP-Protocol-Version": LEGACY}
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(url, json=done, headers=versioned)
            called = await http.post(
                url, content=json.dumps(calculate(2, LEGACY)), headers=versioned
            )
            closed = await http.delete(url, headers={**session, "MCP-Protocol-Version": LEGACY})
            unnamed = await http.post(url, json=initialize(), headers={**MCP_HEADERS, **token})
    assert (refused.status_code, opened.status_code, called.status_code) == (401, 200, 200)
    assert closed.status_code < 300
    assert called.headers["content-type"] == "application/json"  # a lone result: one body
    assert calculated(called.json()) == "42"
    for answer in (refused, opened, called, closed):
        assert answer.headers["access-control-allow-origin"] == INSPECTOR
        assert "origin" in split(answer.headers["vary"])
        exposed = split(answer.headers["access-control-expose-headers"])
        assert {"mcp-session-id", "www-authenticate"} <= set(exposed)
    assert refused.headers["www-authenticate"].startswith("Bearer")
    # Not a browser (no Origin): nothing added.
    assert unnamed.status_code == 200
    assert not [name for name in unnamed.headers if name.startswith("access-control-")]


async def test_no_other_origin_is_named_even_with_the_origin_check_off() -> None:
    """Bound to 0.0.0.0 without `allowed_hosts` the Origin check is off, but CORS still names
    only the configured origins: a browser keeps other sites' pages from reading answers."""
    other = {"Origin": "http://evil.example"}
    token = {"Authorization": f"Bearer {TOKEN}"}
    async with gateway(host="0.0.0.0") as (url, http):
        with anyio.fail_after(30):
            preflight = await http.options(url, headers={**PREFLIGHT, **other})
            posted = await http.post(
                url, json=initialize(), headers={**MCP_HEADERS, **other, **token}
            )
            allowed = await http.options(url, headers=PREFLIGHT)
    assert preflight.status_code == 401  # not answered as a preflight: the token check refuses
    assert posted.status_code == 200
    for answer in (preflight, posted):
        assert not [name for name in answer.headers if name.startswith("access-control-")]
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == INSPECTOR


OPENAI_JS_HEADERS = (
    "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os,"
    "x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,"
    "x-stainless-runtime-version,x-stainless-timeout"
)
"""What the openai JS SDK's preflight asks for: its `X-Stainless-*` go with every request."""


async def test_a_page_on_the_openai_js_sdk_may_call_the_openai_compatible_api() -> None:
    served = serve(calculator_gateway(calculator_agent(["It is 42."])))
    options = HttpOptions("127.0.0.1", 0, tokens=(TOKEN,), allowed_origins=(INSPECTOR,))
    asked = {
        "Origin": INSPECTOR,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": OPENAI_JS_HEADERS,
    }
    sent = {
        "Origin": INSPECTOR,
        "Authorization": f"Bearer {TOKEN}",
        **{name: "x" for name in OPENAI_JS_HEADERS.split(",")[2:]},
    }
    body = {"model": "assistant", "messages": [{"role": "user", "content": "6 * 7?"}]}
    async with (
        serve_on_loopback(http_app(served, options)) as base,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        url = f"{base}/v1/chat/completions"
        with anyio.fail_after(30):
            preflight = await http.options(url, headers=asked)
            answer = await http.post(url, json=body, headers=sent)
    assert preflight.status_code == 204
    assert set(split(OPENAI_JS_HEADERS)) <= set(
        split(preflight.headers["access-control-allow-headers"])
    )
    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "It is 42."
    assert answer.headers["access-control-allow-origin"] == INSPECTOR
    # The SDK reads it to know not to run a failed agent again.
    assert "x-should-retry" in split(answer.headers["access-control-expose-headers"])
