"""Over a pipe (like stdio), which caller in flight a server's question goes to: only callers
that can answer it (have `answer`, declared its capability) are candidates."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.servers.catalog import CatalogServer, pipe
from tests.servers.inprocess import Context, text_result
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
async def test_a_caller_that_cannot_answer_does_not_make_a_question_ambiguous(
    answerable: dict[str, Any] | None,
) -> None:
    bystander = Answerer("bystander")
    their = None if answerable is None else CallContext(answer=bystander, answerable=answerable)
    asker = Answerer("asker")
    result = await while_in_flight(their, "elicit", CallContext(answer=asker, answerable=ELICITS))
    assert result_text(result) == "elicited accept {'name': 'asker'}"
    assert [request.method for request in asker.asked] == ["elicitation/create"]
    assert bystander.asked == []


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
