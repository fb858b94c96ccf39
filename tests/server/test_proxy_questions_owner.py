"""Proxy mode over a stdio downstream (server-everything): a server's question mid-call goes to
the one caller in flight that can answer it, whatever other clients' calls are in flight.

A pipe does not say which call a request belongs to, so the node picks among its calls in
flight (`toolkits.mcp.server_requests`): a call whose client declared nothing to answer it with
is no candidate, and must not make the question ambiguous.
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
async def test_a_question_goes_to_the_one_caller_that_can_answer_it(
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
    assert not elicited.is_error, result_text(elicited)
    assert "- Name: Ada" in result_text(elicited)
    assert len(answers.elicited) == 1


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
