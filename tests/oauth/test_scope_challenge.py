"""`serve --http` behind a real authorization server on 127.0.0.1 (its tokens checked by
introspection): scope refusals a new token could lift are 403 `insufficient_scope` challenges,
and the SDK's own OAuth client steps up from them; the rest stay MCP errors."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.assembly import open_gateway
from gateway.config import parse_config
from gateway.server import build_server, http_app, http_options
from gateway.trace import TraceEvent
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import ToyServer
from tests.servers.oauth import AuthorityOptions, TestAuthority, serve_authority
from tests.servers.sdk_oauth import sdk_oauth
from toolkits.mcp.oauth_callback import free_loopback_port

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

MODERN = "2026-07-28"
SCOPES = {"agents": ["assistant"], "tools:toy": ["toy"], "admin": ["*"]}


@dataclass
class Served:
    url: str
    authority: TestAuthority
    events: list[TraceEvent]

    def token(self, *scopes: str) -> str:
        return self.authority.issue("some-client", list(scopes), self.url).access_token


@asynccontextmanager
async def gateway_behind(tmp_path: Path) -> AsyncGenerator[Served]:
    options = AuthorityOptions(scopes=["mcp", *SCOPES])
    toy = ToyServer("toy")
    toy.add_echo("echo")
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "hello"}] * 4))
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    async with (
        serve_authority(options) as (authority, _seen),
        serve_on_loopback(toy.server.streamable_http_app(host="127.0.0.1")) as toy_url,
    ):
        port = free_loopback_port()
        resource = f"http://127.0.0.1:{port}/mcp"
        oauth: dict[str, Any] = {
            "resource": resource,
            "authorization_servers": [authority.issuer],
            "introspection_endpoint": f"{authority.issuer}/introspect",
            "required_scopes": ["mcp"],
            "scopes": SCOPES,
        }
        config = parse_config(
            {
                "gateway": {"expose_tools": True, "oauth": oauth},
                "mcpServers": {"toy": {"url": f"{toy_url}/mcp"}},
                "agents": {"assistant": {"model": f"scripted:{script}", "tools": []}},
            }
        )
        async with open_gateway(config, hooks=[record]) as gateway:
            server, _router = build_server(gateway, config.gateway)
            app = http_app(server, http_options(f"127.0.0.1:{port}", config.gateway))
            async with serve_on_loopback(app, port=port):
                yield Served(resource, authority, events)


async def post(url: str, token: str | None, method: str, **params: Any) -> httpx2.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with httpx2.AsyncClient() as http:
        return await http.post(url, json=body, headers=headers)


def challenge(response: httpx2.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    fields: dict[str, str] = {}
    for part in value.removeprefix("Bearer ").split('", '):
        key, _, rest = part.partition("=")
        fields[key.strip()] = rest.strip().strip('"')
    return fields


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_call_the_scopes_do_not_allow_is_a_403_naming_the_scope_that_would(
    tmp_path: Path,
) -> None:
    async with gateway_behind(tmp_path) as served:
        metadata = served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        narrow = served.token("mcp", "agents")

        refused = await post(served.url, narrow, "tools/call", name="toy__echo", arguments={})
        assert refused.status_code == 403
        assert challenge(refused) == {
            "error": "insufficient_scope",
            "error_description": "not allowed: calling 'toy__echo' needs the scope tools:toy or "
            "admin (the token has: mcp agents)",
            "scope": "mcp agents tools:toy",  # what is held stays, the narrowest scope is added
            "resource_metadata": metadata,
        }
        refused = await post(served.url, narrow, "resources/list")
        assert refused.status_code == 403
        assert challenge(refused)["scope"] == "mcp agents admin"

        # Without the required scope, or without a token: the required scope is named.
        refused = await post(served.url, served.token("agents"), "ping")
        assert (refused.status_code, challenge(refused)["scope"]) == (403, "agents mcp")
        refused = await post(served.url, None, "ping")
        assert refused.status_code == 401
        assert challenge(refused)["scope"] == "mcp"
        assert challenge(refused)["resource_metadata"] == metadata


async def test_a_refusal_no_token_could_lift_is_an_mcp_error_not_a_403(tmp_path: Path) -> None:
    async with gateway_behind(tmp_path) as served:
        token = served.token("mcp", "agents")
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with http, Client(streamable_http_client(served.url, http_client=http)) as client:
            unknown = await client.call_tool("no_such_tool", {})
            assert unknown.is_error
            assert text(unknown).startswith("not allowed: calling 'no_such_tool' needs the scope")
            assert text(await client.call_tool("assistant", {"prompt": "hi"})) == "hello"


class RawSession:
    """`tools/call`s as raw JSON-RPC over HTTP, in a 2025-11-25 session or as 2026-07-28
    requests: their results as sent."""

    def __init__(self, http: httpx2.AsyncClient, url: str, version: str) -> None:
        self.http, self.url, self.version = http, url, version
        self.headers = {"Accept": "application/json, text/event-stream"}

    async def send(self, body: dict[str, Any]) -> dict[str, Any] | None:
        response = await self.http.post(self.url, json=body, headers=self.headers)
        assert response.status_code in (200, 202), response.text
        if "mcp-session-id" in response.headers:
            self.headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        for line in response.text.splitlines():
            if line.startswith(("data:", "{")):
                return json.loads(line.removeprefix("data:"))
        return None

    async def open(self) -> None:
        if self.version == MODERN:
            self.headers["Mcp-Protocol-Version"] = MODERN
            return
        hello = {
            "protocolVersion": self.version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        await self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
        self.headers["Mcp-Protocol-Version"] = self.version
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        headers = {}
        if self.version == MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers = {"Mcp-Method": "tools/call", "Mcp-Name": name}
        self.headers.update(headers)
        answer = await self.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        )
        assert answer is not None
        return answer["result"]


@pytest.mark.parametrize("version", ["2025-11-25", MODERN])
async def test_a_refusal_result_is_shaped_as_the_sessions_other_results(
    version: str, tmp_path: Path
) -> None:
    """No 2026-07-28 `resultType` in a 2025-11-25 session; a 2026-07-28 one has it and the
    gateway's `serverInfo` stamp, as every other result there."""
    async with gateway_behind(tmp_path) as served:
        headers = {"Authorization": f"Bearer {served.token('mcp', 'agents')}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            session = RawSession(http, served.url, version)
            await session.open()
            refused = await session.call("no_such_tool", {})
            failed = await session.call("assistant", {})  # bad arguments: the handler's result
    assert refused["isError"] is failed["isError"] is True
    assert refused["content"][0]["text"].startswith("not allowed: calling 'no_such_tool'")
    assert set(refused) == set(failed)
    assert refused.get("resultType") == failed.get("resultType")
    assert refused.get("_meta") == failed.get("_meta")
    assert ("resultType" in refused) is (version == MODERN)


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_the_sdk_client_steps_up_from_the_gateways_403_and_the_call_proceeds(
    era: str, tmp_path: Path
) -> None:
    async with gateway_behind(tmp_path) as served:
        oauth = sdk_oauth(served.url)
        http = httpx2.AsyncClient(auth=oauth.provider)
        async with (
            http,
            Client(streamable_http_client(served.url, http_client=http), mode=era) as client,
        ):
            assert (await client.list_tools()).tools == []  # "mcp" alone grants no tool
            echoed = await client.call_tool("toy__echo", {"a": 1})
            assert not echoed.is_error, echoed
            assert text(await client.call_tool("assistant", {"prompt": "hi"})) == "hello"
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {"assistant", "toy__echo"}
    # Asked for the required scope first, then one more scope per refused call.
    assert oauth.asked_scopes == ["mcp", "mcp tools:toy", "mcp tools:toy agents"]
    assert oauth.storage.tokens is not None
    assert (oauth.storage.tokens.scope or "").split() == ["mcp", "tools:toy", "agents"]


async def test_a_listen_stream_for_resources_or_prompts_needs_the_scope_resources_do(
    tmp_path: Path,
) -> None:
    """A 2026-07-28 `subscriptions/listen` follows resources as `resources/read` reads them:
    the same scope check; one for tool list changes alone is any client's."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    async with gateway_behind(tmp_path) as served:
        headers = {
            "Authorization": f"Bearer {served.token('mcp', 'agents')}",
            "Accept": "application/json, text/event-stream",
            "Mcp-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
        }

        def listen(**notifications: Any) -> dict[str, Any]:
            params = {"notifications": notifications, "_meta": meta}
            return {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}

        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            for asked in (
                {"resourceSubscriptions": ["file:///etc/hostname"]},
                {"resourcesListChanged": True},
                {"promptsListChanged": True, "toolsListChanged": True},
                {"someExtension": ["x"]},
            ):
                # Streamed: a listen stream let through would stay open.
                async with http.stream("POST", served.url, json=listen(**asked)) as refused:
                    assert refused.status_code == 403, asked
                    await refused.aread()
                assert challenge(refused)["error"] == "insufficient_scope"
                assert challenge(refused)["scope"] == "mcp agents admin"
                assert challenge(refused)["error_description"] == (
                    "not allowed: subscriptions/listen for resources or prompts needs a "
                    "scope granting '*'"
                )
            opened = listen(toolsListChanged=True, resourceSubscriptions=[])
            async with http.stream("POST", served.url, json=opened) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
            wide = {"Authorization": f"Bearer {served.token('mcp', 'admin')}"}
            asked = listen(resourcesListChanged=True)
            async with http.stream("POST", served.url, json=asked, headers=wide) as stream:
                assert stream.status_code == 200


async def test_the_openai_api_lists_and_runs_only_the_agents_a_tokens_scopes_grant(
    tmp_path: Path,
) -> None:
    async with gateway_behind(tmp_path) as served, httpx2.AsyncClient() as http:
        base = served.url.removesuffix("/mcp") + "/v1"
        ask = {"model": "assistant", "messages": [{"role": "user", "content": "hi"}]}

        async def as_token(token: str) -> tuple[httpx2.Response, httpx2.Response]:
            headers = {"Authorization": f"Bearer {token}"}
            models = await http.get(f"{base}/models", headers=headers)
            answer = await http.post(f"{base}/chat/completions", json=ask, headers=headers)
            return models, answer

        models, answer = await as_token(served.token("mcp", "tools:toy"))
        assert models.json()["data"] == []
        assert answer.status_code == 403
        error = answer.json()["error"]
        assert (error["type"], error["code"]) == ("permission_error", "insufficient_scope")
        assert "needs the scope agents or admin" in error["message"]
        # An unknown model's 404 names the models this token may call: none, not every agent.
        unknown = await http.post(
            f"{base}/chat/completions",
            json=ask | {"model": "nobody"},
            headers={"Authorization": f"Bearer {served.token('mcp', 'tools:toy')}"},
        )
        assert unknown.status_code == 404
        assert unknown.json()["error"]["message"] == (
            "the model 'nobody' does not exist: a model is an agent of this gateway (none)"
        )

        models, answer = await as_token(served.token("agents"))  # not the required `mcp`
        assert models.status_code == answer.status_code == 403
        assert "required scope mcp" in answer.json()["error"]["message"]

        models, answer = await as_token(served.token("mcp", "agents"))
        assert [m["id"] for m in models.json()["data"]] == ["assistant"]
        assert answer.json()["choices"][0]["message"]["content"] == "hello"
