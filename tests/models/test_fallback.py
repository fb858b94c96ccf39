"""FallbackModel: the next model answers when one fails, and the trace can tell."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from agent.errors import AllModelsFailed, ModelError, ModelHTTPError
from agent.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from agent.model import ServerAddress
from agent.models import AnthropicModel, FallbackModel, OpenAICompatibleModel, OpenAIModel
from agent.scripted import ScriptedModel

from .support import FakeProvider, Sleeps, json_response, raw_of, retry_policy

ASK = [UserMessage(content="Add 1 and 2.")]


class Failing:
    """A model that always fails with `error`, counting its calls."""

    def __init__(self, name: str, error: ModelError) -> None:
        self._name = name
        self._error = error
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    async def invoke(self, messages: Any, tools: Any, *, on_token: Any = None) -> AssistantMessage:
        self.calls += 1
        raise self._error


class Fallbacks:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    async def __call__(self, failed: str, error: ModelError, next_name: str) -> None:
        self.seen.append((failed, str(error), next_name))


@pytest.mark.anyio
async def test_the_next_model_answers_and_the_callback_hears_of_it() -> None:
    broken = Failing(
        "openai:gpt-4.1", ModelHTTPError("HTTP 500", status_code=500, provider="openai")
    )
    backup = ScriptedModel(["from backup"], name="scripted:backup")
    fallbacks = Fallbacks()
    model = FallbackModel([broken, backup], on_fallback=fallbacks)

    answer = await model.invoke(ASK, [])

    assert answer.content == "from backup"
    assert answer.raw == {"model": "scripted:backup"}
    assert fallbacks.seen == [("openai:gpt-4.1", "HTTP 500", "scripted:backup")]
    assert model.name == "fallback(openai:gpt-4.1, scripted:backup)"
    assert broken.calls == 1


@pytest.mark.anyio
async def test_every_failure_is_reported_when_all_fail() -> None:
    first = Failing("a", ModelError("first down"))
    second = Failing("b", ModelError("second down"))
    fallbacks = Fallbacks()
    with pytest.raises(AllModelsFailed) as caught:
        await FallbackModel([first, second], on_fallback=fallbacks).invoke(ASK, [])
    assert [name for name, _ in caught.value.failures] == ["a", "b"]
    assert "first down" in str(caught.value)
    assert "second down" in str(caught.value)
    assert fallbacks.seen == [("a", "first down", "b")]  # no "next" after the last
    assert str(caught.value) == "all 2 models failed: a: first down; b: second down"


@pytest.mark.anyio
async def test_each_model_is_named_once_when_all_fail() -> None:
    """A provider's error starts with its model's name: the summary does not say it twice."""
    first = Failing(
        "openai:gpt-4.1-mini",
        ModelHTTPError("openai:gpt-4.1-mini: HTTP 500: down", status_code=500, provider="openai"),
    )
    second = Failing("gemini:gemini-3-pro-preview", ModelError("gemini:gemini-3-pro-preview: no"))
    with pytest.raises(AllModelsFailed) as caught:
        await FallbackModel([first, second]).invoke(ASK, [])
    assert str(caught.value) == (
        "all 2 models failed: openai:gpt-4.1-mini: HTTP 500: down; gemini:gemini-3-pro-preview: no"
    )


@pytest.mark.anyio
async def test_other_exceptions_and_cancellation_are_not_swallowed() -> None:
    class Boom:
        name = "boom"

        async def invoke(
            self, messages: Any, tools: Any, *, on_token: Any = None
        ) -> AssistantMessage:
            raise RuntimeError("bug")

    backup = ScriptedModel(["unused"])
    with pytest.raises(RuntimeError):
        await FallbackModel([Boom(), backup]).invoke(ASK, [])

    class Slow:
        name = "slow"

        async def invoke(
            self, messages: Any, tools: Any, *, on_token: Any = None
        ) -> AssistantMessage:
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    with anyio.move_on_after(0.01) as scope:
        await FallbackModel([Slow(), backup]).invoke(ASK, [])
    assert scope.cancelled_caught
    assert backup.calls == []


@pytest.mark.anyio
async def test_thinking_from_one_provider_is_not_sent_to_the_next(sleeps: Sleeps) -> None:
    """A run moves from Claude to a local server mid-way: Claude's signed thinking stays with
    Claude, the local server gets the neutral fields."""
    claude_turn = AssistantMessage(
        content="Adding.",
        tool_calls=(ToolCall(id="toolu_1", name="get-sum", arguments={"a": 1, "b": 2}),),
        provider="anthropic",
        raw={
            "model": "anthropic:claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "sum it", "signature": "SIG-abc"},
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "toolu_1", "name": "get-sum", "input": {"a": 1, "b": 2}},
            ],
        },
    )
    history = [*ASK, claude_turn, ToolMessage(tool_call_id="toolu_1", name="get-sum", content="3")]
    claude_side = FakeProvider(
        *(
            json_response(
                529,
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
            for _ in range(2)
        )
    )
    local_side = FakeProvider(
        json_response(
            200,
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "3"},
                        "finish_reason": "stop",
                    }
                ]
            },
        )
    )
    claude = AnthropicModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-x",
        http_client=claude_side.client(),
        retry=retry_policy(sleeps, max_attempts=2),
    )
    local = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1",
        "qwen",
        http_client=local_side.client(),
        retry=retry_policy(sleeps),
    )
    fallbacks = Fallbacks()

    answer = await FallbackModel([claude, local], on_fallback=fallbacks).invoke(history, [])

    assert answer.content == "3"
    assert raw_of(answer)["model"] == "openai-compatible:http://127.0.0.1:8080/v1#qwen"
    chain = FallbackModel([claude, local])
    assert chain.server_of(answer) == ServerAddress("127.0.0.1", 8080)  # who answered
    assert chain.server_of(None) is None  # a failed call went to any of them
    assert claude_side.body()["messages"][1]["content"][0]["signature"] == "SIG-abc"
    sent = local_side.body()["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": "Adding.",
        "tool_calls": [
            {
                "id": "toolu_1",
                "type": "function",
                "function": {"name": "get-sum", "arguments": '{"a": 1, "b": 2}'},
            }
        ],
    }
    assert "SIG-abc" not in local_side.requests[0].content.decode()
    assert fallbacks.seen[0][0] == "anthropic:claude-sonnet-4-5"
    assert "HTTP 529" in fallbacks.seen[0][1]


def context_too_long(tokens: int) -> dict[str, Any]:
    message = (
        f"This model's maximum context length is 128000 tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return {"error": error}


WRONG_KEY = (
    "Incorrect API key provided: sk-proj-****ab12. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)
INVALID_KEY = {
    "error": {
        "message": WRONG_KEY,
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


@pytest.mark.anyio
async def test_a_model_refusing_calls_with_a_client_error_is_warned_of_once_per_cause(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    refusing = FakeProvider(
        json_response(400, context_too_long(130512)),
        json_response(400, context_too_long(131007)),  # the same cause, other numbers
        json_response(401, INVALID_KEY),
        json_response(400, context_too_long(129001)),
    )
    first = OpenAIModel(
        "gpt-4.1-mini", api_key="sk-test", http_client=refusing.client(), retry=retry_policy(sleeps)
    )
    backup = ScriptedModel(["one", "two", "three", "four"], name="scripted:backup")
    model = FallbackModel([first, backup])
    answers = [(await model.invoke(ASK, [])).content for _ in range(4)]
    assert answers == ["one", "two", "three", "four"]
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [
        "openai:gpt-4.1-mini refused a call with HTTP 400, which sending it again does not "
        "mend: the call went on to scripted:backup, as each it refuses so will (said once): "
        + context_too_long(130512)["error"]["message"],
        "openai:gpt-4.1-mini refused a call with HTTP 401, which sending it again does not "
        "mend: the call went on to scripted:backup, as each it refuses so will (said once): "
        + WRONG_KEY,
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [429, 408, 500, 503])
async def test_a_failure_that_may_pass_is_not_warned_of(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    broken = Failing("openai:gpt-4.1", ModelHTTPError("busy", status_code=status, provider="x"))
    backup = ScriptedModel(["ok"], name="scripted:backup")
    assert (await FallbackModel([broken, backup]).invoke(ASK, [])).content == "ok"
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.anyio
async def test_the_last_models_refusal_is_the_error_not_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal = ModelHTTPError("bad request", status_code=400, provider="x")
    model = FallbackModel([Failing("a", ModelError("down")), Failing("b", refusal)])
    with pytest.raises(AllModelsFailed):
        await model.invoke(ASK, [])
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
