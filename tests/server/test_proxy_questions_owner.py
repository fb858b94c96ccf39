"""Proxy mode over a stdio downstream (server-everything): while calls of two clients are in
flight, a server's question mid-call is put to neither of them.

A pipe does not say which call a request belongs to (`toolkits.mcp.server_requests`): the
question may be that of a client that declared nothing to answer it with, whose prompt is no
other client's to see, so a call of any client makes it ambiguous.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from toolkits import result_text

from ..servers.real import everything_stdio
from .proxying import ClientAnswers, gateway_front
from .support import ERAS

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


class Started:
    """A progress callback that says when the call it follows is running at the server."""

    def __init__(self) -> None:
        self.running = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.running.set()


async def beside_a_long_call(
    other_era: str,
    asker_era: str,
    pass_through: bool,
    tool: str,
    arguments: dict[str, Any],
    **asker: Any,
) -> types.CallToolResult:
    """`tool` called with `arguments` by a client given `asker` callbacks, while a client
    that declared nothing it could be asked has a long call in flight on the same server."""
    started = Started()
    result: types.CallToolResult | None = None
    with anyio.fail_after(60):
        async with (
            gateway_front(everything_stdio(), pass_through=pass_through) as (url, _, _),
            Client(url, mode=other_era) as other,
            Client(url, mode=asker_era, **asker) as client,
            anyio.create_task_group() as tg,
        ):

            async def long_call() -> None:
                await other.call_tool(
                    "d__trigger-long-running-operation",
                    {"duration": 60, "steps": 240},
                    progress_callback=started,
                )

            tg.start_soon(long_call)
            await started.running.wait()
            result = await client.call_tool(f"d__{tool}", arguments)
            tg.cancel_scope.cancel()
    assert result is not None
    return result


@pytest.mark.parametrize("pass_through", [True, False], ids=["pass-through", "sdk"])
@pytest.mark.parametrize("asker_era", ERAS)
@pytest.mark.parametrize("other_era", ERAS)
async def test_a_question_beside_another_clients_call_is_refused_as_ambiguous(
    other_era: str, asker_era: str, pass_through: bool
) -> None:
    answers = ClientAnswers()
    elicited = await beside_a_long_call(
        other_era,
        asker_era,
        pass_through,
        "trigger-elicitation-request",
        {},
        elicitation_callback=answers.elicit,
    )
    assert elicited.is_error
    assert (
        "elicitation/create refused: 2 callers have calls in flight on MCP server 'd', and its "
        "transport does not say which call this request belongs to"
    ) in result_text(elicited)
    assert answers.elicited == []


@pytest.mark.parametrize("pass_through", [True, False], ids=["pass-through", "sdk"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_question_of_a_client_that_cannot_answer_is_not_put_to_another(
    era: str, pass_through: bool
) -> None:
    # The other client could answer; the prompt is the asker's, who declared no sampling.
    other = ClientAnswers()
    started = Started()
    sampled: types.CallToolResult | None = None
    with anyio.fail_after(60):
        async with (
            gateway_front(everything_stdio(), pass_through=pass_through) as (url, _, _),
            Client(url, mode=era, **other.callbacks()) as able,
            Client(url, mode=era) as lacking,
            anyio.create_task_group() as tg,
        ):

            async def long_call() -> None:
                await able.call_tool(
                    "d__trigger-long-running-operation",
                    {"duration": 60, "steps": 240},
                    progress_callback=started,
                )

            tg.start_soon(long_call)
            await started.running.wait()
            sampled = await lacking.call_tool("d__trigger-sampling-request", {"prompt": "mine"})
            tg.cancel_scope.cancel()
    assert sampled is not None
    assert sampled.is_error
    assert "sampling/createMessage refused: 2 callers have calls in flight" in result_text(sampled)
    assert other.sampled == other.elicited == []


@pytest.mark.parametrize("asker_era", ERAS)
async def test_a_question_no_caller_can_answer_is_refused_as_such(asker_era: str) -> None:
    answers = ClientAnswers()  # elicitation only: the server asks for sampling
    sampled = await beside_a_long_call(
        "auto",
        asker_era,
        True,
        "trigger-sampling-request",
        {"prompt": "hi"},
        elicitation_callback=answers.elicit,
    )
    assert sampled.is_error
    assert (
        "sampling/createMessage refused: none of the clients with calls in flight on MCP "
        "server 'd' declared sampling, so nobody can answer it"
    ) in result_text(sampled)
    assert answers.sampled == answers.elicited == []
