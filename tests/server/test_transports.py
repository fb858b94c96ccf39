"""`agent-gateway serve` as a real process: over stdio and over HTTP, both protocol eras."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server import MCPServer

from tests.servers.asgi import serve_on_loopback

from .processes import REPO, SCRIPT, TIMES_42, http_server, write_config
from .support import ERAS, SAMPLING_WITH_TOOLS

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "s3cret-token-for-tests"
INITIALIZE_PARAMS: dict[str, Any] = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": INITIALIZE_PARAMS,
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def check_served(client: Client) -> None:
    """What every transport must do: list, run an agent, proxy the calculator."""
    listing = await client.list_tools()
    assert [t.name for t in listing.tools] == ["assistant", "calculator"]
    answer = await client.call_tool("assistant", {"prompt": "What is 6 * 7?"})
    assert answer.content == [types.TextContent(text="It is 42.")]
    assert answer.structured_content is not None
    assert answer.structured_content["output"] == "It is 42."
    proxied = await client.call_tool("calculator", {"expression": "2 ** 10"})
    assert proxied.structured_content == {"response": "1024"}


@pytest.mark.parametrize("era", ERAS)
async def test_over_stdio(tmp_path: Path, era: str) -> None:
    config = write_config(tmp_path, TIMES_42)
    params = StdioServerParameters(
        command=str(SCRIPT), args=["serve", "--stdio", "--config", str(config)], cwd=REPO
    )
    with anyio.fail_after(30):
        async with Client(params, mode=era) as client:
            assert client.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
            await check_served(client)


@pytest.mark.parametrize("stateless", [False, True])
@pytest.mark.parametrize("era", ERAS)
async def test_over_http(tmp_path: Path, era: str, stateless: bool) -> None:
    config = write_config(tmp_path, TIMES_42)
    async with http_server(config, *(["--stateless"] if stateless else [])) as served:
        assert served.url.startswith("http://127.0.0.1:")
        assert served.url.endswith("/mcp")
        with anyio.fail_after(30):
            async with Client(served.url, mode=era) as client:
                await check_served(client)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("era", ERAS)
async def test_http_shuts_down_cleanly_on_a_signal(
    tmp_path: Path, era: str, signum: signal.Signals
) -> None:
    config = write_config(tmp_path, TIMES_42)
    async with http_server(config) as served:
        with anyio.fail_after(30):
            async with Client(served.url, mode=era) as client:  # legacy: a session stays open
                await client.list_tools()
                served.process.send_signal(signum)
                code = await served.process.wait()
            await served.stderr_closed.wait()
    assert code == 128 + signum
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]


class Held:
    """A downstream server whose one tool answers once released."""

    def __init__(self) -> None:
        self.started, self.release = anyio.Event(), anyio.Event()
        self.server = MCPServer("down")

        @self.server.tool()
        async def held() -> str:  # pyright: ignore[reportUnusedFunction]
            """Answer once released."""
            self.started.set()
            await self.release.wait()
            return "released"

    def config(self, directory: Path, base: str) -> Path:
        config = directory / "agent-gateway.toml"
        config.write_text(f'[gateway]\nexpose_tools = true\n[mcpServers.d]\nurl = "{base}/mcp"\n')
        return config


@pytest.mark.parametrize(
    "second", [None, signal.SIGTERM, signal.SIGINT], ids=["once", "twice", "then-ctrl-c"]
)
@pytest.mark.parametrize("era", ["auto", "legacy"])  # a 2025-era call runs in a session
@pytest.mark.parametrize("first", [signal.SIGTERM, signal.SIGINT], ids=["term", "ctrl-c"])
async def test_a_signal_lets_the_calls_in_flight_finish_and_a_second_one_does_not_wait(
    tmp_path: Path,
    era: Literal["auto", "legacy"],
    second: signal.Signals | None,
    first: signal.Signals,
) -> None:
    down = Held()
    app = down.server.streamable_http_app(host="127.0.0.1")
    async with serve_on_loopback(app) as base, http_server(down.config(tmp_path, base)) as served:
        with anyio.fail_after(30):
            async with Client(served.url, mode=era) as client:
                await client.list_tools()
                results: list[types.CallToolResult] = []

                async def call() -> None:
                    results.append(await client.call_tool("d__held", {}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await down.started.wait()
                    served.process.send_signal(first)
                    await served.line_starting("agent-gateway: stopping")
                    if second is None:
                        down.release.set()  # the gateway waits: its node is still there
                    else:
                        served.process.send_signal(second)  # no more waiting
                # Well within the grace when cut short (the node stops at once).
                with anyio.fail_after(30 if second is None else 3):
                    code = await served.process.wait()
            await served.stderr_closed.wait()
    [result] = results
    if second is None:
        assert result.content == [types.TextContent(text="released")]
    else:  # cut off, and told why (not that its server went away)
        assert result.is_error
        [text] = [c.text for c in result.content if isinstance(c, types.TextContent)]
        assert "shutting down" in text
        assert "went away" not in text
    assert code == 128 + first
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_a_proxied_call_ending_in_the_grace_reaches_a_client_that_never_listed_tools(
    tmp_path: Path, era: Literal["auto", "legacy"]
) -> None:
    # Passed straight through (`served.pass_through`): the SDK's `Client` lists the tools
    # after the result, to check it against the tool's output schema.
    down = Held()
    app = down.server.streamable_http_app(host="127.0.0.1")
    async with serve_on_loopback(app) as base, http_server(down.config(tmp_path, base)) as served:
        with anyio.fail_after(30):
            async with Client(served.url, mode=era) as client:
                results: list[types.CallToolResult] = []
                refusals: list[types.CallToolResult] = []  # new calls made during the grace

                async def call() -> None:
                    results.append(await client.call_tool("d__held", {}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await down.started.wait()
                    served.process.send_signal(signal.SIGTERM)
                    await served.line_starting("agent-gateway: stopping")
                    refusals.append(await client.call_tool("d__held", {}))
                    down.release.set()
                code = await served.process.wait()
            await served.stderr_closed.wait()
    assert [result.content for result in results] == [[types.TextContent(text="released")]]
    [refused] = refusals
    assert refused.is_error
    [text] = [c.text for c in refused.content if isinstance(c, types.TextContent)]
    assert "agent-gateway is shutting down and takes no new calls" in text
    assert code == 128 + signal.SIGTERM
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]


async def test_sampling_over_stateless_http(tmp_path: Path) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.helper]\nmodel = "sampling"\ntools = ["calculator"]\n'
    )
    asked: list[types.CreateMessageRequestParams] = []

    async def client_model(
        context: object, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        asked.append(params)
        if len(asked) == 1:
            use = types.ToolUseContent(id="u1", name="calculator", input={"expression": "6 * 7"})
            return types.CreateMessageResultWithTools(role="assistant", content=[use], model="m")
        return types.CreateMessageResultWithTools(
            role="assistant", content=[types.TextContent(text="42!")], model="m"
        )

    async with http_server(config, "--stateless") as served:
        with anyio.fail_after(30):
            # 2026-07-28: the answers come back in retried calls, whichever replica takes them.
            async with Client(
                served.url,
                sampling_callback=client_model,
                sampling_capabilities=SAMPLING_WITH_TOOLS,
            ) as client:
                result = await client.call_tool("helper", {"prompt": "6 * 7?"})
            assert result.content == [types.TextContent(text="42!")]
            # 2025-11-25 over stateless HTTP: no way to reach the client mid-call.
            async with Client(
                served.url,
                mode="legacy",
                sampling_callback=client_model,
                sampling_capabilities=SAMPLING_WITH_TOOLS,
            ) as client:
                refused = await client.call_tool("helper", {"prompt": "6 * 7?"})
    assert len(asked) == 2
    assert refused.is_error
    assert isinstance(refused.content[0], types.TextContent)
    assert "--stateless" in refused.content[0].text


async def test_http_wants_the_bearer_token(tmp_path: Path) -> None:
    config = write_config(tmp_path, TIMES_42, gateway='tokens_env = "GW_TEST_TOKENS"')
    async with http_server(config, env={"GW_TEST_TOKENS": f"other-token, {TOKEN}"}) as served:
        async with httpx2.AsyncClient(timeout=10) as http:
            missing = await http.post(served.url, json=INITIALIZE, headers=MCP_HEADERS)
            wrong = await http.post(
                served.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer nope"}
            )
            basic = await http.post(
                served.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Basic eDp5"}
            )
        assert (missing.status_code, wrong.status_code, basic.status_code) == (401, 401, 401)
        # RFC 6750 §3.1: no error code for a request without a bearer token.
        assert missing.headers["www-authenticate"] == "Bearer"
        assert basic.headers["www-authenticate"] == "Bearer"
        assert wrong.headers["www-authenticate"] == (
            'Bearer error="invalid_token", error_description="Authentication required"'
        )
        with anyio.fail_after(30):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as authorized,
                Client(streamable_http_client(served.url, http_client=authorized)) as client,
            ):
                await check_served(client)
    assert not any(TOKEN in line for line in served.stderr)


async def test_http_checks_host_origin_and_body_size(tmp_path: Path) -> None:
    config = write_config(tmp_path, TIMES_42, gateway="max_request_bytes = 2048")
    async with http_server(config) as served, httpx2.AsyncClient(timeout=10) as http:
        good = await http.post(served.url, json=INITIALIZE, headers=MCP_HEADERS)
        origin = await http.post(
            served.url,
            json=INITIALIZE,
            headers={**MCP_HEADERS, "Origin": "http://evil.example"},
        )
        host = await http.post(
            served.url, json=INITIALIZE, headers={**MCP_HEADERS, "Host": "evil.example:80"}
        )
        big = {**INITIALIZE, "params": {**INITIALIZE_PARAMS, "padding": "x" * 5000}}
        too_big = await http.post(served.url, json=big, headers=MCP_HEADERS)

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
            yield json.dumps(big).encode()

        streamed = await http.post(served.url, content=chunks(), headers=MCP_HEADERS)
    assert good.status_code == 200
    assert origin.status_code == 403
    assert host.status_code == 421
    assert (too_big.status_code, streamed.status_code) == (413, 413)
    # A JSON-RPC error, as stdio answers it (was the plain text "Request body too large"); the
    # id is known once the body's head is read (not for a Content-Length refused unread).
    longer = {"code": -32600, "message": "Invalid Request: the message is longer than 2048 bytes"}
    assert too_big.json() == {"jsonrpc": "2.0", "id": None, "error": longer}
    assert streamed.json() == {"jsonrpc": "2.0", "id": INITIALIZE["id"], "error": longer}


async def test_an_idle_connection_stays_open_for_http_keep_alive(tmp_path: Path) -> None:
    """The next request goes on the same connection; one idle for `http_keep_alive` s is
    closed by the server."""
    config = write_config(tmp_path, TIMES_42, gateway="http_keep_alive = 1")
    async with http_server(config) as served:
        address = served.url.removeprefix("http://").removesuffix("/mcp")
        host, port = address.rsplit(":", 1)
        body = json.dumps({**INITIALIZE, "method": "ping", "params": {}}).encode()
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        with anyio.fail_after(20):
            async with await anyio.connect_tcp(host, int(port)) as stream:
                for _ in range(2):
                    await stream.send(request)
                    head, _body = await _http_answer(stream)
                    assert head.startswith(b"HTTP/1.1 ")
                    assert b"connection: close" not in head.lower()
                # Closed after 1 s idle (uvicorn's default would wait 5 s).
                with anyio.fail_after(3), pytest.raises(anyio.EndOfStream):
                    await stream.receive()


async def _http_answer(stream: anyio.abc.ByteStream) -> tuple[bytes, bytes]:
    """One HTTP/1.1 answer with a Content-Length: its head and its body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += await stream.receive()
    return head, body


async def run_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    with anyio.fail_after(30):
        done = await anyio.run_process([str(SCRIPT), *args], check=False, cwd=REPO, env=env)
    return done.returncode, done.stderr.decode()


async def test_a_public_address_without_a_token_is_refused_before_binding(tmp_path: Path) -> None:
    config = write_config(tmp_path, TIMES_42)
    # 192.0.2.1 (TEST-NET-1) is on no interface: had it tried to bind, the error would say so.
    code, err = await run_cli("serve", "--http", "192.0.2.1:8000", "--config", str(config))
    assert code == 2
    assert "refusing to serve HTTP on 192.0.2.1 without a bearer token" in err
    assert "tokens_env" in err
    code, err = await run_cli(
        "serve", "--http", "127.0.0.1:0", "--config", str(config), "--token-env", "GW_UNSET_VAR"
    )
    assert code == 2
    assert "GW_UNSET_VAR is not set or empty" in err
    code, err = await run_cli("serve", "--stdio", "--stateless", "--config", str(config))
    assert code == 2
    assert "--stateless applies to --http only" in err
