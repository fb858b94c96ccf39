"""Where a model's requests go: the SDKs' base URL variables, queries kept, extra body fields."""

from __future__ import annotations

import httpx
import pytest
from pydantic import JsonValue

from agent import UserMessage
from agent.errors import ModelConfigError, ModelConnectionError
from agent.models import (
    AnthropicModel,
    GeminiModel,
    ModelSettings,
    OpenAICompatibleModel,
    OpenAIModel,
    model_from_spec,
)
from agent.models.spec import BASE_URLS

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_anthropic import message as anthropic_message
from .test_gemini import generated
from .test_openai import completion

pytestmark = pytest.mark.anyio

ASK = [UserMessage(content="hi")]
KEYS = {"OPENAI_API_KEY": "k1", "ANTHROPIC_API_KEY": "k2", "GEMINI_API_KEY": "k3"}


@pytest.fixture(autouse=True)
def no_base_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable, _, _ in BASE_URLS.values():
        monkeypatch.delenv(variable, raising=False)


def _answer(spec: str) -> dict[str, object]:
    if spec.startswith("anthropic"):
        return anthropic_message([{"type": "text", "text": "ok"}], "end_turn")
    if spec.startswith("gemini"):
        return generated([{"text": "ok"}])
    return completion({"role": "assistant", "content": "ok"})


@pytest.mark.parametrize(
    ("spec", "variable", "value", "url"),
    [
        (
            "openai:gpt-4.1-mini",
            "OPENAI_BASE_URL",
            "https://llm.corp.example/openai/v1/",
            "https://llm.corp.example/openai/v1/chat/completions",
        ),
        (
            "anthropic:claude-sonnet-4-5",
            "ANTHROPIC_BASE_URL",
            "https://llm.corp.example/anthropic",
            "https://llm.corp.example/anthropic/v1/messages",
        ),
        (
            "gemini:gemini-2.5-flash",
            "GOOGLE_GEMINI_BASE_URL",
            "https://llm.corp.example/gemini/",
            "https://llm.corp.example/gemini/v1beta/models/gemini-2.5-flash:generateContent",
        ),
    ],
)
async def test_a_hosted_provider_goes_where_its_sdks_variable_points(
    spec: str, variable: str, value: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeProvider(json_response(200, _answer(spec)), json_response(200, _answer(spec)))
    default = model_from_spec(spec, http_client=fake.client(), api_keys=KEYS)
    await default.invoke(ASK, [])
    monkeypatch.setenv(variable, value)
    moved = model_from_spec(spec, http_client=fake.client(), api_keys=KEYS)
    await moved.invoke(ASK, [])
    assert str(fake.requests[0].url) != url  # by default, the provider's own API
    assert str(fake.requests[1].url) == url
    assert moved.name == default.name


async def test_a_base_url_from_the_mapping_is_used_too() -> None:
    fake = FakeProvider(json_response(200, _answer("openai")))
    keys = {**KEYS, "OPENAI_BASE_URL": "http://127.0.0.1:4000/v1"}
    await model_from_spec("openai:gpt-4.1-mini", http_client=fake.client(), api_keys=keys).invoke(
        ASK, []
    )
    assert str(fake.requests[0].url) == "http://127.0.0.1:4000/v1/chat/completions"


def test_a_base_url_that_is_not_http_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "api.anthropic.com")
    with pytest.raises(ModelConfigError, match="ANTHROPIC_BASE_URL must be an http"):
        model_from_spec("anthropic:claude-sonnet-4-5", api_keys=KEYS)


@pytest.mark.parametrize("make", [OpenAIModel, AnthropicModel, GeminiModel])
@pytest.mark.parametrize(
    ("base_url", "said"),
    [
        ("ftp://llm.corp.example/v1", "base URL must be http(s): 'ftp://llm.corp.example/v1'"),
        ("llm.corp.example/v1", "base URL must be http(s): 'llm.corp.example/v1'"),
        ("https:///v1", "base URL names no host: 'https:///v1'"),
    ],
)
def test_every_provider_refuses_a_base_url_it_could_never_call(
    make: type[OpenAIModel | AnthropicModel | GeminiModel], base_url: str, said: str
) -> None:
    with pytest.raises(ModelConfigError) as caught:
        make("m1", api_key="secret-key", base_url=base_url)
    assert str(caught.value) == said


async def test_a_query_in_an_openai_compatible_url_stays_after_the_path() -> None:
    listing = {"object": "list", "data": [{"id": "gpt-4o", "context_length": 128000}]}
    fake = FakeProvider(json_response(200, _answer("openai")), json_response(200, listing))
    model = model_from_spec(
        "openai-compatible:https://res.openai.azure.com/openai/v1/?api-version=preview#gpt-4o",
        http_client=fake.client(),
    )
    await model.invoke(ASK, [])
    assert isinstance(model, OpenAICompatibleModel)
    assert await model.context_window() == 128000
    assert [str(r.url) for r in fake.requests] == [
        "https://res.openai.azure.com/openai/v1/chat/completions?api-version=preview",
        "https://res.openai.azure.com/openai/v1/models?api-version=preview",
    ]
    assert model.name == "openai-compatible:https://res.openai.azure.com/openai/v1/#gpt-4o"


async def test_extra_body_merges_into_nested_options() -> None:
    fake = FakeProvider(json_response(200, _answer("gemini")))
    thinking: dict[str, JsonValue] = {
        "generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}
    }
    settings = ModelSettings(temperature=0.2, extra_body=thinking)
    model = model_from_spec(
        "gemini:gemini-2.5-flash", http_client=fake.client(), api_keys=KEYS, settings=settings
    )
    await model.invoke(ASK, [])
    assert fake.body()["generationConfig"] == {
        "temperature": 0.2,
        "thinkingConfig": {"thinkingBudget": 1024},
    }


async def test_a_scheme_the_transport_cannot_speak_is_not_retried(sleeps: Sleeps) -> None:
    # A redirect or a custom transport can still meet one: asking again cannot help.
    fake = FakeProvider(httpx.UnsupportedProtocol("Request URL has an unsupported protocol"))
    model = OpenAICompatibleModel(
        "http://127.0.0.1:9/v1", "m1", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelConnectionError, match="after 1 attempt: UnsupportedProtocol"):
        await model.invoke(ASK, [])
    assert sleeps.delays == []
