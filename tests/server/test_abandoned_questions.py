"""A question of a stdio server (server-everything) whose caller abandoned it: the server hears
a refusal at once, and the call no longer stands in the way of another caller's question.

A pipe does not say which call a server's request belongs to, so while a call's question stays
open, another client's question on the same server is ambiguous (`server_requests`). A call
that ends withdraws its questions; a 2025-era client whose connection closes under its question
(it went away without a DELETE) has the question refused. A 2026-07-28 client that gives up a
round says nothing: its call waits for the retry, and another caller's question waits on it
(never put to that call) until its question is refused for it after `contended_round_timeout`;
one that comes back in time keeps its answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from tests.servers.real import everything_stdio
from toolkits import CallContext, result_text
from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.mcp.server_requests import InFlightCall

from .processes import REPO, SCRIPT
from .proxying import ClientAnswers, gateway_front
from .stdio_fronts import stdio_front
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


class GivesUp:
    """A 2026-07-28 client's elicitation callback that fails its first question (refuses it,
    or raises: its SDK ends the call on its side and tells the gateway nothing), then answers."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.asked = 0

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        self.asked += 1
        if self.asked > 1:
            return types.ElicitResult(action="accept", content={"name": "Ada"})
        if self.how == "raises":
            raise RuntimeError("the form could not be shown")
        return types.ErrorData(code=types.INVALID_REQUEST, message="the person said no")


GIVING_UP = ["refuses", "raises"]


GAVE_UP = (MCPError, ExceptionGroup)
"""What the SDK client raises when its callback failed the round (raised: in a group)."""


@pytest.mark.parametrize("how", GIVING_UP)
@pytest.mark.parametrize("pass_through", [True, False], ids=["pass-through", "sdk"])
async def test_a_round_given_up_over_http_gives_way_to_another_clients_question(
    how: str, pass_through: bool
) -> None:
    answers = ClientAnswers()
    with anyio.fail_after(30):  # before: the other call was refused (its question ambiguous)
        async with gateway_front(
            everything_stdio(), pass_through=pass_through, contended_round_timeout=0.2
        ) as (url, _, _):
            async with Client(url, mode="auto", elicitation_callback=GivesUp(how)) as gave_up:
                assert gave_up.protocol_version == "2026-07-28"
                with pytest.raises(GAVE_UP):
                    await gave_up.call_tool("d__trigger-elicitation-request", {})
            # Its call stays parked, its question open at the server, waiting for a retry
            # that never comes: the other client's question waits for it to give way.
            async with Client(url, mode="legacy", **answers.callbacks()) as other:
                result = await other.call_tool("d__trigger-elicitation-request", {})
    assert not result.is_error, result_text(result)
    assert "- Name: Ada" in result_text(result)
    assert len(answers.elicited) == 1


@pytest.mark.parametrize("how", GIVING_UP)
async def test_a_round_given_up_over_stdio_gives_way_to_the_clients_next_question(
    how: str,
) -> None:
    gives_up = GivesUp(how)
    with anyio.fail_after(30):  # before: its next call was refused (its question ambiguous)
        async with (
            stdio_front(everything_stdio(), contended_round_timeout=0.2) as front,
            Client(front.client(), mode="auto", elicitation_callback=gives_up) as client,
        ):
            assert client.protocol_version == "2026-07-28"
            with pytest.raises(GAVE_UP):
                await client.call_tool("d__trigger-elicitation-request", {})
            result = await client.call_tool("d__trigger-elicitation-request", {})
    assert not result.is_error, result_text(result)
    assert "- Name: Ada" in result_text(result)
    assert gives_up.asked == 2


async def test_a_real_stdio_front_gives_way_as_its_config_says(tmp_path: Path) -> None:
    """`serve --stdio` (as Claude Desktop starts it), `contended_round_timeout` in its file."""
    everything = everything_stdio()
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\ncontended_round_timeout = 0.2\n"
        f"[mcpServers.d]\ncommand = {json.dumps(everything.command)}\n"
        f'args = {json.dumps(everything.args)}\nprefix = "always"\n'
    )
    front = StdioServerParameters(
        command=str(SCRIPT),
        args=["serve", "--stdio", "--config", str(config)],
        cwd=str(REPO),
        env=dict(os.environ),  # the SDK passes on only a few variables: PYTHONPATH too
    )
    gives_up = GivesUp("refuses")
    with anyio.fail_after(60):  # before: its next call was refused (its question ambiguous)
        async with Client(front, mode="auto", elicitation_callback=gives_up) as client:
            assert client.protocol_version == "2026-07-28"
            with pytest.raises(GAVE_UP):
                await client.call_tool("d__trigger-elicitation-request", {})
            result = await client.call_tool("d__trigger-elicitation-request", {})
    assert not result.is_error, result_text(result)
    assert "- Name: Ada" in result_text(result)


async def test_a_round_answered_in_time_keeps_its_answer_and_the_other_question_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The slow person answers before `contended_round_timeout` (30 s): nothing is cut short,
    # and the other client's question, which waited for that call to end, is then its own.
    asked, waited_on = anyio.Event(), anyio.Event()
    give_way = InFlightCall.give_way

    def noted(call: InFlightCall) -> float:
        waited_on.set()
        return give_way(call)

    monkeypatch.setattr(InFlightCall, "give_way", noted)

    async def slow_person(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.set()
        await waited_on.wait()
        return types.ElicitResult(action="accept", content={"name": "Bo"})

    answers = ClientAnswers()
    slow_results: list[types.CallToolResult] = []
    results: list[types.CallToolResult] = []
    with anyio.fail_after(30):  # before: the other call was refused (its question ambiguous)
        async with (
            gateway_front(everything_stdio()) as (url, _, _),
            Client(url, mode="auto", elicitation_callback=slow_person) as slow,
            Client(url, mode="legacy", **answers.callbacks()) as other,
        ):
            await other.list_tools()  # the gateway has learnt its tools' names
            assert slow.protocol_version == "2026-07-28"
            async with anyio.create_task_group() as tg:

                async def call_slowly() -> None:
                    tool = "d__trigger-elicitation-request"
                    slow_results.append(await slow.call_tool(tool, {}))

                tg.start_soon(call_slowly)
                await asked.wait()  # its question is the only one: it is that call's
                results.append(await other.call_tool("d__trigger-elicitation-request", {}))
                waited_on.set()  # had it not waited, the person answers now
    assert "- Name: Bo" in result_text(slow_results[0])
    assert not results[0].is_error, result_text(results[0])
    assert "- Name: Ada" in result_text(results[0])


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
