"""What a 2026-07-28 round sent again gets (`served.round_replays`): the first answer while it
is kept, waited for while the first still runs; and what is remembered stays bounded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import mcp_types as types
import pytest

from gateway.server.served.round_replays import RoundReplays, round_key

pytestmark = pytest.mark.anyio

Answer = types.CallToolResult | types.InputRequiredResult

APPROVED: dict[str, types.InputResponse] = {
    "approve tool 0 a": types.ElicitResult(action="accept", content={"approve": True})
}


def _answer(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def test_a_round_is_the_agent_the_caller_and_the_state_and_its_answers_are_apart() -> None:
    state, answers = round_key("assistant", "token-1", "{state}", APPROVED)
    assert round_key("assistant", "token-1", "{state}", APPROVED) == (state, answers)
    assert round_key("assistant", "token-2", "{state}", APPROVED)[0] != state
    assert round_key("other", "token-1", "{state}", APPROVED)[0] != state
    denied = {"approve tool 0 a": types.ElicitResult(action="decline")}
    assert round_key("assistant", "token-1", "{state}", denied) == (
        state,
        round_key("assistant", None, "", denied)[1],
    )


async def test_a_round_sent_while_the_first_runs_waits_for_its_answer() -> None:
    rounds = RoundReplays()
    key = round_key("assistant", None, "{state}", APPROVED)
    release, started = anyio.Event(), anyio.Event()
    ran: list[str] = []

    async def first() -> types.CallToolResult:
        ran.append("first")
        started.set()
        await release.wait()
        return _answer("done")

    async def second() -> types.CallToolResult:
        ran.append("second")
        return _answer("done again")

    answers: list[types.CallToolResult | types.InputRequiredResult] = []

    async def send(answer: Callable[[], Awaitable[types.CallToolResult]]) -> None:
        answers.append(await rounds.once(key, "assistant", answer))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(send, first)
            await started.wait()
            tg.start_soon(send, second)
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert ran == ["first"]
    assert answers == [_answer("done"), _answer("done")]


async def test_only_the_latest_answers_are_kept_and_rounds_are_forgotten_when_their_state_expires() -> (
    None
):
    rounds = RoundReplays(kept_answers=1)
    keys = [round_key("assistant", None, f"{{state {n}}}", APPROVED) for n in range(2)]
    for n, key in enumerate(keys):
        await rounds.once(key, "assistant", lambda n=n: _ok(n))
    dropped = await rounds.once(keys[0], "assistant", lambda: _ok(9))
    assert isinstance(dropped, types.CallToolResult)
    kept = await rounds.once(keys[1], "assistant", lambda: _ok(9))
    assert dropped.is_error  # remembered as answered: not run again
    assert dropped.content == [
        types.TextContent(
            text="agent 'assistant': this round was answered already, but its answer is no "
            "longer kept. Call the tool again to start over."
        )
    ]
    assert kept == _answer("answer 1")

    expiring = RoundReplays(keep=0)  # a state is refused by then: nothing is kept for it
    await expiring.once(keys[0], "assistant", lambda: _ok(0))
    await expiring.once(keys[1], "assistant", lambda: _ok(1))
    assert expiring.remembered == 1  # the round just answered


async def _ok(n: int) -> types.CallToolResult:
    return _answer(f"answer {n}")


async def test_a_round_that_decided_nothing_is_not_remembered_and_other_answers_wait_for_it() -> (
    None
):
    """Its questions asked again (no answer of them sent), a round stays open: answers sent
    while it ran are taken once it ends, not refused as other answers."""
    rounds = RoundReplays()
    unanswered = round_key("assistant", None, "{state}", {})
    answered = round_key("assistant", None, "{state}", APPROVED)
    asked = types.InputRequiredResult(request_state="{state}")
    release, started = anyio.Event(), anyio.Event()

    async def ask_again() -> types.InputRequiredResult:
        started.set()
        await release.wait()
        return asked

    def decides(answer: Answer) -> bool:
        return answer != asked

    answers: list[Answer] = []

    async def send(key: tuple[str, str], answer: Callable[[], Awaitable[Answer]]) -> None:
        answers.append(await rounds.once(key, "assistant", answer, decides=decides))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(send, unanswered, ask_again)
            await started.wait()
            tg.start_soon(send, answered, lambda: _ok(1))
            await anyio.wait_all_tasks_blocked()
            release.set()
    assert answers == [asked, _answer("answer 1")]
    assert rounds.remembered == 1  # the round its answers decided
    refused = await rounds.once(unanswered, "assistant", lambda: _ok(2))
    assert isinstance(refused, types.CallToolResult)
    assert refused.is_error
    assert refused.content == [
        types.TextContent(
            text="agent 'assistant': this round was answered already, with other answers, "
            "and its decision stands. Call the tool again to start over."
        )
    ]
