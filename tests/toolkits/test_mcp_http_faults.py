"""An HTTP server's front failing one call (an error status, an HTML page, a redirect) fails
that call alone, saying what came back, on both ways a node calls (raw JSON-RPC and the SDK
client): the calls in flight beside it finish and the node does not reconnect. At connect,
the same answers name their status too."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.server.proxying import gateway_front
from tests.servers.asgi import RecordHeaders, serve_on_loopback
from tests.servers.faulty_http import CUT, NGINX_502, Fault, FaultyFront, Waiting, faulty_server
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FAULTS = {
    "html_500": (
        Fault(500, body=b"<html><body><h1>Internal Server Error</h1></body></html>"),
        "MCP error -32603: MCP server 'f' answered HTTP 500 (Internal Server Error): "
        "Internal Server Error",
    ),
    "nginx_502": (
        NGINX_502,
        "MCP error -32603: MCP server 'f' answered HTTP 502 (Bad Gateway): "
        "502 Bad Gateway 502 Bad Gateway nginx",
    ),
    "login_page": (
        Fault(200, body=b"<!doctype html><title>Sign in</title><p>Please sign in</p>"),
        "MCP error -32603: MCP server 'f' answered HTTP 200 with text/html, not JSON or an "
        "event stream: Sign in Please sign in",
    ),
    "json_503": (
        Fault(503, "application/json", b'{"detail": "Service Unavailable"}'),
        "MCP error -32603: MCP server 'f' answered HTTP 503 (Service Unavailable): "
        '{"detail": "Service Unavailable"}',
    ),
    "jsonrpc_500": (
        Fault(
            500,
            "application/json",
            b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32001, "message": "overloaded"}}',
        ),
        "MCP error -32001: overloaded",
    ),
    "plain_429": (
        Fault(429, "text/plain; charset=utf-8", b"slow down " * 40),
        "MCP error -32603: MCP server 'f' answered HTTP 429 (Too Many Requests): "
        + ("slow down " * 20).strip()
        + "…",
    ),
    "empty_500": (
        Fault(500, ""),
        "MCP error -32603: MCP server 'f' answered HTTP 500 (Internal Server Error)",
    ),
}


@asynccontextmanager
async def faulty_node(
    front: FaultyFront, protocol: ProtocolMode = "auto"
) -> AsyncGenerator[McpToolkit]:
    async with serve_on_loopback(front) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=protocol, connect_timeout=10)
        async with McpToolkit("f", config) as node:
            yield node


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_an_http_error_to_one_call_fails_it_alone_and_the_calls_beside_it_finish(
    raw: bool, protocol: ProtocolMode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.f")
    waiting = Waiting(expected=5)
    server = faulty_server(waiting, *FAULTS)
    front = FaultyFront(
        server.streamable_http_app(host="127.0.0.1"),
        calls={name: fault for name, (fault, _) in FAULTS.items()},
    )
    with anyio.fail_after(30):
        async with faulty_node(front, protocol) as node:
            node.raw_calls = raw
            results: list[types.CallToolResult] = []
            said: dict[str, types.CallToolResult] = {}

            async def wait() -> None:
                results.append(await node.call_tool("f__wait", {}))

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(wait)
                await waiting.all_began.wait()
                for name in FAULTS:
                    said[name] = await node.call_tool(f"f__{name}", {})
                waiting.release.set()
            ok = await node.call_tool("f__ok", {})
            assert node.health.state == "ready"
    assert {name: (r.is_error, result_text(r)) for name, r in said.items()} == {
        name: (True, text) for name, (_, text) in FAULTS.items()
    }
    assert [result_text(r) for r in results] == ["waited"] * 5
    assert result_text(ok) == "ok"
    assert front.methods.count("initialize") == (protocol == "auto")
    said_by_node = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.f"]
    assert [line for line in said_by_node if not line.startswith("offering")] == [
        f"connected (protocol {'2026-07-28' if protocol == 'modern' else '2025-11-25'})"
    ]  # once: the connection was never lost


def moved_config(base: str) -> McpServerConfig:
    return McpServerConfig(url=f"{base}/mcp", connect_timeout=10)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_server_behind_a_same_origin_redirect_is_called_there(
    raw: bool, protocol: ProtocolMode
) -> None:
    waiting = Waiting()
    server = faulty_server(waiting)
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), moved=True)
    with anyio.fail_after(30):
        async with faulty_node(front, protocol) as node:
            node.raw_calls = raw
            results = [await node.call_tool("f__ok", {}) for _ in range(3)]
            assert node.health.state == "ready"
    assert [(r.is_error, result_text(r)) for r in results] == [(False, "ok")] * 3


@pytest.mark.parametrize("status", [301, 302])
@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_301_or_302_to_the_first_post_moves_the_connection_within_its_origin(
    status: int, protocol: ProtocolMode
) -> None:
    # Django's APPEND_SLASH and nginx answer /mcp with a 301 to /mcp/: the POST is sent
    # there, and so is every later request of the connection, raw calls and the SDK's alike.
    server = faulty_server(Waiting())
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), moved=True)
    front.moved_status = status
    with anyio.fail_after(30):
        async with faulty_node(front, protocol) as node:
            results: list[types.CallToolResult] = []
            for raw in (True, False):
                node.raw_calls = raw
                results.append(await node.call_tool("f__ok", {}))
            assert node.health.state == "ready"
    assert [(r.is_error, result_text(r)) for r in results] == [(False, "ok")] * 2
    assert front.targets[0] == ("POST", "/mcp")
    assert all(path == "/mcp/" for _, path in front.targets[1:])
    assert "POST" in dict(front.targets[1:2])


@pytest.mark.parametrize(
    "chain",
    [("/mcp", "/mcp/", "/v2/mcp/"), ("/mcp", "/a", "/b", "/c", "/d", "/v2/mcp/")],
    ids=["two-proxies", "five-hops"],
)
async def test_a_chain_of_301s_to_the_first_post_moves_the_connection_to_its_end(
    chain: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    # Two proxies' rules: /mcp -> /mcp/ (APPEND_SLASH), /mcp/ -> /v2/mcp/ (a moved service).
    caplog.set_level(logging.INFO, logger="toolkits.mcp")
    server = faulty_server(Waiting())
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), chain=chain)
    front.moved_status = 301
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base, McpToolkit("f", moved_config(base)) as node:
            results: list[types.CallToolResult] = []
            for raw in (True, False):
                node.raw_calls = raw
                results.append(await node.call_tool("f__ok", {}))
            assert node.health.state == "ready"
    assert [(r.is_error, result_text(r)) for r in results] == [(False, "ok")] * 2
    hops = len(chain) - 1
    assert front.targets[:hops] == [("POST", path) for path in chain[:-1]]
    assert all(path == chain[-1] for _, path in front.targets[hops:])
    said = [r.getMessage() for r in caplog.records if "this connection uses" in r.getMessage()]
    moves = ", ".join(f"moved to {base}{path}, which answered HTTP 301" for path in chain[1:-1])
    assert said == [
        f"MCP server 'f': {base}{chain[0]} answered HTTP 301, {moves}, moved to "
        f"{base}{chain[-1]}: this connection uses {base}{chain[-1]} (configure it as the url "
        "to save the round trips)"
    ]


@pytest.mark.parametrize(
    ("chain", "why"),
    [
        (("/mcp", "/mcp/", "/mcp"), "a redirect loop"),
        (("/mcp", "/mcp"), "a redirect loop"),
        (("/mcp", "/a", "/b", "/c", "/d", "/e", "/v2/mcp/"), "more than 5 redirects"),
    ],
    ids=["loop", "to-itself", "six-hops"],
)
async def test_a_301_loop_or_too_long_a_chain_fails_the_connection_at_once_naming_it(
    chain: tuple[str, ...], why: str
) -> None:
    server = faulty_server(Waiting())
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), chain=chain)
    front.moved_status = 302
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base, McpToolkit("f", moved_config(base)) as node:
            assert node.health.state == "failed"
            error = node.health.last_error
    hops = ", ".join(f"moved to {base}{path}, which answered HTTP 302" for path in chain[1:-1])
    assert error == (
        f"MovedTooOften: {base}{chain[0]} answered HTTP 302, "
        + (f"{hops}, " if hops else "")
        + f"moved to {base}{chain[-1]}: {why}, not followed; set url to where the server is"
    )
    assert len(front.targets) == len(chain) - 1  # once round, never again


async def test_a_301_chain_leaving_its_origin_is_refused_at_that_hop() -> None:
    elsewhere = RecordHeaders(faulty_server(Waiting()).streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(elsewhere) as other:
        front = FaultyFront(
            faulty_server(Waiting()).streamable_http_app(host="127.0.0.1"),
            chain=("/mcp", "/mcp/", f"{other}/mcp"),
        )
        front.moved_status = 301
        with anyio.fail_after(30):
            async with (
                serve_on_loopback(front) as base,
                McpToolkit("f", moved_config(base)) as node,
            ):
                assert node.health.state == "failed"
                error = node.health.last_error
    assert error is not None
    assert f"Redirect to {other}/mcp not followed" in error
    assert elsewhere.seen == []


async def test_a_call_passed_through_goes_where_the_connection_moved() -> None:
    server = faulty_server(Waiting())
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), moved=True)
    front.moved_status = 301
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", connect_timeout=10)
            async with gateway_front(config) as (url, passing, _), Client(url) as client:
                assert passing is not None
                called = await client.call_tool("d__ok", {})
    assert (called.is_error, called.content) == (False, [types.TextContent(text="ok")])
    assert front.targets.count(("POST", "/mcp")) == 1  # the first, moved


async def test_a_301_later_in_the_connection_is_not_followed() -> None:
    moved = Fault(301, "text/plain", headers=(("location", "/mcp/"),))
    server = faulty_server(Waiting(), "moved")
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), calls={"moved": moved})
    with anyio.fail_after(30):
        async with faulty_node(front) as node:
            node.raw_calls = False
            result = await node.call_tool("f__moved", {})
            ok = await node.call_tool("f__ok", {})
    assert result.is_error
    assert "/mcp/ not followed" in result_text(result)
    assert result_text(ok) == "ok"
    assert all(path == "/mcp" for _, path in front.targets)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
async def test_a_call_redirected_to_another_origin_is_not_followed_and_says_where(
    raw: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("F_TOKEN", "s3cret")
    elsewhere = RecordHeaders(faulty_server(Waiting()).streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(elsewhere) as other:
        moved = Fault(307, "text/plain", headers=(("location", f"{other}/mcp"),))
        server = faulty_server(Waiting(), "moved")
        front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), calls={"moved": moved})
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", bearer_token_env="F_TOKEN")
            with anyio.fail_after(30):
                async with McpToolkit("f", config) as node:
                    node.raw_calls = raw
                    result = await node.call_tool("f__moved", {})
                    ok = await node.call_tool("f__ok", {})
    assert result.is_error
    assert result_text(result) == (
        f"MCP error -32600: Redirect to {other}/mcp not followed; use that URL as the endpoint "
        "if it is the intended server"
    )
    assert result_text(ok) == "ok"
    assert elsewhere.seen == []  # nothing went there, the token least of all
    assert "not followed" not in caplog.text  # said in the result alone


async def test_a_connection_redirected_elsewhere_is_refused_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    elsewhere = RecordHeaders(faulty_server(Waiting()).streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(elsewhere) as other:
        moved = Fault(301, "text/plain", headers=(("location", f"{other}/mcp"),))
        front = FaultyFront(faulty_server(Waiting()).streamable_http_app(host="127.0.0.1"))
        front.everything = moved
        with anyio.fail_after(30):
            async with faulty_node(front) as node:
                assert node.health.state != "ready"
    said = f"Redirect to {other}/mcp not followed"
    assert [r.name for r in caplog.records if said in r.getMessage()] == ["toolkits.mcp.f"]
    assert elsewhere.seen == []


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        (NGINX_502, "answered HTTP 502 (Bad Gateway): 502 Bad Gateway 502 Bad Gateway nginx"),
        (Fault(500, "text/plain", b"oops"), "answered HTTP 500 (Internal Server Error): oops"),
        (
            Fault(404, "text/html", b"<h1>Not Found</h1>"),
            "answered HTTP 404 (Not Found): Not Found",
        ),
        (
            Fault(200, body=b"<title>Sign in</title>"),
            "answered HTTP 200 with text/html, not JSON or an event stream: Sign in",
        ),
    ],
    ids=["502", "500", "404", "html"],
)
async def test_an_http_error_at_connect_says_its_status(
    fault: Fault, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    front = FaultyFront(faulty_server(Waiting()).streamable_http_app(), everything=fault)
    with anyio.fail_after(30):
        async with faulty_node(front) as node:
            health = await node.wait_for_health(lambda h: h.state == "failed")
    assert health.last_error is not None
    assert f"MCP server 'f' {said}" in health.last_error
    sdk_errors = [
        r for r in caplog.records if r.name.startswith("mcp.") and r.levelno >= logging.ERROR
    ]
    assert sdk_errors == []  # we said it; the SDK's "Unexpected content type" is not said too


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_call_whose_connection_is_cut_fails_alone_while_the_server_still_answers(
    raw: bool, protocol: ProtocolMode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.f")
    waiting = Waiting(expected=3)
    server = faulty_server(waiting, "cut")
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), calls={"cut": CUT})
    results: list[types.CallToolResult] = []
    with anyio.fail_after(30):
        async with faulty_node(front, protocol) as node:
            node.raw_calls = raw

            async def wait() -> None:
                results.append(await node.call_tool("f__wait", {}))

            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(wait)
                await waiting.all_began.wait()
                results.append(await node.call_tool("f__cut", {}))
                waiting.release.set()
            assert node.health.state == "ready"
    cut, *waited = [(r.is_error, result_text(r)) for r in results]
    assert cut == (
        True,
        "MCP server 'f' closed the connection during a call to 'f__cut', but still answers: "
        "only this call failed (it may have run)",
    )
    assert waited == [(False, "waited")] * 3
    said_by_node = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.f"]
    assert [line for line in said_by_node if line.startswith("connect")] == [
        f"connected (protocol {'2026-07-28' if protocol == 'modern' else '2025-11-25'})"
    ]  # once: the connection was never lost


@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_json_answer_over_the_limit_fails_its_call_unread(protocol: ProtocolMode) -> None:
    # Chunked (no Content-Length): the body is counted as it comes, and not kept past the limit.
    huge = Fault(
        200, "application/json", b'{"jsonrpc": "2.0", "id": 1, "result": "' + b"x" * 300_000
    )
    server = faulty_server(Waiting(), "huge")
    front = FaultyFront(server.streamable_http_app(host="127.0.0.1"), calls={"huge": huge})
    with anyio.fail_after(30):
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(
                url=f"{base}/mcp", protocol=protocol, max_message_bytes=100_000
            )
            async with McpToolkit("f", config) as node:
                failed = await node.call_tool("f__huge", {})
                ok = await node.call_tool("f__ok", {})
                assert node.health.state == "ready"
    assert (failed.is_error, result_text(failed)) == (
        True,
        "MCP server 'f' sent an answer larger than the 100000 byte limit: "
        "raise mcpServers.f.max_message_bytes to take it",
    )
    assert result_text(ok) == "ok"
