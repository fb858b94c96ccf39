"""A model's thinking as a person sees it (`thinking_text`), read from each provider's raw
answer as the provider stored it: real-format answers, whole and streamed."""

from __future__ import annotations

from typing import Any

import pytest

from agent import AssistantMessage
from agent.models import AnthropicModel, GeminiModel, OpenAICompatibleModel, thinking_text

from .support import FakeProvider, Sleeps, json_response, retry_policy, sse_response
from .test_anthropic import ASK, CONTENT, TOOLS, thinking_stream
from .test_anthropic import message as anthropic_message
from .test_gemini import PARTS, generated
from .test_openai import completion

pytestmark = pytest.mark.anyio


def said(answer: AssistantMessage) -> str:
    return thinking_text(answer.raw, answer.content)


async def test_anthropic_thinking_blocks_and_a_redacted_one(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        json_response(200, anthropic_message(CONTENT)), sse_response(thinking_stream())
    )
    claude = AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=fake.client(),
                            retry=retry_policy(sleeps))  # fmt: skip
    told = "Two sums; call get-sum twice.\n\n[redacted thinking]"
    assert said(await claude.invoke(ASK, TOOLS)) == told
    assert said(await claude.invoke(ASK, TOOLS, on_token=_ignore)) == told


async def test_gemini_thought_parts(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, generated(PARTS)))
    gemini = GeminiModel("gemini-2.5-flash", api_key="k", http_client=fake.client(),
                         retry=retry_policy(sleeps))  # fmt: skip
    answer = await gemini.invoke(ASK, TOOLS)
    assert said(answer) == "**Adding**\nTwo sums needed."
    assert answer.content == ""  # the thought is not the answer


async def test_reasoning_content_and_a_leading_think_block_of_a_compatible_server(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider(
        json_response(200, completion({"role": "assistant", "content": "42.",
                                       "reasoning_content": "6 * 7 is 42."})),
        json_response(200, completion({"role": "assistant",
                                       "content": "<think>\nSix sevens.\n</think>\n\n42."})),
        json_response(200, completion({"role": "assistant", "content": "42."})),
    )  # fmt: skip
    server = OpenAICompatibleModel("http://127.0.0.1:8080/v1", "qwen3", http_client=fake.client(),
                                   retry=retry_policy(sleeps))  # fmt: skip
    assert said(await server.invoke(ASK, [])) == "6 * 7 is 42."
    tagged = await server.invoke(ASK, [])
    assert (tagged.content, said(tagged)) == ("42.", "Six sevens.")
    assert said(await server.invoke(ASK, [])) == ""


def test_a_think_block_still_in_the_answer_is_not_told_twice() -> None:
    raw: Any = {"model": "m", "message": {"role": "assistant", "content": "<think>x</think>y"}}
    assert thinking_text(raw, "<think>x</think>y") == ""
    assert thinking_text(raw, "y") == "x"
    assert thinking_text(None) == thinking_text("text") == ""


async def _ignore(delta: str) -> None:
    return None
