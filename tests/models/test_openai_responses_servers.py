"""Any server's Responses API (`openai-responses:URL#MODEL`: vLLM, Ollama, LM Studio, LiteLLM)
against real-format answers: vLLM's for gpt-oss, whose reasoning items carry their text and
no encrypted content (`vllm/entrypoints/openai/responses/harmony.py`)."""

from __future__ import annotations

import base64
import logging
from typing import Any

import httpx
import pytest

from agent.errors import ModelConfigError, ModelHTTPError
from agent.messages import AssistantMessage, ChatMessage, ToolMessage
from agent.models import (
    OpenAICompatibleResponsesModel,
    OpenAIResponsesModel,
    api_key_names,
    model_from_spec,
    spec_without_credentials,
    stored_without_credentials,
    thinking_text,
)

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_openai_responses import ASK, GET_SUM

pytestmark = pytest.mark.anyio

SERVER = "http://127.0.0.1:8000/v1"
SPEC = f"openai-responses:{SERVER}#openai/gpt-oss-20b"
THOUGHT: dict[str, Any] = {
    "id": "rs_4b3f0e9c1a2d4e5f8a7b6c5d4e3f2a1b",
    "summary": [],
    "type": "reasoning",
    "content": [{"text": "The user wants 17 + 25: call get-sum.", "type": "reasoning_text"}],
    "encrypted_content": None,
    "status": None,
}
CALL: dict[str, Any] = {
    "arguments": '{"a": 17, "b": 25}',
    "call_id": "call_9f8e7d6c5b4a4f3e8d2c1b0a9f8e7d6c",
    "name": "get-sum",
    "type": "function_call",
    "id": "fc_9f8e7d6c5b4a4f3e8d2c1b0a9f8e7d6c",
    "status": "completed",
}
SAID: dict[str, Any] = {
    "id": "msg_0c1d2e3f4a5b4c6d8e9f0a1b2c3d4e5f",
    "content": [{"annotations": [], "text": "42.", "type": "output_text", "logprobs": None}],
    "role": "assistant",
    "status": "completed",
    "type": "message",
}


def vllm_response(output: list[dict[str, Any]]) -> dict[str, Any]:
    """A whole answer as vLLM's `/v1/responses` sends it."""
    return {
        "id": "resp_6f1e2d3c4b5a49688776655443322110",
        "created_at": 1767268800,
        "incomplete_details": None,
        "instructions": None,
        "metadata": None,
        "model": "openai/gpt-oss-20b",
        "object": "response",
        "output": output,
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "background": False,
        "max_output_tokens": 130858,
        "max_tool_calls": None,
        "previous_response_id": None,
        "prompt": None,
        "reasoning": None,
        "service_tier": "auto",
        "status": "completed",
        "text": None,
        "top_logprobs": None,
        "truncation": "disabled",
        "usage": {
            "input_tokens": 143,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 41,
            "output_tokens_details": {"reasoning_tokens": 25},
            "total_tokens": 184,
        },
        "user": None,
    }


def at(spec: str, fake: FakeProvider, sleeps: Sleeps, **keys: str) -> OpenAIResponsesModel:
    retry = retry_policy(sleeps, max_attempts=1)
    model = model_from_spec(spec, http_client=fake.client(), api_keys=keys, retry=retry)
    assert isinstance(model, OpenAIResponsesModel)
    return model


@pytest.fixture(autouse=True)
def no_keys_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


async def test_the_servers_responses_api_is_asked_as_a_server_of_its_own(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, vllm_response([THOUGHT, CALL])))
    model = at(f"openai-responses:{SERVER}?api-version=1#openai/gpt-oss-20b", fake, sleeps)
    answer = await model.invoke(ASK, [GET_SUM])

    assert isinstance(model, OpenAICompatibleResponsesModel)
    assert model.name == SPEC
    assert model.max_tools is None  # OpenAI's 128 is OpenAI's
    [request] = fake.requests
    assert str(request.url) == f"{SERVER}/responses?api-version=1"  # the query on every request
    assert "authorization" not in request.headers  # no key: none sent
    body = fake.body()
    assert body["model"] == "openai/gpt-oss-20b"
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    # Strict schemas are OpenAI's: a server's are not asked to be (get-sum's could be).
    assert [tool["strict"] for tool in body["tools"]] == [False]
    assert answer.provider == f"openai-responses:{SERVER}"
    assert answer.tool_calls[0].arguments == {"a": 17, "b": 25}
    assert answer.response_model == "openai/gpt-oss-20b"
    assert answer.usage.reasoning_tokens == 25
    assert thinking_text(answer.raw) == "The user wants 17 + 25: call get-sum."


@pytest.mark.parametrize(
    ("keys", "sent"),
    [
        ({"OPENAI_API_KEY": "sk-real-openai"}, None),
        ({"OPENAI_API_KEY": "sk-real-openai", "OPENAI_COMPATIBLE_API_KEY": "local"}, "local"),
    ],
)
async def test_a_server_is_sent_its_own_key_never_openais(
    keys: dict[str, str], sent: str | None, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-from-env")
    fake = FakeProvider(json_response(200, vllm_response([SAID])))
    await at(SPEC, fake, sleeps, **keys).invoke(ASK, [])
    assert fake.requests[0].headers.get("authorization") == (sent and f"Bearer {sent}")
    assert "sk-real" not in str(fake.requests[0].headers)
    # Nor is the key asked for: installing a config with such a model warns of none.
    assert api_key_names(SPEC) == ()
    assert api_key_names("openai-responses:gpt-5-mini") == ("OPENAI_API_KEY",)


async def test_openais_own_responses_api_still_needs_openais_key() -> None:
    with pytest.raises(ModelConfigError, match="set OPENAI_API_KEY"):
        model_from_spec("openai-responses:ft:gpt-4.1-mini:acme::9aZ3kQ")  # colons, no URL
    model = model_from_spec("openai-responses:gpt-5-mini", api_keys={"OPENAI_API_KEY": "k"})
    assert type(model) is OpenAIResponsesModel


async def test_the_urls_user_and_password_are_basic_auth_said_nowhere(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    def says_it_back(request: httpx.Request) -> httpx.Response:
        said = f"no access for {request.headers['authorization']} (PASS/word)"
        return httpx.Response(401, json={"error": {"message": said}})

    listing = {"object": "list", "data": [{"id": "openai/gpt-oss-20b", "max_model_len": 131072}]}
    fake = FakeProvider(
        json_response(200, vllm_response([SAID])), json_response(200, listing), says_it_back
    )
    spec = "openai-responses:http://bob:PASS%2Fword@127.0.0.1:8000/v1#openai/gpt-oss-20b"
    model = at(spec, fake, sleeps, OPENAI_COMPATIBLE_API_KEY="sk-compat")
    await model.invoke(ASK, [])
    assert await model.context_window() == 131072  # asked of the server, as vLLM lists it
    with pytest.raises(ModelHTTPError) as caught:
        await model.invoke(ASK, [])

    assert model.name == SPEC
    basic = "Basic " + base64.b64encode(b"bob:PASS/word").decode()
    assert [str(r.url) for r in fake.requests] == [
        f"{SERVER}/responses",
        f"{SERVER}/models",
        f"{SERVER}/responses",
    ]
    # The URL's user wins over the one key of every server, which this one is not sent.
    assert [r.headers["authorization"] for r in fake.requests] == [basic] * 3
    said = f"{caught.value} {caught.value.provider_message} {caplog.text}"
    assert "PASS" not in said
    assert basic.removeprefix("Basic ") not in said
    assert "no access for Basic *** (***)" in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "stored"),
    [
        (
            "openai-responses:http://bob:p%40ss@127.0.0.1:8000/v1?v=1#openai/gpt-oss-20b",
            "openai-responses:http://bob:***@127.0.0.1:8000/v1?v=1#openai/gpt-oss-20b",
        ),
        (
            "openai-responses:https://litellm.corp.example/v1?api_key=K%2B#gpt-5",
            "openai-responses:https://litellm.corp.example/v1?api_key=***#gpt-5",
        ),
        ("openai-responses:https://TOKEN@[::1]/v1#m", "openai-responses:https://***@[::1]/v1#m"),
        ("openai-responses:gpt-5-mini", "openai-responses:gpt-5-mini"),
    ],
)
def test_a_servers_spec_is_stored_without_its_credentials(spec: str, stored: str) -> None:
    assert spec_without_credentials(spec) == stored
    assert stored_without_credentials(stored) == (stored != spec)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (f"openai-responses:{SERVER}", "needs a base URL and a model"),
        (f"openai-responses:{SERVER}#", "needs a base URL and a model"),
        ("openai-responses:127.0.0.1:8000/v1#m", "must be http"),
        ("openai-responses:ftp://127.0.0.1/v1#m", "must be http"),
    ],
)
def test_a_servers_spec_without_its_url_or_model_is_a_clear_error(spec: str, said: str) -> None:
    with pytest.raises(ModelConfigError, match=said):
        model_from_spec(spec)


def conversation(answer: AssistantMessage) -> list[ChatMessage]:
    """`ASK`, the model's call, and the call's result."""
    [call] = answer.tool_calls
    return [*ASK, answer, ToolMessage(tool_call_id=call.id, name=call.name, content="42")]


async def test_reasoning_goes_back_to_the_server_it_came_from_alone(sleeps: Sleeps) -> None:
    outputs = [[THOUGHT, CALL], [SAID], [SAID], [SAID]]
    fake = FakeProvider(*(json_response(200, vllm_response(output)) for output in outputs))
    asked = await at(SPEC, fake, sleeps).invoke(ASK, [GET_SUM])
    messages = conversation(asked)
    other = "openai-responses:http://127.0.0.1:8001/v1#openai/gpt-oss-20b"
    for spec in (SPEC, other, "openai-responses:gpt-5-mini"):
        await at(spec, fake, sleeps, OPENAI_API_KEY="sk-k").invoke(messages, [GET_SUM])
    same, another, openai = (fake.body(n)["input"][len(ASK) :] for n in (1, 2, 3))
    output = {"type": "function_call_output", "call_id": CALL["call_id"], "output": "42"}
    # Its reasoning's text is how gpt-oss on vLLM keeps reasoning from one step to the next.
    assert same == [THOUGHT, CALL, output]
    plain = {k: CALL[k] for k in ("type", "call_id", "name", "arguments")}
    assert another == openai == [plain, output]


async def test_a_malformed_call_goes_back_to_a_server_as_an_empty_object(sleeps: Sleeps) -> None:
    """Ollama parses a replayed call's arguments, and refuses the request when it cannot."""
    malformed = {**CALL, "arguments": '{"a": 17, "b": '}
    fake = FakeProvider(
        *(json_response(200, vllm_response(output)) for output in ([malformed], [SAID], [SAID]))
    )
    asked = await at(SPEC, fake, sleeps).invoke(ASK, [GET_SUM])
    assert asked.tool_calls[0].invalid_arguments == malformed["arguments"]
    await at(SPEC, fake, sleeps).invoke(conversation(asked), [GET_SUM])
    await at("openai-responses:gpt-5-mini", fake, sleeps, OPENAI_API_KEY="k").invoke(
        conversation(asked), [GET_SUM]
    )
    server, openai = (fake.body(n)["input"][len(ASK)] for n in (1, 2))
    assert server == {**malformed, "arguments": "{}"}
    assert openai["arguments"] == malformed["arguments"]  # OpenAI takes its model's own text
