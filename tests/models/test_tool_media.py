"""A tool's images (and audio, where the provider takes it) reach the model as media it reads:
what each provider's request carries for the same conversation."""

from __future__ import annotations

from typing import Any

import pytest

from agent.errors import ModelHTTPError
from agent.messages import (
    AssistantMessage,
    ChatMessage,
    MediaPart,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent.models import AnthropicModel, GeminiModel, OpenAICompatibleModel, OpenAIModel

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_anthropic import message as anthropic_message
from .test_gemini import generated
from .test_openai import completion

pytestmark = pytest.mark.anyio

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1x1 red PNG, as a tool sends it."""
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
TIFF = "SUkqAAgAAAA="

IMAGE = MediaPart(type="image", media_type="image/png", data=PNG)
AUDIO = MediaPart(type="audio", media_type="audio/wav", data=WAV)
UNREAD = MediaPart(type="image", media_type="image/tiff", data=TIFF)

CHART_TEXT = (
    "here is a chart\n[image: image/png, 70 bytes]\n[audio: audio/wav, 44 bytes]\n"
    '[image: image/tiff, 8 bytes]\n{"chart":"bars"}'
)
CALLS = (
    ToolCall(id="call_chart", name="raw__mixed", arguments={}),
    ToolCall(id="call_time", name="time__now", arguments={}),
)
HISTORY: list[ChatMessage] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="Draw the chart and tell the time."),
    AssistantMessage(tool_calls=CALLS),
    ToolMessage(
        tool_call_id="call_chart",
        name="raw__mixed",
        content=CHART_TEXT,
        media=(IMAGE, AUDIO, UNREAD),
    ),
    ToolMessage(tool_call_id="call_time", name="time__now", content="12:00"),
]


async def test_anthropic_gets_images_inside_the_tool_result(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, anthropic_message([{"type": "text", "text": "ok"}])))
    claude = AnthropicModel(
        "claude-sonnet-4-5", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    await claude.invoke(HISTORY, [])
    results = fake.body()["messages"][2]
    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_chart",
                "content": [
                    {"type": "text", "text": CHART_TEXT},
                    # audio and TIFF: Anthropic reads neither; the text describes them
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                ],
            },
            {"type": "tool_result", "tool_use_id": "call_time", "content": "12:00"},
        ],
    }


async def test_gemini_gets_media_after_the_function_responses_of_the_turn(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, generated([{"text": "ok"}])))
    gemini = GeminiModel(
        "gemini-2.5-flash", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    await gemini.invoke([*HISTORY, UserMessage(content="And in words?")], [])
    contents = fake.body()["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[2]["parts"] == [
        {"functionResponse": {"name": "raw__mixed", "response": {"result": CHART_TEXT}}},
        {"functionResponse": {"name": "time__now", "response": {"result": "12:00"}}},
        {"text": "Returned by raw__mixed (call call_chart):"},
        {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"inlineData": {"mimeType": "audio/wav", "data": WAV}},  # Gemini reads audio too
        {"text": "And in words?"},
    ]


@pytest.mark.parametrize("compatible", [False, True])
async def test_openai_gets_images_in_a_user_message_after_the_tool_messages(
    sleeps: Sleeps, compatible: bool
) -> None:
    answer = completion({"role": "assistant", "content": "ok", "refusal": None})
    fake = FakeProvider(json_response(200, answer))
    client, retry = fake.client(), retry_policy(sleeps)
    gpt = (
        OpenAICompatibleModel(
            "http://127.0.0.1:8080/v1", "qwen2.5-vl", http_client=client, retry=retry
        )
        if compatible
        else OpenAIModel("gpt-4.1-mini", api_key="k", http_client=client, retry=retry)
    )
    await gpt.invoke(HISTORY, [])
    sent: list[dict[str, Any]] = fake.body()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[3] == {"role": "tool", "tool_call_id": "call_chart", "content": CHART_TEXT}
    assert sent[4] == {"role": "tool", "tool_call_id": "call_time", "content": "12:00"}
    assert sent[5]["content"] == [
        {"type": "text", "text": "Returned by raw__mixed (call call_chart):"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


async def test_a_result_without_readable_media_is_sent_as_before(sleeps: Sleeps) -> None:
    unread = [*HISTORY[:3], HISTORY[3].model_copy(update={"media": (UNREAD,)}), HISTORY[4]]
    fake = FakeProvider(
        json_response(200, completion({"role": "assistant", "content": "ok", "refusal": None})),
        json_response(200, anthropic_message([{"type": "text", "text": "ok"}])),
    )
    client, retry = fake.client(), retry_policy(sleeps)
    await OpenAIModel("gpt-4.1-mini", api_key="k", http_client=client, retry=retry).invoke(
        unread, []
    )
    assert [m["role"] for m in fake.body()["messages"]][-1] == "tool"  # no user message of images
    await AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=client, retry=retry).invoke(
        unread, []
    )
    assert fake.body()["messages"][2]["content"][0]["content"] == CHART_TEXT  # a plain string


# What a model that reads no images answers a request with an image: OpenAI's own error body
# for a text-only model, and vLLM's for a model that is not multimodal.
OPENAI_NO_IMAGES = {
    "error": {
        "message": "Invalid content type. image_url is only supported by certain models.",
        "type": "invalid_request_error",
        "param": "messages.[5].content.[1].type",
        "code": None,
    }
}
VLLM_NO_IMAGES = {
    "object": "error",
    "message": "qwen2.5 is not a multimodal model",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}


@pytest.mark.parametrize("refusal", [OPENAI_NO_IMAGES, VLLM_NO_IMAGES])
async def test_a_model_that_reads_no_images_is_sent_their_descriptions_from_then_on(
    sleeps: Sleeps, refusal: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    answer = completion({"role": "assistant", "content": "ok", "refusal": None})
    fake = FakeProvider(
        json_response(400, refusal), json_response(200, answer), json_response(200, answer)
    )
    model = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1", "qwen2.5", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    first = await model.invoke(HISTORY, [])
    second = await model.invoke(HISTORY, [])
    assert (first.content, second.content) == ("ok", "ok")
    assert len(fake.requests) == 3  # refused, sent again without them, then none from the start
    assert fake.body(0)["messages"][-1]["role"] == "user"  # the images' message
    for later in (1, 2):
        sent = fake.body(later)["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
        assert sent[3]["content"] == CHART_TEXT  # the text still describes them
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "refused a request with a tool's images" in warning
    assert "it is sent none from now on" in warning


async def test_a_refusal_that_was_not_about_the_images_stands_and_they_are_sent_again(
    sleeps: Sleeps,
) -> None:
    too_long = {"error": {"message": "context_length_exceeded", "type": "invalid_request_error"}}
    answer = completion({"role": "assistant", "content": "ok", "refusal": None})
    fake = FakeProvider(
        json_response(400, too_long), json_response(400, too_long), json_response(200, answer)
    )
    model = OpenAIModel(
        "gpt-4.1-mini", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelHTTPError, match="context_length_exceeded") as refused:
        await model.invoke(HISTORY, [])
    assert refused.value.status_code == 400
    await model.invoke(HISTORY, [])
    assert fake.body(2)["messages"][-1]["role"] == "user"  # images sent again: not the cause


LLAMACPP_NO_PROJECTOR = {
    "error": {
        "code": 500,
        "message": "image input is not supported - hint: if this is unexpected, you may need "
        "to provide the mmproj",
        "type": "server_error",
    }
}


async def test_a_servers_500_about_images_is_not_retried_before_the_fallback(
    sleeps: Sleeps,
) -> None:
    answer = completion({"role": "assistant", "content": "ok", "refusal": None})
    fake = FakeProvider(json_response(500, LLAMACPP_NO_PROJECTOR), json_response(200, answer))
    model = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1", "qwen2.5", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    assert (await model.invoke(HISTORY, [])).content == "ok"
    assert len(fake.requests) == 2  # refused once, then sent without the images at once
    assert sleeps.delays == []
    assert fake.body(1)["messages"][-1]["role"] == "tool"


async def test_a_500_that_names_images_on_a_request_without_them_is_retried(
    sleeps: Sleeps,
) -> None:
    answer = completion({"role": "assistant", "content": "ok", "refusal": None})
    fake = FakeProvider(json_response(500, LLAMACPP_NO_PROJECTOR), json_response(200, answer))
    model = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1", "qwen2.5", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    assert (await model.invoke([UserMessage(content="hi")], [])).content == "ok"
    assert len(sleeps.delays) == 1
