"""Streamable HTTP to an in-process SDK server on a loopback socket: headers, bearer token,
and the 2026-07-28 era over HTTP (which the npm servers do not speak)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
import trustme
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.servers.asgi import RecordHeaders, buffered_body, serve_on_loopback
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits.errors import ConnectionLost, ServerUnavailable
from toolkits.mcp import Backoff, McpServerConfig, McpToolkit, ProtocolMode, transport
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def growing_toy() -> ToyServer:
    toy = ToyServer()
    toy.add_echo("echo")

    async def grow(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        toy.add_echo("added")
        await toy.announce_change(ctx)
        return text_result("grown")

    toy.add("grow", grow)
    return toy


@pytest.mark.parametrize("era", ["modern", "auto", "legacy"])
async def test_headers_and_bearer_token_reach_the_server_and_never_the_log(
    era: ProtocolMode, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TOY_TOKEN", "tok-8f3a91")
    toy = growing_toy()
    app = RecordHeaders(toy.server.streamable_http_app(host="127.0.0.1"))
    changed = anyio.Event()

    async def on_change(_node: str) -> None:
        changed.set()

    async with serve_on_loopback(app) as base:
        config = McpServerConfig(
            url=f"{base}/mcp",
            headers={"X-Team": "blue"},
            bearer_token_env="TOY_TOKEN",
            protocol=era,
        )
        async with McpToolkit("toy", config) as node:
            expected = "2026-07-28" if era == "modern" else "2025-11-25"
            assert node.health.protocol_version == expected, node.health
            node.subscribe(on_change)
            echo = await node.call_tool("toy__echo", {"a": 1})
            assert echo.content == [types.TextContent(text="echo:[('a', 1)]")]
            await node.call_tool("toy__grow", {})
            with anyio.fail_after(5):
                await changed.wait()
            assert "toy__added" in {tool.name for tool in await node.list_tools()}
    assert app.seen
    assert all(seen.get("authorization") == "Bearer tok-8f3a91" for seen in app.seen)
    assert all(seen.get("x-team") == "blue" for seen in app.seen)
    assert "tok-8f3a91" not in caplog.text


async def test_an_unset_token_variable_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOY_TOKEN_UNSET", raising=False)
    config = McpServerConfig(url="http://127.0.0.1:9/mcp", bearer_token_env="TOY_TOKEN_UNSET")
    async with McpToolkit("toy", config, backoff=Backoff(60)) as node:
        assert node.health.state == "failed"
        assert node.health.last_error == (
            "ServerConfigError: environment variable 'TOY_TOKEN_UNSET' (the bearer token of MCP server "
            "'toy') is not set"
        )


class OneToken:
    """Lets through requests carrying `Bearer <token>`; answers others 401 `invalid_token`."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            sent = dict(scope["headers"]).get(b"authorization", b"").decode()
            if sent != f"Bearer {self.token}":
                refusal = JSONResponse(
                    {"error": "invalid_token"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
                )
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


@pytest.mark.parametrize("era", ["modern", "auto", "legacy"])
async def test_a_refused_token_says_so_and_where_it_came_from(
    era: ProtocolMode, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DS_TOK", "wrong-tok-1c9e")
    toy = ToyServer()
    toy.add_echo("echo")
    app = OneToken(toy.server.streamable_http_app(host="127.0.0.1"), "right")
    refused = (
        "ServerConfigError: MCP server 'ds' answered HTTP 401 (invalid_token): it refused the "
        "token in $DS_TOK"
    )
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", bearer_token_env="DS_TOK", protocol=era)
        async with McpToolkit("ds", config, backoff=Backoff(60)) as node:
            assert node.health.state == "failed"
            assert node.health.last_error == refused
        # A server that stops taking a token mid-session: the call fails, the node says why.
        monkeypatch.setenv("DS_TOK", "right")
        async with McpToolkit("ds", config, backoff=Backoff(60)) as node:
            assert node.health.state == "ready"
            app.token = "rotated"
            with pytest.raises(ConnectionLost):
                await node.call_tool("ds__echo", {})
            with anyio.fail_after(10):
                await node.wait_for_health(lambda health: health.state == "failed")
            assert node.health.last_error is not None
            assert node.health.last_error.endswith(
                "answered HTTP 401 (invalid_token): it refused the token in $DS_TOK"
            ), node.health
    assert "wrong-tok-1c9e" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_large_result_passes_and_the_session_stays(era: ProtocolMode) -> None:
    toy = ToyServer()
    toy.add_echo("echo")

    async def blob(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result("x" * int(args["size"]))

    toy.add("blob", blob)
    async with serve_on_loopback(toy.server.streamable_http_app(host="127.0.0.1")) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=era)
        async with McpToolkit("toy", config) as node:
            with anyio.fail_after(30):
                for size in (1 << 20, 10 << 20):
                    result = await node.call_tool("toy__blob", {"size": size})
                    assert not result.is_error
                    assert len(result.content[0].text) == size  # type: ignore[union-attr]
            assert node.health.state == "ready"
            assert node.health.failures == 0


@pytest.mark.parametrize(
    ("era", "raw"),
    [("legacy", True), ("legacy", False), ("modern", True)],
    ids=["events-raw", "events-sdk", "json-raw"],
)
async def test_a_result_over_the_limit_fails_that_call_only_saying_which_setting(
    era: ProtocolMode, raw: bool
) -> None:
    # Handshake-era servers stream results as server-sent events, 2026-07-28 ones answer a
    # JSON body: the limit bounds both (the SDK client reads a JSON body whole).
    toy = ToyServer()
    toy.add_echo("echo")

    async def blob(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result("x" * int(args["size"]))

    toy.add("blob", blob)
    async with serve_on_loopback(toy.server.streamable_http_app(host="127.0.0.1")) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=era, max_message_bytes=100_000)
        async with McpToolkit("toy", config) as node:
            node.raw_calls = raw
            with anyio.fail_after(30):
                for _ in range(3):
                    failed = await node.call_tool("toy__blob", {"size": 200_000})
                    assert failed.is_error
                    assert result_text(failed) == (
                        "MCP server 'toy' sent an answer larger than the 100000 byte limit: "
                        "raise mcpServers.toy.max_message_bytes to take it"
                    )
                    echo = await node.call_tool("toy__echo", {})
                    assert echo.content == [types.TextContent(text="echo:[]")]
            assert node.health.state == "ready"
            assert node.health.failures == 0


class RecordPeers:
    """ASGI middleware keeping the client address (host, port) of every POST: one per connection."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.peers: list[tuple[str, int]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            self.peers.append(tuple(scope["client"]))
        await self.app(scope, receive, send)


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_calls_reuse_their_http_connection(era: ProtocolMode) -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    app = RecordPeers(toy.server.streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=era)
        async with McpToolkit("toy", config) as node:
            before = len(app.peers)
            for _ in range(20):
                await node.call_tool("toy__echo", {})
            calls = app.peers[before:]
    # Besides the calls' own connection, a 2026-07-28 session holds one for its listen stream.
    assert len(calls) >= 20
    assert len(set(calls)) <= 3, f"{len(set(calls))} connections for 20 sequential calls"


@pytest.fixture
def trust_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """Where `SSL_CERT_FILE` points (nothing there yet), read again by the next node that
    makes a TLS connection (the TLS settings are made once per process)."""
    path = tmp_path / "trusted.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(path))
    transport._tls.cache_clear()  # pyright: ignore[reportPrivateUsage]
    yield path
    transport._tls.cache_clear()  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_server_over_https_is_verified_against_the_trust_store(
    era: ProtocolMode, trust_store: Path, tmp_path: Path
) -> None:
    authority = trustme.CA()
    certificate = tmp_path / "server.pem"
    authority.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(certificate)
    authority.cert_pem.write_to_path(trust_store)
    toy = ToyServer()
    toy.add_echo("echo")
    app = toy.server.streamable_http_app(host="127.0.0.1")
    async with serve_on_loopback(app, certificate=str(certificate)) as base:
        assert base.startswith("https://")
        config = McpServerConfig(url=f"{base}/mcp", protocol=era)
        async with McpToolkit("toy", config, backoff=Backoff(60)) as node:
            assert node.health.state == "ready", node.health
            result = await node.call_tool("toy__echo", {"a": 1})
            assert not result.is_error

        trustme.CA().cert_pem.write_to_path(trust_store)  # another authority only
        transport._tls.cache_clear()  # pyright: ignore[reportPrivateUsage]
        async with McpToolkit("toy", config, backoff=Backoff(60)) as node:
            assert node.health.state == "failed"
            assert "CERTIFICATE_VERIFY_FAILED" in (node.health.last_error or ""), node.health
            assert (node.health.last_error or "").endswith(
                "(a server whose certificate a private CA signed: set SSL_CERT_FILE to that CA's "
                "certificate, PEM, or SSL_CERT_DIR to a directory of them, before the gateway "
                "starts)"
            )


@pytest.mark.usefixtures("trust_store")  # with no file there, making TLS settings fails
async def test_a_plain_http_server_needs_no_trust_store() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    app = toy.server.streamable_http_app(host="127.0.0.1")
    async with (
        serve_on_loopback(app) as base,
        McpToolkit("toy", McpServerConfig(url=f"{base}/mcp")) as node,
    ):
        assert node.health.state == "ready", node.health
        assert not (await node.call_tool("toy__echo", {})).is_error


class RefuseHandshake:
    """ASGI middleware making a server of the 2026-07-28 era only: `initialize` gets a 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await buffered_body(receive)
        if json.loads(body).get("method") == "initialize":
            self.refused += 1
            error = {"code": -32600, "message": "Unsupported protocol version: use 2026-07-28"}
            response = JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, 400)
            await response(scope, receive, send)
            return
        await self.app(scope, replay, send)


async def test_auto_falls_back_to_the_stateless_era_when_the_handshake_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    toy = growing_toy()
    app = RefuseHandshake(toy.server.streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol="auto")
        async with McpToolkit("toy", config) as node:
            assert node.health.state == "ready", node.health
            assert node.health.protocol_version == "2026-07-28"
            echo = await node.call_tool("toy__echo", {"a": 1})
    assert echo.content == [types.TextContent(text="echo:[('a', 1)]")]
    assert app.refused == 1  # asked once, then probed
    assert "refused the 2025-11-25 handshake" in caplog.text


async def test_a_stateless_era_server_without_resources_gets_no_resource_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What `server/discover` says of its capabilities counts as the handshake's does."""
    toy = growing_toy()
    app = RefuseHandshake(toy.server.streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol="auto", resource_tools=True)
        async with McpToolkit("toy", config) as node:
            assert node.health.protocol_version == "2026-07-28"
            names = {tool.name for tool in await node.list_tools()}
    assert names == {"toy__echo", "toy__grow"}
    assert caplog.text.count("resource_tools has no effect") == 1, caplog.text


class ServedUntil:
    """A loopback server in a task of its own, stopped at will (not at a block's end)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.stop = anyio.Event()
        self.stopped = anyio.Event()

    async def run(self, port: int, *, task_status: anyio.abc.TaskStatus[str]) -> None:
        try:
            async with serve_on_loopback(self.app, port) as base:
                task_status.started(base)
                await self.stop.wait()
        finally:
            self.stopped.set()


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_server_that_stopped_while_idle_went_away_and_is_reconnected_to(
    era: ProtocolMode,
) -> None:
    """Not "the toolkit is shutting down": only the node's owner stopping it says that."""
    toy = ToyServer()
    toy.add_echo("echo")
    first = ServedUntil(toy.server.streamable_http_app(host="127.0.0.1"))
    async with anyio.create_task_group() as tg:
        base: str = await tg.start(first.run, 0)
        config = McpServerConfig(url=f"{base}/mcp", protocol=era)
        async with McpToolkit("toy", config, backoff=Backoff(initial=0.05, maximum=0.05)) as node:
            with anyio.fail_after(30):
                assert not (await node.call_tool("toy__echo", {"text": "a"})).is_error
                first.stop.set()  # the server stops while the session is idle
                await first.stopped.wait()
                with pytest.raises(ConnectionLost) as lost:
                    await node.call_tool("toy__echo", {"text": "b"})
                assert "went away" in str(lost.value)
                assert "shutting down" not in str(lost.value)
                again = ServedUntil(toy.server.streamable_http_app(host="127.0.0.1"))
                await tg.start(again.run, int(base.rsplit(":", 1)[1]))
                await node.wait_for_health(lambda health: health.state == "ready")
                assert not (await node.call_tool("toy__echo", {"text": "c"})).is_error
                again.stop.set()


async def test_a_call_follows_a_server_that_is_back_without_waiting_out_the_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A restarted downstream (a deploy) serves the next call, and its error said how old it was."""
    caplog.set_level(logging.INFO, logger="toolkits.mcp.toy")
    toy = ToyServer()
    toy.add_echo("echo")
    first = ServedUntil(toy.server.streamable_http_app(host="127.0.0.1"))
    # The scheduled attempt is a minute away: only the calls can bring the node back.
    later = Backoff(initial=60, maximum=60, early=0)
    async with anyio.create_task_group() as tg:
        base: str = await tg.start(first.run, 0)
        config = McpServerConfig(url=f"{base}/mcp")
        async with McpToolkit("toy", config, backoff=later) as node:
            with anyio.fail_after(30):
                assert not (await node.call_tool("toy__echo", {"text": "a"})).is_error
                first.stop.set()
                await first.stopped.wait()
                with pytest.raises(ConnectionLost):
                    await node.call_tool("toy__echo", {"text": "b"})
                await node.wait_for_health(lambda health: health.state == "failed")
                with pytest.raises(ServerUnavailable) as down:
                    await node.call_tool("toy__echo", {"text": "c"})
                assert re.fullmatch(
                    r"MCP server 'toy' is unavailable: ConnectError: \[Errno 111\] [^()]+"
                    r"(\('[\d.]+', \d+\))? \(\d+\.\d s ago\); a call in 0\.0 s or later tries again",
                    str(down.value),
                ), down.value
                again = ServedUntil(toy.server.streamable_http_app(host="127.0.0.1"))
                await tg.start(again.run, int(base.rsplit(":", 1)[1]))
                assert not (await node.call_tool("toy__echo", {"text": "d"})).is_error
                again.stop.set()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert re.fullmatch(
        r"reconnected \(protocol 2025-11-25\) after 2 failed attempts / \d+\.\d s", warnings[-1]
    ), warnings
