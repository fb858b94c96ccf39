"""A question of a stdio server (server-everything) whose caller abandoned it: the server hears
a refusal at once, and the call no longer stands in the way of another caller's question.

A pipe does not say which call a server's request belongs to, so while a call's question stays
open, another client's question on the same server is ambiguous (`server_requests`). A call
that ends withdraws its questions; a 2025-era client whose connection closes under its question
(it went away without a DELETE) has the question refused. A 2026-07-28 client that gives up a
round says nothing: its call waits for the retry, and meanwhile another client's question is
refused at once, never put to that call.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from tests.servers.real import everything_stdio
from toolkits import CallContext, result_text
from toolkits.mcp import McpServerConfig, McpToolkit

from .proxying import ClientAnswers, gateway_front
from .support import ERAS
from .test_pass_through_sessions import RawSession

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ELICITS: dict[str, Any] = {"elicitation": {"form": {}}}


class Abandoned:
    """A caller's `answer` that never answers, and says when it was asked and let go."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.let_go = anyio.Event()

    async def __call__(self, request: types.InputRequest) -> types.InputResponse:
        self.asked.set()
        try:
            await anyio.Event().wait()
        finally:
            self.let_go.set()
        raise AssertionError("unreachable")


async def answered_as(name: str, request: types.InputRequest) -> types.InputResponse:
    assert isinstance(request, types.ElicitRequest)
    return types.ElicitResult(action="accept", content={"name": name})


async def test_a_call_that_ends_withdraws_its_question_at_once() -> None:
    abandoned = Abandoned()
    with anyio.fail_after(30):
        async with McpToolkit("d", everything_stdio()) as node:
            async with anyio.create_task_group() as tg:

                async def given_up() -> None:
                    context = CallContext(answer=abandoned, owner=object(), answerable=ELICITS)
                    await node.call_tool("d__trigger-elicitation-request", {}, context=context)

                tg.start_soon(given_up)
                await abandoned.asked.wait()
                tg.cancel_scope.cancel()  # its client gave up on the call
            await abandoned.let_go.wait()  # before: only after ANSWER_TIMEOUT (600 s)

            async def answer(request: types.InputRequest) -> types.InputResponse:
                return await answered_as("Bo", request)

            context = CallContext(answer=answer, owner=object(), answerable=ELICITS)
            result = await node.call_tool("d__trigger-elicitation-request", {}, context=context)
    assert not result.is_error, result_text(result)
    assert "- Name: Bo" in result_text(result)


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_gone_under_its_question_leaves_the_next_client_answered(
    era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = ClientAnswers()
    elicits: dict[str, Any] = {"elicitation_callback": answers.elicit}  # its names, not the SDK's
    with anyio.fail_after(60):
        async with (
            gateway_front(everything_stdio(), pass_through=True) as (url, layer, _),
            httpx2.AsyncClient() as http,
            Client(url, mode=era, **elicits) as other,
        ):
            await other.list_tools()  # the gateway has learnt its tools' names
            assert layer is not None
            ended = anyio.Event()
            answer = layer.passing.answer

            async def answered(*args: Any, **kwargs: Any) -> bool:
                try:
                    return await answer(*args, **kwargs)
                finally:
                    ended.set()

            monkeypatch.setattr(layer.passing, "answer", answered)

            gone = RawSession(http, url, "2025-11-25")
            await gone.open(ELICITS)
            call = gone.call("d__trigger-elicitation-request", {})
            async with http.stream("POST", url, json=call, headers=gone.headers()) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data:") and json.loads(line[5:]).get("method"):
                        break  # the question came: the client goes, saying nothing
            await ended.wait()  # before: only after ANSWER_TIMEOUT (600 s)

            result = await other.call_tool("d__trigger-elicitation-request", {})
    assert not result.is_error, result_text(result)
    assert "- Name: Ada" in result_text(result)
    assert len(answers.elicited) == 1


@pytest.mark.parametrize("pass_through", [True, False], ids=["pass-through", "sdk"])
async def test_a_question_whose_call_its_client_cancels_is_withdrawn_from_it(
    pass_through: bool,
) -> None:
    shown, closed = anyio.Event(), anyio.Event()

    async def form(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        shown.set()
        try:
            await anyio.sleep_forever()
        finally:
            closed.set()  # the client was told the question is void
        raise AssertionError("unreachable")

    shows: dict[str, Any] = {"elicitation_callback": form}
    with anyio.fail_after(30):
        async with (
            gateway_front(everything_stdio(), pass_through=pass_through) as (url, layer, _),
            Client(url, mode="legacy", **shows) as client,
        ):
            await client.list_tools()  # the gateway has learnt its tools' names
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    await client.call_tool("d__trigger-elicitation-request", {})

                tg.start_soon(call)
                await shown.wait()
                tg.cancel_scope.cancel()  # the client cancels the call
            await closed.wait()  # before: only when its person answered
            answer = await client.call_tool("d__echo", {"message": "still here"})
            forwarded = None if layer is None else layer.forwarded
    assert result_text(answer) == "Echo: still here"
    assert forwarded == (2 if pass_through else None)


async def test_a_round_given_up_makes_another_clients_question_ambiguous_at_once() -> None:
    async def refuses(ctx: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        return types.ErrorData(code=types.INVALID_REQUEST, message="the person said no")

    answers = ClientAnswers()  # it could answer the other client's sampling, were it asked
    asks: dict[str, Any] = {"sampling_callback": answers.sample, "elicitation_callback": refuses}

    with anyio.fail_after(30):  # before: the second call hung until its node's 60 s timeout
        async with gateway_front(everything_stdio()) as (url, _, _):
            async with Client(url, mode="auto", **asks) as gave_up:
                assert gave_up.protocol_version == "2026-07-28"
                with pytest.raises(MCPError, match="the person said no"):
                    await gave_up.call_tool("d__trigger-elicitation-request", {})
            # Its call stays parked, waiting for a retry that never comes.
            async with Client(url, mode="legacy") as lacking:
                sampled = await lacking.call_tool("d__trigger-sampling-request", {"prompt": "hi"})
    assert sampled.is_error
    assert (
        "sampling/createMessage refused: 2 callers have calls in flight on MCP server 'd', 1 of "
        "them waiting on an answer to an earlier question"
    ) in result_text(sampled)
    assert answers.sampled == []


async def test_a_question_whose_prompt_request_its_client_cancels_is_withdrawn_from_it() -> None:
    # As for a call: over HTTP the withdrawal must go before the request's answer ends it.
    asker = CatalogServer("asker")
    asker.add_prompt("ask")  # it asks the client for a sampling first
    shown, closed = anyio.Event(), anyio.Event()

    async def sample(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        shown.set()
        try:
            await anyio.sleep_forever()
        finally:
            closed.set()  # the client was told the question is void
        raise AssertionError("unreachable")

    with anyio.fail_after(30):
        async with serve_on_loopback(asker.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol="legacy")
            async with (
                gateway_front(config, pass_through=False) as (url, _, _),
                Client(url, mode="legacy", sampling_callback=sample) as client,
            ):
                async with anyio.create_task_group() as tg:

                    async def get() -> None:
                        await client.get_prompt("d__ask")

                    tg.start_soon(get)
                    await shown.wait()
                    tg.cancel_scope.cancel()  # the client cancels the request
                await closed.wait()  # before: only when its person answered
                listed = await client.list_prompts()
    assert [prompt.name for prompt in listed.prompts] == ["d__ask"]
