"""A server (or a proxy in front of it) whose error page repeats the request's target and
headers never gets the gateway's own credentials for it shown: the bearer token, a configured
header with a `${VAR}`, the URL's password, a credential in the URL's query (`?api_key=`), a key
in the URL's path (`/s/KEY/mcp`: a `${VAR}`'s value, or a segment that looks like a key) are
`***` in the call's error (the model's observation, a proxied call's error), the connect error
(`tools`, health) and every log line; headers, parameters and path words that are no secret
stay said."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server.proxying import gateway_front
from tests.servers.asgi import serve_on_loopback
from tests.servers.faulty_http import Fault, FaultyFront, Waiting, faulty_server
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "TOKEN-said-back-7f3a"
KEY = "KEY-said-back-91c2"
PASSWORD = "PASS-said-back-5e0d"
QUERY_KEY = "QKEY%2Fsaid-back-2c7a"
"""Written percent-encoded in the URL, as a key with a `/` must be: `QKEY/said-back-2c7a`."""
PATH_KEY = "zk8Qm2Lp9Xw4Rt7Yv3Bn6Hc1"
"""A key in the URL's path, as Zapier's MCP URLs have one: taken for a key as it looks."""
WORD_KEY = "pathkey-said-back-only-letters"
"""A key in the URL's path that looks like no key: masked as a `${VAR}`'s value alone."""
SECRETS = (TOKEN, KEY, PASSWORD, QUERY_KEY, "QKEY/said-back-2c7a", PATH_KEY, WORD_KEY)
EXECUTABLE = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
SAID = (":path", "authorization", "x-api-key", "x-team")
"""What the error pages repeat: the request's target and headers (first, so the quoted start
of a page holds them)."""

Sent = Literal["token+header", "url-password", "url-query", "url-path"]
"""Where the node's credential is: the bearer token and a secret header, the URL's user and
password, the URL's query, or the URL's path."""
SENT: list[Sent] = ["token+header", "url-password", "url-query", "url-path"]


def mcp_path(sent: Sent) -> str:
    """Where the server is served: a key in the path, or `/mcp`."""
    return f"/s/{PATH_KEY}/mcp" if sent == "url-path" else "/mcp"


def repeated(headers: dict[str, str]) -> dict[str, str]:
    return {name: headers[name] for name in SAID if name in headers}


PAGE = Fault(
    502,
    "text/plain",
    echo=lambda headers: f"upstream failed; request was: {json.dumps(repeated(headers))}".encode(),
)
"""A proxy's error page repeating the request's headers."""

JSONRPC = Fault(
    500,
    "application/json",
    echo=lambda headers: json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32001,
                "message": f"refused {json.dumps(repeated(headers))}",
                "data": {"headers": repeated(headers)},
            },
        }
    ).encode(),
)
"""A JSON-RPC error of an error status, whose message and data repeat the request's headers."""


def config_of(base: str, sent: Sent, **keys: Any) -> McpServerConfig:
    if sent == "url-password":
        url = base.replace("http://", f"http://bob:{PASSWORD}@")
        return McpServerConfig(url=f"{url}/mcp", headers={"X-Team": "blue"}, **keys)
    if sent == "url-query":
        url = f"{base}/mcp?v=1&api_key={QUERY_KEY}"
        return McpServerConfig(url=url, headers={"X-Team": "blue"}, **keys)
    if sent == "url-path":
        return McpServerConfig(url=f"{base}{mcp_path(sent)}", headers={"X-Team": "blue"}, **keys)
    return McpServerConfig(
        url=f"{base}/mcp",
        bearer_token_env="SAID_BACK_TOKEN",
        headers={"X-Api-Key": KEY, "X-Team": "blue"},
        secret_headers=["X-Api-Key"],
        **keys,
    )


def masked_as(sent: Sent) -> dict[str, str]:
    """What an error page repeats, as quoted. The URL's user and password are not sent as
    Basic auth (an auth flow answers a 401), but httpx2 logs, and the SSE client's errors say,
    the URL."""
    if sent == "url-password":
        return {":path": "/mcp", "x-team": "blue"}
    if sent == "url-query":
        return {":path": "/mcp?v=1&api_key=***", "x-team": "blue"}
    if sent == "url-path":
        return {":path": "/s/***/mcp", "x-team": "blue"}
    return {":path": "/mcp", "authorization": "Bearer ***", "x-api-key": "***", "x-team": "blue"}


def shows_no_secret(*texts: str) -> bool:
    return not any(secret in text for text in texts for secret in SECRETS)


@pytest.fixture(autouse=True)
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAID_BACK_TOKEN", TOKEN)


@pytest.mark.parametrize("sent", SENT)
@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_calls_error_page_is_quoted_without_the_credentials_sent(
    sent: Sent, raw: bool, protocol: ProtocolMode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # `-v`: httpx2 logs each request's URL; `-vv`: the SDK
    server = faulty_server(Waiting(), "page", "jsonrpc")
    app = server.streamable_http_app(host="127.0.0.1", streamable_http_path=mcp_path(sent))
    front = FaultyFront(app, calls={"page": PAGE, "jsonrpc": JSONRPC})
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = config_of(base, sent, protocol=protocol, connect_timeout=10)
            async with McpToolkit("f", config) as node:
                node.raw_calls = raw
                page = await node.call_tool("f__page", {})
                error = await node.call_tool("f__jsonrpc", {})
                assert node.health.state == "ready"
    masked = json.dumps(masked_as(sent))
    assert page.is_error
    assert result_text(page) == (
        "MCP error -32603: MCP server 'f' answered HTTP 502 (Bad Gateway): "
        f"upstream failed; request was: {masked}"
    )
    assert error.is_error
    assert result_text(error) == f"MCP error -32001: refused {masked}"
    assert shows_no_secret(caplog.text)


@pytest.mark.parametrize("sent", SENT)
@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_a_connect_error_says_no_credential_sent(
    sent: Sent, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    front = FaultyFront(faulty_server(Waiting()).streamable_http_app(), everything=PAGE)
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = config_of(base, sent, transport=kind, connect_timeout=10)
            async with McpToolkit("f", config) as node:
                health = await node.wait_for_health(lambda h: h.state == "failed")
    assert health.last_error is not None
    assert json.dumps(masked_as(sent)) in health.last_error  # an SSE stream's page quoted too
    said = [record.getMessage() for record in caplog.records]
    assert any(line.startswith("could not connect (attempt 1)") for line in said)
    assert shows_no_secret(health.last_error, *said, caplog.text)  # tracebacks too


@pytest.mark.parametrize("pass_through", [True, False])
async def test_a_proxied_calls_error_reaches_the_client_without_the_gateways_credentials(
    pass_through: bool,
) -> None:
    server = faulty_server(Waiting(), "page", "jsonrpc")
    front = FaultyFront(
        server.streamable_http_app(host="127.0.0.1"), calls={"page": PAGE, "jsonrpc": JSONRPC}
    )
    said: list[str] = []
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = config_of(base, "token+header", connect_timeout=10)
            async with (
                gateway_front(config, pass_through=pass_through) as (url, _, _),
                Client(url) as client,
            ):
                for tool in ("d__page", "d__jsonrpc"):
                    with pytest.raises(MCPError) as raised:
                        await client.call_tool(tool, {})
                    said.append(json.dumps([raised.value.error.message, raised.value.error.data]))
    masked = json.dumps(masked_as("token+header"))
    assert said[0] == json.dumps(
        [
            f"MCP server 'd' answered HTTP 502 (Bad Gateway): upstream failed; request was: {masked}",
            None,
        ]
    )
    assert json.loads(said[1]) == [f"refused {masked}", {"headers": masked_as("token+header")}]
    assert shows_no_secret(*said)


async def run_cli(*args: str, config: Path, **extra: str) -> tuple[int, str, str]:
    assert EXECUTABLE is not None
    env = {**os.environ, "SAID_BACK_TOKEN": TOKEN, "SAID_BACK_KEY": KEY, "SAID_BACK_Q": QUERY_KEY}
    env |= extra
    with anyio.fail_after(60):
        done = await anyio.run_process(
            [EXECUTABLE, *args, "--config", str(config)], check=False, env=env
        )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def write_config(tmp_path: Path, base: str, *, url: str = "/mcp?api_key=${SAID_BACK_Q}") -> Path:
    script = tmp_path / "model.json"
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "f__page", "arguments": {}}]}, {"content": "done"}])
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[mcpServers.f]\nurl = "{base}{url}"\n'
        'bearer_token_env = "SAID_BACK_TOKEN"\n'
        'headers = { "X-Api-Key" = "${SAID_BACK_KEY}", "X-Team" = "blue" }\n'
        "connect_timeout = 10\n\n"
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["f"]\n'
    )
    return config


async def test_the_cli_shows_no_credential_a_server_said_back(tmp_path: Path) -> None:
    """`tools --json` of a server refusing at connect, and `run --json` whose model calls a
    tool that fails: a `${VAR}` header, and a `${VAR}` in the URL's query, are masked as the
    bearer token is."""
    masked = json.dumps({**masked_as("token+header"), ":path": "/mcp?api_key=***"})
    refusing = FaultyFront(faulty_server(Waiting()).streamable_http_app(), everything=PAGE)
    async with serve_on_loopback(refusing) as base:
        code, out, err = await run_cli("tools", "--json", config=write_config(tmp_path, base))
    assert code == 1
    [server] = json.loads(out)["servers"]
    assert server["state"] == "failed"
    assert f"upstream failed; request was: {masked}" in server["error"]
    assert "WARNING toolkits.mcp.f: could not connect (attempt 1)" in err
    assert shows_no_secret(out, err)

    app = faulty_server(Waiting(), "page").streamable_http_app(host="127.0.0.1")
    async with serve_on_loopback(FaultyFront(app, calls={"page": PAGE})) as base:
        config = write_config(tmp_path, base)
        code, out, err = await run_cli("run", "hi", "--no-store", "--json", config=config)
    assert code == 0, err
    ran = json.loads(out)
    assert [step["observation"] for step in ran["steps"]] == [
        "Error: MCP error -32603: MCP server 'f' answered HTTP 502 (Bad Gateway): "
        f"upstream failed; request was: {masked}"
    ]
    assert shows_no_secret(out, err)


async def test_the_cli_shows_no_key_of_a_servers_url_path(tmp_path: Path) -> None:
    """A key in the URL's path, from a `${VAR}` (`/s/${KEY}/mcp`) or in a URL given whole
    (`${ZAPIER_MCP_URL}`: its segments that look like keys) is *** in `tools`'s listing, its
    warning line, `-v`'s request lines, the SDK's at `-vv`, and a failed call's observation.
    The words around it, and a whole URL's host and path, stay said."""
    refusing = FaultyFront(faulty_server(Waiting()).streamable_http_app(), everything=PAGE)
    async with serve_on_loopback(refusing) as base:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(
            f'[mcpServers.f]\nurl = "{base}/s/${{SAID_BACK_PATH}}/mcp"\nconnect_timeout = 10\n'
            '[mcpServers.z]\nurl = "${ZAPIER_MCP_URL}"\nconnect_timeout = 10\n'
        )
        whole = f"{base}/api/mcp/s/{PATH_KEY}/mcp"
        code, out, err = await run_cli(
            "tools", "-vv", config=config, SAID_BACK_PATH=WORD_KEY, ZAPIER_MCP_URL=whole
        )
    assert code == 1
    said = "MCP server '{}' answered HTTP 502 (Bad Gateway): upstream failed; request was: {}"
    f_said = said.format("f", json.dumps({":path": "/s/***/mcp"}))
    z_said = said.format("z", json.dumps({":path": "/api/mcp/s/***/mcp"}))
    [f_line] = [line for line in out.splitlines() if line.startswith("server f: failed since ")]
    [z_line] = [line for line in out.splitlines() if line.startswith("server z: failed since ")]
    assert f_line.endswith(f": MCPError: {f_said}")
    assert z_line.endswith(f": MCPError: {z_said}")
    assert f"WARNING toolkits.mcp.f: could not connect (attempt 1): MCPError: {f_said}\n" in err
    assert f'INFO httpx2: HTTP Request: POST {base}/s/***/mcp "HTTP/1.1 502 Bad Gateway"' in err
    assert f"Connecting to StreamableHTTP endpoint: {base}/api/mcp/s/***/mcp\n" in err
    assert shows_no_secret(out, err)

    served_at = f"/s/{WORD_KEY}/mcp"
    app = faulty_server(Waiting(), "page").streamable_http_app(
        host="127.0.0.1", streamable_http_path=served_at
    )
    async with serve_on_loopback(FaultyFront(app, calls={"page": PAGE})) as base:
        config = write_config(tmp_path, base, url="/s/${SAID_BACK_PATH}/mcp")
        code, out, err = await run_cli(
            "run", "hi", "--no-store", "--json", config=config, SAID_BACK_PATH=WORD_KEY
        )
    assert code == 0, err
    [step] = json.loads(out)["steps"]
    assert step["observation"].startswith(
        "Error: MCP error -32603: MCP server 'f' answered HTTP 502 (Bad Gateway): upstream "
        'failed; request was: {":path": "/s/***/mcp", "authorization": "Bearer ***"'
    )
    assert shows_no_secret(out, err)
