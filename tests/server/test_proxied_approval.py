"""A server's approval rule holds for MCP clients that call its tools through the gateway
(proxy mode), as it does for agents: the calling client is asked first, and only an approved
call reaches the server.

A real downstream SDK server over HTTP on 127.0.0.1, whose gated tool records each run, behind
a gateway served over stdio (a socket pair, as `serve --stdio` serves its pipes) and over
real HTTP, with the pass-through on; SDK clients of both eras that approve, deny, or cannot be
asked; raw 2026-07-28 rounds for what only the wire shows; and `agent-gateway serve` processes
from a config (`[mcpServers.X] require_approval`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from gateway import ApprovalRule
from gateway.server import HttpOptions
from tests.servers.asgi import serve_on_loopback
from toolkits import result_text
from toolkits.mcp import McpServerConfig

from .processes import REPO, SCRIPT, http_server
from .proxying import gateway_front
from .stdio_fronts import StdioFront, stdio_front
from .support import ERAS
from .test_served_approval import Person

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]
RULES = {"d": ApprovalRule(["delete_*"])}
RULE = "require_approval 'delete_*' of server 'd'"
ASKED = (
    'The call of d__delete_everything with {"what": "all"} needs a person\'s approval '
    f"({RULE}). Allow it?"
)
NOT_ASKED = (
    "The tool call to d__delete_everything did not run: it needs a person's approval "
    f"({RULE}), and this client cannot be asked (it lacks elicitation). Call it from an MCP "
    "client that supports elicitation, or have an agent call it (a stored run waits for "
    "`agent-gateway runs approve`)."
)


class Downstream:
    """An SDK server with a tool an approval rule gates, which records each of its runs."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        server = self.server = MCPServer("down")

        @server.tool()
        def delete_everything(what: str) -> str:
            """Delete everything."""
            self.deleted.append(what)
            return f"deleted {what}"

        @server.tool()
        def echo(message: str) -> str:
            """Say the message back."""
            return message


Front = tuple[Callable[[], Any], Callable[[], int]]
"""What a client connects to (a fresh target each time), and how many calls passed through."""


@asynccontextmanager
async def fronted(down: Downstream, transport: str) -> AsyncGenerator[Front]:
    """The gateway in front of `down`, served over `transport` (`stdio` or `http`)."""
    async with serve_on_loopback(down.server.streamable_http_app(host="127.0.0.1")) as base:
        config = McpServerConfig(url=f"{base}/mcp")
        if transport == "stdio":
            async with stdio_front(config, approvals=RULES) as front:
                yield front.client, lambda: front.forwarded
        else:
            async with gateway_front(config, approvals=RULES) as (url, layer, _):
                assert layer is not None
                yield lambda: url, lambda: layer.forwarded


TRANSPORTS = pytest.mark.parametrize("transport", ["stdio", "http"])


@TRANSPORTS
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("decides", ["approve", "deny", "cannot"])
async def test_a_proxied_call_of_a_gated_tool_runs_only_once_its_client_approves(
    transport: str, era: str, decides: str
) -> None:
    down = Downstream()
    person = Person(
        approve=decides == "approve", message="not today" if decides == "deny" else None
    )
    asking: dict[str, Any] = {} if decides == "cannot" else {"elicitation_callback": person}
    with anyio.fail_after(60):
        async with (
            fronted(down, transport) as (target, forwarded),
            Client(target(), mode=era, **asking) as client,
        ):
            await client.list_tools()  # a call before any listing takes the usual path
            echoed = await client.call_tool("d__echo", {"message": "hi"})
            assert forwarded() == 1  # an ungated tool's call still passes straight through
            result = await client.call_tool("d__delete_everything", {"what": "all"})
            assert forwarded() == 1  # the gated one never does
    assert result_text(echoed) == "hi"
    if decides == "approve":
        assert (result.is_error, result_text(result)) == (False, "deleted all")
        assert down.deleted == ["all"]
        assert person.asked == [ASKED]
        return
    assert result.is_error
    assert down.deleted == []
    if decides == "deny":
        assert person.asked == [ASKED]
        assert result_text(result) == (
            "The user rejected the tool call to d__delete_everything; it did not run. "
            "The user said: not today"
        )
    else:
        assert result_text(result) == NOT_ASKED


STATELESS = (
    "the gateway is served --stateless, where a 2025-11-25 client cannot be asked during a "
    "call: use a 2026-07-28 client (asked between rounds), or serve without --stateless "
    "(behind a load balancer, with sticky sessions)"
)


class Approved(BaseModel):
    ok: bool


async def test_a_2025_client_served_stateless_is_told_why_it_is_not_asked() -> None:
    """It declared elicitation, and was told it lacked it (QA round 8): a stateless request's
    session never saw its `initialize`, and no session carries a question to it mid-call."""
    down = Downstream()
    person = Person(approve=True)
    refused: list[str] = []

    @down.server.tool()
    async def ask(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Ask the client, mid-call."""
        try:
            await ctx.elicit("ok?", Approved)
        except MCPError as exc:
            refused.append(exc.error.message)
            return "not asked"
        return "asked"

    stateless = HttpOptions("127.0.0.1", 0, stateless=True)
    with anyio.fail_after(60):
        async with serve_on_loopback(down.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp")
            async with (
                gateway_front(config, approvals=RULES, options=stateless) as (url, _, _),
                Client(url, mode="legacy", elicitation_callback=person) as client,
            ):
                gated = await client.call_tool("d__delete_everything", {"what": "all"})
                asking = await client.call_tool("d__ask", {})
    assert gated.is_error
    assert result_text(gated) == (
        "The tool call to d__delete_everything did not run: it needs a person's approval "
        f"({RULE}), and {STATELESS}; or have an agent call it (a stored run waits for "
        "`agent-gateway runs approve`)."
    )
    assert down.deleted == []
    assert person.asked == []
    assert (asking.is_error, result_text(asking)) == (False, "not asked")
    assert refused == [f"elicitation/create refused: {STATELESS}"]


MODERN = "2026-07-28"
ASKING_ENVELOPE: JsonObject = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}
KEY = "approve d__delete_everything"
APPROVED: JsonObject = {KEY: {"action": "accept", "content": {"approve": True}}}


class RawModern:
    """A 2026-07-28 client that can be asked, writing raw JSON-RPC lines to a stdio front."""

    def __init__(self, front: StdioFront) -> None:
        self.front = front
        self._ids = 0

    async def ask(self, method: str, **params: Any) -> JsonObject:
        self._ids += 1
        envelope = {**params, "_meta": ASKING_ENVELOPE}
        await self.front.send(
            {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": envelope}
        )
        while True:
            message = await self.front.receive()
            if message.get("id") == self._ids and "method" not in message:
                return message

    async def delete(self, what: str, **more: Any) -> JsonObject:
        return await self.ask(
            "tools/call", name="d__delete_everything", arguments={"what": what}, **more
        )


async def test_a_modern_approval_round_runs_the_call_once_and_only_for_the_call_it_asked_of() -> (
    None
):
    down = Downstream()
    with anyio.fail_after(60):
        async with serve_on_loopback(down.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp")
            async with stdio_front(config, approvals=RULES) as front:
                raw = RawModern(front)
                await raw.ask("server/discover")
                await raw.ask("tools/list")
                # An answer sent with no round's state is no approval: the client is asked.
                first = (await raw.delete("all", inputResponses=APPROVED))["result"]
                assert first["resultType"] == "input_required"
                assert list(first["inputRequests"]) == [KEY]
                assert down.deleted == []
                state = first["requestState"]
                approved = await raw.delete("all", inputResponses=APPROVED, requestState=state)
                assert result_text_of(approved) == "deleted all"
                # The same round sent again (an answer lost on the way) runs nothing twice.
                again = await raw.delete("all", inputResponses=APPROVED, requestState=state)
                assert again["result"] == approved["result"]
                # Nor does it approve the call with other arguments: the state is bound to them.
                other = await raw.delete("more", inputResponses=APPROVED, requestState=state)
                assert "result" not in other, other
                assert front.forwarded == 0
    assert down.deleted == ["all"]


def result_text_of(answer: JsonObject) -> str:
    result = answer["result"]
    assert not result.get("isError"), result
    return "".join(part["text"] for part in result["content"])


class Decides:
    """A client's user who answers each approval form in turn (`approve` or not)."""

    def __init__(self, *decisions: bool) -> None:
        self._decisions = list(decisions)

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": self._decisions.pop(0)})


def _config(directory: Path) -> Path:
    """A config exposing `logged_stdio`'s one tool, which a rule gates."""
    config = directory / "agent-gateway.toml"
    server = REPO / "tests" / "servers" / "logged_stdio.py"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.files]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(server))}]\n"
        'require_approval = ["logged"]\n'
    )
    return config


# Subprocesses import the code under test, wherever this checkout is.
ENV = {"PYTHONPATH": str(REPO)}


@asynccontextmanager
async def serving(transport: str, config: Path) -> AsyncGenerator[StdioServerParameters | str]:
    """What a client connects to: `agent-gateway serve` over `transport`, from `config`."""
    if transport == "stdio":
        args = ["serve", "--stdio", "--config", str(config)]
        yield StdioServerParameters(command=str(SCRIPT), args=args, cwd=REPO, env=ENV)
        return
    async with http_server(config, env=ENV) as served:
        yield served.url


@TRANSPORTS
@pytest.mark.parametrize("era", ERAS)
async def test_a_servers_require_approval_gates_the_calls_agent_gateway_serve_proxies(
    tmp_path: Path, transport: str, era: str
) -> None:
    config, log = _config(tmp_path), tmp_path / "calls.log"
    answers: list[types.CallToolResult] = []
    with anyio.fail_after(90):
        async with (
            serving(transport, config) as target,
            Client(target, mode=era, elicitation_callback=Decides(False, True)) as client,
        ):
            for name in ("denied", "approved"):
                arguments = {"log": str(log), "name": name}
                answers.append(await client.call_tool("files__logged", arguments))
    denied, approved = answers
    assert denied.is_error
    assert result_text(denied).startswith("The user rejected the tool call to files__logged")
    assert (approved.is_error, result_text(approved)) == (False, "approved done")
    assert log.read_text() == "start approved\nend approved\n"
