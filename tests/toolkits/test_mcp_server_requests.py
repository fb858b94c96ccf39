"""A server's requests to its client during a call (sampling, elicitation, roots): who answers."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
import pytest
from pydantic import FileUrl

from tests.servers.catalog import ELICITATION_ID, CatalogServer, pipe, url_elicitation
from tests.servers.inprocess import ToyServer
from toolkits import CallContext, result_text
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.mcp.server_requests import CallsInFlight

pytestmark = pytest.mark.anyio

ERAS: list[ProtocolMode] = ["legacy", "modern"]


def config(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command="in-process", **keys)


class Answerer:
    """Answers every kind of request, and records what it was asked."""

    def __init__(self, name: str = "client") -> None:
        self.name = name
        self.asked: list[types.InputRequest] = []

    async def __call__(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        self.asked.append(request)
        match request:
            case types.CreateMessageRequest():
                return types.CreateMessageResult(
                    role="assistant", content=types.TextContent(text="hi"), model=self.name
                )
            case types.ElicitRequest():
                return types.ElicitResult(action="accept", content={"name": self.name})
            case types.ListRootsRequest():
                return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work"))])


@pytest.mark.parametrize("era", ERAS)
async def test_requests_during_a_call_go_to_whoever_made_it(era: ProtocolMode) -> None:
    server = CatalogServer("asker")
    answerer = Answerer()
    async with McpToolkit("asker", config(protocol=era), target=server.server) as node:
        context = CallContext(answer=answerer)
        sampled = await node.call_tool("asker__sample", {"text": "yo"}, context=context)
        elicited = await node.call_tool("asker__elicit", {}, context=context)
        roots = await node.call_tool("asker__roots", {}, context=context)
    assert result_text(sampled) == "sampled 'hi' from client"
    assert result_text(elicited) == "elicited accept {'name': 'client'}"
    assert result_text(roots) == "roots ['file:///work']"
    assert [request.method for request in answerer.asked] == [
        "sampling/createMessage",
        "elicitation/create",
        "roots/list",
    ]
    sampling = answerer.asked[0]
    assert isinstance(sampling, types.CreateMessageRequest)
    assert sampling.params.messages[0].content == types.TextContent(text="yo")


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_made_for_nobody_has_its_requests_refused(era: ProtocolMode) -> None:
    server = CatalogServer("asker")
    async with McpToolkit("asker", config(protocol=era), target=server.server) as node:
        result = await node.call_tool("asker__sample", {})
    assert result.is_error
    assert "sampling/createMessage refused" in result_text(result)
    assert "not made for an MCP client" in result_text(result)


async def test_over_a_pipe_a_request_goes_to_the_one_client_with_calls_in_flight() -> None:
    # Nothing on a pipe says which call a request belongs to: the calls in flight decide.
    server = CatalogServer("asker")
    answerer = Answerer()
    target = lambda: pipe(server.server)  # noqa: E731
    async with McpToolkit("asker", config(protocol="legacy"), target=target) as node:
        result = await node.call_tool("asker__roots", {}, context=CallContext(answer=answerer))
    assert result_text(result) == "roots ['file:///work']"
    assert len(answerer.asked) == 1


async def test_over_a_pipe_calls_of_two_clients_make_a_request_ambiguous() -> None:
    server = CatalogServer("asker")
    first_asked, release = anyio.Event(), anyio.Event()

    async def slow(request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        first_asked.set()
        await release.wait()
        return types.ListRootsResult(roots=[])

    target = lambda: pipe(server.server)  # noqa: E731
    async with McpToolkit("asker", config(protocol="legacy"), target=target) as node:
        results: list[types.CallToolResult] = []
        second: types.CallToolResult | None = None

        async def first_client() -> None:
            context = CallContext(answer=slow)
            results.append(await node.call_tool("asker__roots", {}, context=context))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(first_client)
                await first_asked.wait()
                context = CallContext(answer=Answerer("second"))
                second = await node.call_tool("asker__sample", {}, context=context)
                release.set()
    assert second is not None
    assert second.is_error
    assert (
        "2 callers have calls in flight on MCP server 'asker', 1 of them waiting on an answer "
        "to an earlier question"
    ) in result_text(second)
    assert result_text(results[0]) == "roots []"


class Unanswered:
    """An answerer whose client never comes back (a 2026-07-28 client that gave up a round),
    until `release`; says when it was asked."""

    def __init__(self) -> None:
        self.asked, self.release = anyio.Event(), anyio.Event()

    async def __call__(self, request: types.InputRequest) -> types.InputResponse:
        self.asked.set()
        await self.release.wait()
        return types.ListRootsResult(roots=[])


async def test_over_a_pipe_a_question_whose_caller_gives_way_is_refused_for_the_next_one() -> None:
    server = CatalogServer("asker")
    gone = Unanswered()
    target = lambda: pipe(server.server)  # noqa: E731
    async with McpToolkit("asker", config(protocol="legacy"), target=target) as node:
        results: list[types.CallToolResult] = []

        async def gave_up() -> None:
            context = CallContext(answer=gone, yield_after=0.05)
            results.append(await node.call_tool("asker__roots", {}, context=context))

        with anyio.fail_after(10):  # before: the second was refused as ambiguous at once
            async with anyio.create_task_group() as tg:
                tg.start_soon(gave_up)
                await gone.asked.wait()
                context = CallContext(answer=Answerer("second"))
                results.append(await node.call_tool("asker__sample", {}, context=context))
    # The first call ended before the second's question was put to its caller.
    assert result_text(results[1]) == "sampled 'hi' from second"
    assert result_text(results[0]) == (
        "the client refused: roots/list refused: its client gave no answer within 0.05 s, and "
        "another caller's question to MCP server 'asker' waited on it"
    )


async def test_a_question_that_stays_ambiguous_without_them_cuts_no_question_short() -> None:
    # One client's calls: one gives way, one does not (a person may take long). Another
    # client's question is ambiguous with or without the first: refused at once, and the
    # first is left its time.
    server = CatalogServer("asker")
    yields, stays = Unanswered(), Unanswered()
    one_client = object()
    target = lambda: pipe(server.server)  # noqa: E731
    async with McpToolkit("asker", config(protocol="legacy"), target=target) as node:
        results: list[types.CallToolResult] = []

        async def call(answer: Unanswered, yield_after: float | None) -> None:
            context = CallContext(answer=answer, owner=one_client, yield_after=yield_after)
            results.append(await node.call_tool("asker__roots", {}, context=context))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, yields, 0.05)
                await yields.asked.wait()
                tg.start_soon(call, stays, None)
                await stays.asked.wait()
                context = CallContext(answer=Answerer("other"))
                results.append(await node.call_tool("asker__sample", {}, context=context))
                yields.release.set()
                stays.release.set()
    assert "2 callers have calls in flight on MCP server 'asker'" in result_text(results[0])
    assert [result_text(result) for result in results[1:]] == ["roots []", "roots []"]


async def test_a_question_the_other_caller_cannot_answer_cuts_no_question_short() -> None:
    server = CatalogServer("asker")
    yields = Unanswered()
    target = lambda: pipe(server.server)  # noqa: E731
    async with McpToolkit("asker", config(protocol="legacy"), target=target) as node:
        results: list[types.CallToolResult] = []

        async def gave_up() -> None:
            context = CallContext(answer=yields, yield_after=0.05)
            results.append(await node.call_tool("asker__roots", {}, context=context))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(gave_up)
                await yields.asked.wait()
                lacking = CallContext(answer=Answerer("other"), answerable={"elicitation": {}})
                results.append(await node.call_tool("asker__sample", {}, context=lacking))
                yields.release.set()
    assert "2 callers have calls in flight on MCP server 'asker'" in result_text(results[0])
    assert result_text(results[1]) == "roots []"


@pytest.mark.parametrize("era", ERAS)
async def test_a_modern_node_declares_per_call_what_the_caller_answers(era: ProtocolMode) -> None:
    everything: dict[str, Any] = {
        "sampling": {"tools": {}},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
    }
    calls = {
        "answers all": CallContext(answer=Answerer()),
        "answers forms": CallContext(
            answer=Answerer(), answerable={"elicitation": {"form": {}}, "tools": {}}
        ),
        "answers nothing": CallContext(answer=Answerer(), answerable={}),
        "no answerer": CallContext(on_progress=None),
        "no context": None,
    }
    server = ToyServer("caps")
    server.add_declared("declared")
    async with McpToolkit("caps", config(protocol=era), target=server.server) as node:
        seen = {
            who: result_text(await node.call_tool("caps__declared", {}, context=context))
            for who, context in calls.items()
        }
        await node.refresh_tools()
    # The node's own requests declare all three, so servers offer the tools that need them.
    assert server.listed_for
    for listed in server.listed_for:
        assert listed is not None
        assert listed.model_dump(mode="json", by_alias=True, exclude_none=True) == everything
    if era == "legacy":  # declared once, for the session
        assert set(seen.values()) == {repr(everything)}
        return
    assert seen == {
        "answers all": repr(everything),
        "answers forms": repr({"elicitation": {"form": {}}}),  # only asking ones, as named
        "answers nothing": "{}",
        "no answerer": "{}",
        "no context": "{}",
    }


async def test_a_call_that_ends_waits_for_the_answers_it_gave_up_to_end() -> None:
    # The answer runs in a task of its own (as in the node's SDK session), and its end is
    # where the caller's client is told that its question is void: that must come first.
    calls = CallsInFlight("asker")
    asked = anyio.Event()
    said: list[str] = []

    async def answer(request: types.InputRequest) -> types.InputResponse:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                for _ in range(5):  # telling the client takes a few turns of the loop
                    await anyio.lowlevel.checkpoint()
                said.append("question withdrawn")
        raise AssertionError("unreachable")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            with calls.track(CallContext(answer=answer)) as call:
                tg.start_soon(calls.answer, types.ListRootsRequest())
                await asked.wait()
            await call.unwound()
            said.append("call ended")
    assert said == ["question withdrawn", "call ended"]


async def test_an_elicitation_complete_goes_to_the_call_whose_caller_was_asked_only() -> None:
    calls = CallsInFlight("asker")
    heard: dict[str, list[str]] = {"asked": [], "bystander": []}

    def context(who: str) -> CallContext:
        async def complete(elicitation_id: str) -> None:
            heard[who].append(elicitation_id)

        return CallContext(answer=Answerer(who), on_elicitation_complete=complete, owner=who)

    with anyio.fail_after(10):
        with calls.track(context("asked")):
            await calls.answer(url_elicitation("2025-11-25"))
            # Another client's call in flight meanwhile, which was asked nothing.
            with calls.track(context("bystander")):
                told = await calls.elicitation_complete(ELICITATION_ID)
                unasked = await calls.elicitation_complete("never-asked")
        after = await calls.elicitation_complete(ELICITATION_ID)  # its call ended
    assert heard == {"asked": [ELICITATION_ID], "bystander": []}
    assert (told, unasked, after) == (True, False, False)
