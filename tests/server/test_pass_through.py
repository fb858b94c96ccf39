"""Proxied calls passed straight through over HTTP answer exactly as the usual path does.

One real downstream SDK server over HTTP on 127.0.0.1 (both eras; the gateway keeps a
handshake-era session to it), two gateways in front of it over real HTTP, one with the pass-through and
one without, and a 2026-07-28 SDK client: every call gets the same answer from both (content,
errors, structured content, `_meta`, progress, log messages, a refused elicitation), and the
first gateway passed them through. A client that can be asked (in input-required rounds:
`test_pass_through_rounds`), a cancelled call, a timed-out call and a downstream restarted
under the gateway are covered too.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context as ToolContext
from mcp.server.mcpserver import Elicit, Resolve
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served import pass_through_reply
from gateway.server.served.pass_through import PassThrough
from tests.servers.asgi import buffered_body, serve_on_loopback
from tests.servers.catalog import sampling_request
from tests.servers.inprocess import (
    Context,
    ToyServer,
    content_kinds_result,
    declare_logging,
    text_result,
)
from tests.servers.oauth import oauth_world
from tests.servers.usual_tools import Name, add_usual_tools
from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.mcp.config import ProtocolMode
from toolkits.mcp.server_requests import ASKING

from .proxying import ClientAnswers, answers_by_name, gateway_front
from .support import serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def name_please() -> Elicit[Name]:
    return Elicit("Your name?", Name)


class Downstream:
    """An SDK server written the usual way, and what it saw."""

    def __init__(self, *, logging: bool = False) -> None:
        """`logging`: it declares logging (`declare_logging`), as a server that logs should."""
        self.started = anyio.Event()
        self.cancelled = anyio.Event()
        self.release = anyio.Event()
        self.session: Any = None
        """The session of the last `hold_session` call."""
        server = self.server = MCPServer("down")
        if logging:  # MCPServer has no way to declare it
            declare_logging(server._lowlevel_server)  # pyright: ignore[reportPrivateUsage]

        add_usual_tools(server)

        @server.tool()
        async def greet(name: Annotated[Name, Resolve(name_please)]) -> str:
            """Greet the user by the name asked for: in the result's input-required rounds at
            2026-07-28, mid-call before."""
            return f"hello {name.name}"

        @server.tool()
        async def declared(ctx: ToolContext) -> str:
            """Which of the asking capabilities this request's client declared."""
            capabilities = ctx.session.client_capabilities
            return ",".join(k for k in ASKING if getattr(capabilities, k, None)) or "none"

        @server.tool()
        async def sample(ctx: ToolContext) -> str:
            """Ask the client's model, on the call's own stream."""
            try:  # not `create_message`, which warns that sampling is deprecated at 2026-07-28
                answer = await ctx.session.send_request(
                    sampling_request("6 * 7?"),
                    types.CreateMessageResult,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
                )
            except MCPError as exc:
                return f"could not ask: {exc}"
            return f"{answer.model} says {getattr(answer.content, 'text', '?')}"

        @server.tool()
        async def roots(ctx: ToolContext) -> str:
            """Ask for the client's roots on the session's own stream, not the call's."""
            try:
                listed = await ctx.session.send_request(
                    types.ListRootsRequest(), types.ListRootsResult
                )
            except MCPError as exc:
                return f"could not ask: {exc}"
            return ", ".join(f"{root.name} {root.uri}" for root in listed.roots)

        @server.tool()
        async def hesitate(ctx: ToolContext) -> str:
            """Ask for a name; a cancel meanwhile sets `cancelled`."""
            try:
                await ctx.elicit("Your name?", Name)
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
            return "answered"

        @server.tool()
        async def wait() -> str:
            """Wait until cancelled."""
            self.started.set()
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.set()
            return "never"  # pragma: no cover

        @server.tool()
        async def hold_session(ctx: ToolContext) -> str:
            """Keep the session, for a test to send on it outside any call."""
            self.session = ctx.session
            return "held"

        @server.tool()
        async def held() -> str:
            """Answer once released."""
            await self.release.wait()
            return "released"

    def app(self) -> Any:
        return self.server.streamable_http_app(host="127.0.0.1")


NODE_PROTOCOLS = pytest.mark.parametrize("protocol", ["auto", "modern"])
"""The node's protocol: the handshake era (a session), or 2026-07-28 requests."""


@asynccontextmanager
async def front(
    url: str, *, pass_through: bool, protocol: ProtocolMode = "auto", **keys: Any
) -> AsyncGenerator[tuple[str, PassThrough | None]]:
    """A gateway serving the downstream's tools over HTTP; its pass-through layer, if on."""
    config = McpServerConfig(url=url, protocol=protocol, **keys)
    async with gateway_front(config, pass_through=pass_through) as (front_url, layer, _):
        yield front_url, layer


class Heard:
    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[str] = []

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(f"{params.level}: {params.data}")


async def answered_each(
    client: Client, calls: Sequence[tuple[str, dict[str, Any]]]
) -> list[tuple[Any, ...]]:
    """Each call's name, result (as on the wire; a JSON-RPC error as `{"error": ...}`) and
    the progress heard, one call at a time."""
    answers: list[tuple[Any, ...]] = []
    for name, arguments in calls:
        heard = Heard()
        try:
            result = await client.call_tool(name, arguments, progress_callback=heard.on_progress)
        except MCPError as exc:  # the server's error, relayed as it sent it
            answered = {"error": exc.error.model_dump(by_alias=True, exclude_none=True)}
        else:
            answered = result.model_dump(by_alias=True, exclude_none=True)
        answers.append((name, answered, heard.progress))
    return answers


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("d__echo", {"message": "héllo ✓"}),
    ("d__fail", {}),
    ("d__echo", {}),  # the server refuses the arguments
    ("d__big", {"n": 3_000_000}),
    ("d__steps", {"n": 3}),
    ("d__ask", {}),
    ("d__greet", {}),
]


async def _answers(url: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    logs = Heard()
    async with Client(url, logging_callback=logs.on_log, log_level="info") as client:
        await client.list_tools()  # as clients do; a call before any listing takes the usual path
        answers = await answered_each(client, CALLS)
    return answers, logs.logs


@NODE_PROTOCOLS
async def test_passed_through_calls_answer_as_the_usual_path_does(protocol: ProtocolMode) -> None:
    down = Downstream()
    with anyio.fail_after(60):
        async with serve_on_loopback(down.app()) as base:
            url = f"{base}/mcp"
            async with front(url, pass_through=True, protocol=protocol) as (fast_url, layer):
                fast = await _answers(fast_url)
            async with front(url, pass_through=False, protocol=protocol) as (usual_url, off):
                usual = await _answers(usual_url)
    assert layer is not None
    assert off is None
    assert layer.forwarded == len(CALLS)
    assert fast == usual
    answers, logs = fast
    by_name = answers_by_name(answers, logs, protocol=protocol)
    assert len(by_name["d__big"][0]["content"][0]["text"]) == 3_000_000


def _results_of_every_shape() -> ToyServer:
    """A low-level server answering as it likes: text alone (with `_meta`), `_meta` with a
    null, every content kind, and text alone from a tool that declares an output schema."""
    toy = ToyServer("shapes")

    async def plain(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        blocks: list[types.ContentBlock] = [
            types.TextContent(text="a"),
            types.TextContent(text="b"),
        ]
        return types.CallToolResult(content=blocks, _meta={"note": {"n": [1, 2.5]}})

    async def nulled(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[], _meta={"gone": None, "kept": 1}, is_error=True)

    async def kinds(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return content_kinds_result()

    async def unstructured(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return text_result("no structured content")

    toy.add("plain", plain)
    toy.add("nulled", nulled)
    toy.add("kinds", kinds)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    toy.tools["unstructured"] = (
        types.Tool(name="unstructured", input_schema={"type": "object"}, output_schema=schema),
        unstructured,
    )
    return toy


@NODE_PROTOCOLS
async def test_results_of_every_shape_answer_as_the_usual_path_does(protocol: ProtocolMode) -> None:
    names = ["plain", "nulled", "kinds", "unstructured"]
    answers: dict[bool, list[dict[str, Any]]] = {}
    forwarded = 0
    with anyio.fail_after(60):
        async with serve_on_loopback(
            _results_of_every_shape().server.streamable_http_app()
        ) as base:
            for pass_through in (True, False):
                async with (
                    front(f"{base}/mcp", pass_through=pass_through, protocol=protocol) as (
                        url,
                        layer,
                    ),
                    Client(url) as client,
                ):
                    await client.list_tools()
                    answers[pass_through] = [
                        (await _unchecked_call(client, f"d__{name}")).model_dump(by_alias=True)
                        for name in names
                    ]
                    forwarded += layer.forwarded if layer is not None else 0
    assert answers[True] == answers[False]
    assert forwarded == len(names)
    plain, nulled, kinds, unstructured = answers[True]
    assert [block["text"] for block in plain["content"]] == ["a", "b"]
    assert plain["_meta"]["note"] == {"n": [1, 2.5]}
    assert nulled["isError"] is True
    assert nulled["_meta"]["kept"] == 1
    assert len(kinds["content"]) == 6
    # The server's result, though it breaks the tool's output schema: the client may check it.
    assert unstructured["isError"] is False
    assert unstructured["content"][0]["text"] == "no structured content"


async def _unchecked_call(client: Client, name: str) -> types.CallToolResult:
    """The result of calling `name` as the proxy sent it: `Client.call_tool` would check it
    against the tool's output schema first."""
    params = types.CallToolRequestParams(name=name, arguments={})
    request = types.CallToolRequest(params=params)
    return await client.session.send_request(request, types.CallToolResult)


async def test_a_client_that_can_be_asked_passes_through_and_is_asked_in_rounds() -> None:
    down = Downstream()
    answers = ClientAnswers()

    with anyio.fail_after(30):
        async with (
            serve_on_loopback(down.app()) as base,
            front(f"{base}/mcp", pass_through=True) as (url, layer),
            Client(url, **answers.callbacks()) as client,
        ):
            await client.list_tools()
            asked = await client.call_tool("d__ask", {})
    assert layer is not None
    assert layer.forwarded == 1  # its first round (`test_pass_through_rounds`)
    assert asked.content == [types.TextContent(text="user is Ada")]
    assert [params.message for params in answers.elicited] == ["Your name?"]


async def test_a_modern_node_declares_per_call_only_what_the_caller_answers_on_both_paths() -> None:
    down = Downstream()
    answers = ClientAnswers()
    seen: dict[tuple[bool, str], str] = {}

    async def ask_through(url: str, pass_through: bool) -> None:
        elicits = {"elicitation_callback": answers.callbacks()["elicitation_callback"]}
        async with Client(url) as plain, Client(url, **elicits) as one:
            for who, client in (("plain", plain), ("elicits", one)):
                await client.list_tools()
                result = await client.call_tool("d__declared", {})
                seen[pass_through, who] = str(getattr(result.content[0], "text", ""))

    with anyio.fail_after(30):
        async with serve_on_loopback(down.app()) as base:
            for pass_through in (True, False):
                async with front(f"{base}/mcp", pass_through=pass_through, protocol="modern") as (
                    url,
                    layer,
                ):
                    await ask_through(url, pass_through)
                    if layer is not None:
                        assert layer.forwarded == 2
    # The server hears what the call's client can answer, whichever path the call took.
    assert seen == {
        (True, "plain"): "none",
        (True, "elicits"): "elicitation",
        (False, "plain"): "none",
        (False, "elicits"): "elicitation",
    }


@asynccontextmanager
async def two_modern_fronts(
    down: Downstream,
) -> AsyncGenerator[tuple[str, PassThrough | None, PassThrough | None]]:
    """`down` behind two gateways passing calls through, the outer one's node a `modern`
    client of the inner one: the outer one's URL, and the inner and outer layers."""
    async with (
        serve_on_loopback(down.app()) as base,
        front(f"{base}/mcp", pass_through=True, protocol="modern") as (inner_url, inner),
        front(inner_url, pass_through=True, protocol="modern") as (outer_url, outer),
    ):
        yield outer_url, inner, outer


async def test_a_call_through_two_modern_fronts_passes_through_both() -> None:
    down = Downstream()
    with anyio.fail_after(30):
        async with (
            two_modern_fronts(down) as (outer_url, inner, outer),
            Client(outer_url) as client,
        ):
            await client.list_tools()
            echoed = await client.call_tool("d__d__echo", {"message": "two hops"})
            steps = await client.call_tool("d__d__steps", {"n": 2})
    assert echoed.content == [types.TextContent(text="two hops")]
    assert steps.content == [types.TextContent(text="2 steps")]
    # The outer node declared no asking capability to the inner front, so it passed through too.
    assert outer is not None
    assert inner is not None
    assert (outer.forwarded, inner.forwarded) == (2, 2)


@NODE_PROTOCOLS
async def test_a_call_the_client_cancels_is_cancelled_at_the_server(protocol: ProtocolMode) -> None:
    down = Downstream()
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(down.app()) as base,
            front(f"{base}/mcp", pass_through=True, protocol=protocol) as (url, layer),
            Client(url) as client,
        ):
            await client.list_tools()

            async def wait() -> None:
                await client.call_tool("d__wait", {})

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await down.started.wait()
                tg.cancel_scope.cancel()
            await down.cancelled.wait()
            after = await client.call_tool("d__echo", {"message": "still here"})
    assert layer is not None
    assert layer.forwarded == 1
    assert after.content == [types.TextContent(text="still here")]


_KEEP_ALIVES = (b": ping\r\n\r\n", b"\n")


class Pings:
    """ASGI middleware noting the keep-alives in the answers it sends: an event stream's
    `: ping`, or a newline before a JSON body (`pass_through_reply`)."""

    def __init__(self, app: ASGIApp, wanted: int) -> None:
        self.app = app
        self.wanted = wanted
        self.seen = 0
        self.enough = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def noting(message: Message) -> None:
            if message["type"] == "http.response.body" and message["body"] in _KEEP_ALIVES:
                self.seen += 1
                if self.seen == self.wanted:
                    self.enough.set()
            await send(message)

        await self.app(scope, receive, noting)


async def test_a_long_call_is_kept_alive_by_pings_and_then_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pass_through_reply, "_PING_SECONDS", 0.05)
    down = Downstream()
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(down.app()) as base,
            McpToolkit("d", McpServerConfig(url=f"{base}/mcp", protocol="auto")) as node,
        ):
            app = http_app(
                serve(Gateway([node], []), expose_tools=True), HttpOptions("127.0.0.1", 0)
            )
            pings = Pings(app, wanted=3)
            [layer] = [layer for layer in app.state.layers if isinstance(layer, PassThrough)]
            async with (
                serve_on_loopback(pings) as front_base,
                Client(f"{front_base}/mcp") as client,
            ):
                await client.list_tools()
                results: list[types.CallToolResult] = []

                async def call() -> None:
                    results.append(await client.call_tool("d__held", {}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await pings.enough.wait()
                    assert len(layer.watching) == 1
                    down.release.set()
                while layer.watching:  # the answer is complete: its watcher ends by itself
                    await anyio.lowlevel.checkpoint()
    assert layer.forwarded == 1
    assert [result.content for result in results] == [[types.TextContent(text="released")]]
    assert pings.seen >= 3


@NODE_PROTOCOLS
@pytest.mark.parametrize("caller", ["2026-07-28", "on-a-2025-session", "asked-in-rounds"])
async def test_a_call_that_times_out_is_cancelled_and_says_so(
    protocol: ProtocolMode, caller: str
) -> None:
    """Whichever way the call passes through; a client that can be asked has its call
    parked (`pass_through_rounds`), the node call's clock on the parked request's scope."""
    down = Downstream()
    client_keys: dict[str, Any] = {
        "2026-07-28": {},
        "on-a-2025-session": {"mode": "legacy"},
        "asked-in-rounds": ClientAnswers().callbacks(),
    }[caller]
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(down.app()) as base,
            front(
                f"{base}/mcp", pass_through=True, protocol=protocol, timeout=0.5, connect_timeout=30
            ) as (url, layer),
            Client(url, **client_keys) as client,
        ):
            await client.list_tools()
            result = await client.call_tool("d__wait", {})
            await down.cancelled.wait()
    assert layer is not None
    assert layer.forwarded == 1
    assert result.is_error
    assert result.content == [
        types.TextContent(
            text="tool 'd__wait' (node 'd') failed: tool 'd__wait' of MCP server 'd' timed out "
            "(no result or progress for 0.5 s); the call was cancelled"
        )
    ]


async def test_a_restarted_server_is_reached_again() -> None:
    async def run(app: Any, port: int, stop: anyio.Event, *, task_status: Any) -> None:
        try:
            async with serve_on_loopback(app, port) as base:
                task_status.started(base)
                await stop.wait()
        finally:
            stopped.set()

    stop_first, stopped = anyio.Event(), anyio.Event()
    with anyio.fail_after(60):
        async with anyio.create_task_group() as servers:
            base = await servers.start(run, Downstream().app(), 0, stop_first)
            port = int(base.rsplit(":", 1)[1])
            async with front(f"{base}/mcp", pass_through=True) as (url, layer):
                async with Client(url) as client:
                    await client.list_tools()
                    before = await client.call_tool("d__echo", {"message": "one"})
                stop_first.set()  # its sessions end with it; the new one knows none of them
                await stopped.wait()
                await servers.start(run, Downstream().app(), port, anyio.Event())
                async with Client(url) as client:
                    await client.list_tools()
                    after = await client.call_tool("d__echo", {"message": "two"})
                assert layer is not None
                assert before.content == [types.TextContent(text="one")]
                assert after.content == [types.TextContent(text="two")]
            servers.cancel_scope.cancel()


class SeenCalls:
    """ASGI middleware keeping the headers and client port of every `tools/call` POST."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.calls: list[tuple[int, dict[str, str]]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            body, receive = await buffered_body(receive)
            if b'"tools/call"' in body:
                headers: list[tuple[bytes, bytes]] = scope["headers"]
                seen = {k.decode().lower(): v.decode() for k, v in headers}
                self.calls.append((scope["client"][1], seen))
        await self.app(scope, receive, send)


async def test_passed_through_calls_go_out_lean_on_one_kept_connection_with_the_nodes_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOWN_TOKEN", "tok-5e1")
    down = SeenCalls(Downstream().app())
    keys: dict[str, Any] = {"headers": {"X-Team": "blue"}, "bearer_token_env": "DOWN_TOKEN"}
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(down) as base,
            front(f"{base}/mcp", pass_through=True, **keys) as (url, layer),
            Client(url) as client,
        ):
            await client.list_tools()
            for n in range(3):
                result = await client.call_tool("d__echo", {"message": f"call {n}"})
                assert result.content == [types.TextContent(text=f"call {n}")]
    assert layer is not None
    assert layer.forwarded == 3
    assert len(down.calls) == 3
    assert len({port for port, _ in down.calls}) == 1  # one connection, kept between calls
    for _, headers in down.calls:
        assert headers["user-agent"] == "agent-gateway"  # the lean client, not httpx2
        assert headers["authorization"] == "Bearer tok-5e1"
        assert headers["x-team"] == "blue"
        assert headers["mcp-session-id"]


async def test_with_a_proxy_configured_calls_pass_through_on_httpx2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # never used: NO_PROXY covers it
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    down = SeenCalls(Downstream().app())
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(down) as base,
            front(f"{base}/mcp", pass_through=True) as (url, layer),
            Client(url) as client,
        ):
            await client.list_tools()
            result = await client.call_tool("d__echo", {"message": "via httpx2"})
    assert layer is not None
    assert layer.forwarded == 1
    assert result.content == [types.TextContent(text="via httpx2")]
    [(_, headers)] = down.calls
    assert headers["user-agent"].startswith("python-httpx")


async def test_a_node_its_server_asked_to_authorize_passes_calls_through_with_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "file")
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_DIR", str(tmp_path / "oauth"))
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_REDIRECT", "fetch")
    with anyio.fail_after(30):
        async with (
            oauth_world() as world,
            front(world.url, pass_through=True) as (url, layer),
            Client(url) as client,
        ):
            await client.list_tools()
            result = await client.call_tool("d__echo", {"text": "hi"})
    assert result.content == [types.TextContent(text="echo:hi")]
    assert layer is not None
    assert layer.forwarded == 1  # a lean request would have been refused (401): not forwarded
    [call] = [r for r in world.protected.seen if b'"tools/call"' in r.body]
    assert call.headers["authorization"].startswith("Bearer ")  # httpx2's auth flow's
