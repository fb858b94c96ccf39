"""Where nothing says which call a server's question belongs to (a pipe, like stdio; a
handshake-era HTTP session's own stream), which caller in flight it goes to: the one client
with calls in flight; with calls of several, nobody, whatever each of them can answer (the
question may be that of one that cannot)."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer, pipe
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import CallContext, result_text
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

ELICITS: dict[str, Any] = {"elicitation": {"form": {}}}


class Answerer:
    """Answers sampling and elicitation as `name`, and records what it was asked."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked: list[types.InputRequest] = []

    async def __call__(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        self.asked.append(request)
        if isinstance(request, types.CreateMessageRequest):
            text = types.TextContent(text="hi")
            return types.CreateMessageResult(role="assistant", content=text, model=self.name)
        return types.ElicitResult(action="accept", content={"name": self.name})


class HangingCatalog(CatalogServer):
    """`CatalogServer` with a tool `hang` that never answers, to keep a call in flight."""

    def __init__(self) -> None:
        super().__init__("asker")
        self.tools["hang"] = types.Tool(name="hang", input_schema={"type": "object"})
        self.hanging = anyio.Event()

    async def _call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.name != "hang":
            return await super()._call_tool(ctx, params)
        self.hanging.set()
        await anyio.Event().wait()
        return text_result("unreachable")


async def while_in_flight(
    bystander: CallContext | None, tool: str, context: CallContext
) -> types.CallToolResult:
    """Call `tool` for `context` while a call for `bystander` hangs on the same pipe."""
    server = HangingCatalog()
    target = lambda: pipe(server.server)  # noqa: E731
    config = McpServerConfig(command="in-process", protocol="legacy")
    result: types.CallToolResult | None = None
    with anyio.fail_after(10):
        async with (
            McpToolkit("asker", config, target=target) as node,
            anyio.create_task_group() as tg,
        ):

            async def hang() -> None:
                await node.call_tool("asker__hang", {}, context=bystander)

            tg.start_soon(hang)
            await server.hanging.wait()
            result = await node.call_tool(f"asker__{tool}", {}, context=context)
            tg.cancel_scope.cancel()
    assert result is not None
    return result


@pytest.mark.parametrize(
    "answerable",
    [None, {}, {"sampling": {}, "roots": {}}],
    ids=["no answer", "answers nothing", "answers other things"],
)
async def test_a_caller_that_cannot_answer_still_makes_a_question_ambiguous(
    answerable: dict[str, Any] | None,
) -> None:
    # The question may be the bystander's own: shown to the asker, its prompt would leak.
    bystander = Answerer("bystander")
    their = None if answerable is None else CallContext(answer=bystander, answerable=answerable)
    asker = Answerer("asker")
    result = await while_in_flight(their, "elicit", CallContext(answer=asker, answerable=ELICITS))
    assert result.is_error
    assert (
        "elicitation/create refused: 2 callers have calls in flight on MCP server 'asker', and "
        "its transport does not say which call this request belongs to"
    ) in result_text(result)
    assert bystander.asked == asker.asked == []


async def test_a_question_of_a_caller_that_cannot_answer_is_not_put_to_another() -> None:
    # A client that declared nothing calls a tool that samples, while one that answers all
    # has a call in flight: the question (its prompt) is not the other's to see.
    able, lacking = Answerer("able"), Answerer("lacking")
    result = await while_in_flight(
        CallContext(answer=able), "sample", CallContext(answer=lacking, answerable={})
    )
    assert result.is_error
    assert "sampling/createMessage refused: 2 callers have calls in flight" in result_text(result)
    assert able.asked == lacking.asked == []


@pytest.mark.parametrize("answerable", [None, ELICITS], ids=["answers all", "elicits"])
async def test_two_callers_that_can_answer_keep_a_question_ambiguous(
    answerable: dict[str, Any] | None,
) -> None:
    bystander, asker = Answerer("bystander"), Answerer("asker")
    result = await while_in_flight(
        CallContext(answer=bystander, answerable=answerable),
        "elicit",
        CallContext(answer=asker, answerable=ELICITS),
    )
    assert result.is_error
    assert "2 callers have calls in flight on MCP server 'asker', and" in result_text(result)
    assert bystander.asked == asker.asked == []


async def test_a_question_no_caller_in_flight_can_answer_is_refused_as_such() -> None:
    # The only caller that can be asked at all declared elicitation; the server samples.
    bystander, asker = Answerer("bystander"), Answerer("asker")
    result = await while_in_flight(
        CallContext(answer=bystander, answerable={}),
        "sample",
        CallContext(answer=asker, answerable=ELICITS),
    )
    assert result.is_error
    assert (
        "sampling/createMessage refused: none of the clients with calls in flight on MCP "
        "server 'asker' declared sampling, so nobody can answer it"
    ) in result_text(result)
    assert bystander.asked == asker.asked == []


async def test_one_client_that_cannot_answer_is_asked_to_say_why() -> None:
    # Its calls are all of one owner: its answerer refuses, saying what its client lacks.
    owner = object()
    refused: list[types.InputRequest] = []

    async def lacks(request: types.InputRequest) -> types.ErrorData:
        refused.append(request)
        return types.ErrorData(code=types.INVALID_REQUEST, message="the client lacks sampling")

    def context() -> CallContext:
        return CallContext(answer=lacks, answerable=ELICITS, owner=owner)

    result = await while_in_flight(context(), "sample", context())
    assert result.is_error
    assert "the client lacks sampling" in result_text(result)
    assert [request.method for request in refused] == ["sampling/createMessage"]


def asking_on_its_own_stream() -> tuple[ToyServer, anyio.Event]:
    """`hang`, and `ask`: logs and samples on the session's own stream (no related request),
    as a server that asks through its session rather than its request does."""
    toy = ToyServer("toy")
    hanging, _ = toy.add_hanging("hang")

    async def ask(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        prompt = types.SamplingMessage(role="user", content=types.TextContent(text="secret"))
        session = ctx.session
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            log = session.send_log_message  # pyright: ignore[reportDeprecated]
            await log("info", "secret", "toy")
            sample = session.create_message  # pyright: ignore[reportDeprecated]
            sampled = await sample([prompt], max_tokens=5)
        return text_result(f"sampled {sampled.content}")

    toy.add("ask", ask)
    return toy, hanging


@pytest.mark.parametrize("raw_calls", [True, False], ids=["raw", "sdk"])
async def test_a_handshake_era_http_session_asking_on_its_own_stream_asks_nobody_else(
    raw_calls: bool,
) -> None:
    # The call that asks is of a client that can answer nothing; another client, in flight,
    # could answer all: it is neither asked nor told the log message.
    toy, hanging = asking_on_its_own_stream()
    able = Answerer("able")
    heard: list[Any] = []

    async def hear(params: types.LoggingMessageNotificationParams) -> None:
        heard.append(params.data)

    lacking = CallContext(answer=Answerer("lacking"), answerable={}, owner="lacking")
    result: types.CallToolResult | None = None
    with anyio.fail_after(20):
        async with serve_on_loopback(toy.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol="legacy")
            async with McpToolkit("toy", config) as node, anyio.create_task_group() as tg:
                node.raw_calls = raw_calls
                bystander = CallContext(answer=able, on_log=hear, owner="able")
                tg.start_soon(lambda: node.call_tool("toy__hang", {}, context=bystander))
                await hanging.wait()
                result = await node.call_tool("toy__ask", {}, context=lacking)
                tg.cancel_scope.cancel()
    assert result is not None
    assert "sampling/createMessage refused: 2 callers have calls in flight" in result_text(result)
    assert able.asked == heard == []
