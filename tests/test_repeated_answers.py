"""Two answers in a row that the agent sends back may be equal (a provider that reports no
usage, a model repeating itself): the model still reads each of its answers, in order, each
followed by its own correction. The state goes through JSON between steps, as a stored run's
does (which drops what told the two answers apart, such as a response id)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from agent import (
    AgentItem,
    AgentOptions,
    AgentResult,
    AssistantMessage,
    ChatMessage,
    ChatModel,
    EngineRequest,
    EngineResponse,
    TokenCallback,
    ToolDefinition,
    ToolsAgent,
)
from agent.models import GeminiModel, OpenAICompatibleModel
from agent.output import OutputSchema
from tests.models.support import FakeProvider, Sleeps, json_response, retry_policy

pytestmark = pytest.mark.anyio

ITEMS = [AgentItem(prompt="What is 1 + 2?")]


async def stored_steps(agent: ToolsAgent) -> AgentResult:
    """The agent's steps until it finishes; none of them asks for a tool."""
    response: EngineResponse | None = None
    for _ in range(5):
        step = await agent.step(ITEMS, response)
        if isinstance(step, AgentResult):
            return step
        stored = EngineRequest.model_validate_json(step.model_dump_json())
        assert stored.actions == []
        response = EngineResponse(action_responses=[], metadata=stored.metadata)
    raise AssertionError("the agent did not finish")


def completion(content: str) -> dict[str, Any]:
    """A llama.cpp-style chat completion: no usage reported."""
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 1750000000,
        "model": "qwen2.5-coder-1.5b-instruct",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }


def unreadable_call() -> dict[str, Any]:
    """Gemini's answer when it wrote a function call it could not parse."""
    return {
        "candidates": [{"finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}],
        "usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mPLcaNP2J7nN7M8PqKvYgAg",
    }


def gemini_text(text: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 60, "candidatesTokenCount": 2},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "nQLcaMP5K8oN7M8PqLvZhBh",
    }


async def test_the_same_invalid_answer_twice_is_read_twice_each_with_its_correction() -> None:
    wrong = '{"total": "nope"}'
    fake = FakeProvider(
        *(json_response(200, completion(text)) for text in (wrong, wrong, '{"total": 3}'))
    )
    model: ChatModel = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1", "qwen", http_client=fake.client(), retry=retry_policy(Sleeps())
    )
    schema = OutputSchema.from_json_schema(
        {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    )
    agent = ToolsAgent(model=model, options=AgentOptions(output=schema, output_retries=2))
    result = await stored_steps(agent)
    assert result.items[0].structured == {"total": 3}
    sent = [(m["role"], m["content"]) for m in fake.body()["messages"]]
    correction = sent[3]
    assert correction[0] == "user"
    assert correction[1].startswith("Error: the answer does not fit the output schema")
    assert sent[1:] == [
        ("user", "What is 1 + 2?"),
        ("assistant", wrong),
        correction,
        ("assistant", wrong),
        correction,
    ]


class Recording:
    """The model it wraps, noting the messages of every call (Gemini's wire folds an empty
    answer away, so what the agent asked is read here)."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self.calls: list[list[ChatMessage]] = []

    @property
    def name(self) -> str:
        return self._model.name

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        self.calls.append(list(messages))
        return await self._model.invoke(messages, tools, on_token=on_token)


async def test_an_unreadable_call_twice_is_read_twice_each_with_its_correction() -> None:
    fake = FakeProvider(
        json_response(200, unreadable_call()),
        json_response(200, unreadable_call()),
        json_response(200, gemini_text("3")),
    )
    gemini = GeminiModel(
        "gemini-2.5-flash",
        api_key="AIzaSyTest-0123456789abcdef",
        http_client=fake.client(),
        retry=retry_policy(Sleeps()),
    )
    model = Recording(gemini)
    result = await stored_steps(ToolsAgent(model=model))
    assert result.items[0].output == "3"
    sent = [(m.role, m.content) for m in model.calls[-1]]
    asked_again = sent[3]
    assert asked_again[0] == "user"
    assert asked_again[1].startswith("Error: your last tool call could not be read")
    assert sent[1:] == [
        ("user", "What is 1 + 2?"),
        ("assistant", ""),
        asked_again,
        ("assistant", ""),
        asked_again,
    ]
