"""Model specs: every form, keys from the mapping or the environment, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from agent.errors import ModelConfigError
from agent.models import (
    SPEC_FORMS,
    AnthropicModel,
    GeminiModel,
    ModelSettings,
    OpenAICompatibleModel,
    OpenAIModel,
    OpenAIResponsesModel,
    model_from_spec,
    spec_without_credentials,
    stored_without_credentials,
)
from agent.scripted import ScriptedModel

KEYS = {
    "OPENAI_API_KEY": "sk-openai-secret-1",
    "ANTHROPIC_API_KEY": "sk-ant-secret-2",
    "GEMINI_API_KEY": "AIza-secret-3",
}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*KEYS, "OPENAI_COMPATIBLE_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("spec", "cls", "name"),
    [
        ("openai:gpt-4.1-mini", OpenAIModel, "openai:gpt-4.1-mini"),
        ("openai-responses:gpt-5-mini", OpenAIResponsesModel, "openai-responses:gpt-5-mini"),
        (
            "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5",
            OpenAICompatibleModel,
            "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5",
        ),
        ("anthropic:claude-sonnet-4-5", AnthropicModel, "anthropic:claude-sonnet-4-5"),
        ("gemini:gemini-2.5-flash", GeminiModel, "gemini:gemini-2.5-flash"),
    ],
)
def test_each_provider_form(spec: str, cls: type, name: str) -> None:
    model = model_from_spec(spec, api_keys=KEYS)
    assert isinstance(model, cls)
    assert model.name == name
    for key in KEYS.values():
        assert key not in repr(model)


def test_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "from-env")
    model = model_from_spec("gemini:gemini-2.5-flash")
    assert isinstance(model, GeminiModel)


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-4.1", "OPENAI_API_KEY"),
        ("openai-responses:o4-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("gemini:gemini-2.5-flash", "GEMINI_API_KEY"),
    ],
)
def test_a_missing_key_names_the_variable(spec: str, variable: str) -> None:
    with pytest.raises(ModelConfigError, match=variable):
        model_from_spec(spec)


@pytest.mark.anyio
async def test_compatible_key_prefers_its_own_variable() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"choices": [{"message": {"content": "hi"}}]})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        keys = {"OPENAI_COMPATIBLE_API_KEY": "local", "OPENAI_API_KEY": "openai"}
        model = model_from_spec(
            "openai-compatible:http://127.0.0.1:8080/v1#m", api_keys=keys, http_client=client
        )
        await model.invoke([], [])
    assert seen == ["Bearer local"]


@pytest.mark.anyio
async def test_an_openai_key_is_never_sent_to_a_compatible_server() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"choices": [{"message": {"content": "hi"}}]})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        model = model_from_spec(
            "openai-compatible:http://127.0.0.1:8080/v1#m",
            api_keys={"OPENAI_API_KEY": "sk-real-openai"},
            http_client=client,
        )
        await model.invoke([], [])
    assert seen == [None]


def test_compatible_spec_needs_url_and_model() -> None:
    with pytest.raises(ModelConfigError, match="base URL and a model"):
        model_from_spec("openai-compatible:http://127.0.0.1:8080/v1")
    with pytest.raises(ModelConfigError, match="http"):
        model_from_spec("openai-compatible:127.0.0.1:8080#m")


@pytest.mark.parametrize(
    ("spec", "form"),
    [
        ("openai:", "openai:MODEL"),
        ("openai", "openai:MODEL"),
        ("Anthropic: ", "anthropic:MODEL"),
        ("openai-compatible:", "openai-compatible:URL#MODEL"),
        ("openai-responses", "openai-responses:MODEL"),
        ("scripted:", "scripted:FILE"),
    ],
)
def test_a_known_provider_with_no_model_says_the_model_is_missing(spec: str, form: str) -> None:
    with pytest.raises(ModelConfigError) as caught:
        model_from_spec(spec)
    assert str(caught.value) == f"model spec {spec.strip()!r} names no model: write {form}"


@pytest.mark.parametrize("spec", ["gpt-4", "ollama:qwen", ":gpt-4", ""])
def test_unknown_specs_list_the_valid_forms(spec: str) -> None:
    with pytest.raises(ModelConfigError) as caught:
        model_from_spec(spec)
    for form in SPEC_FORMS:
        assert form in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_sampling_is_left_to_the_gateway() -> None:
    with pytest.raises(
        ModelConfigError, match="only available when the gateway is served over MCP"
    ):
        model_from_spec("sampling")


def test_scripted_file(tmp_path: Path) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "hello"}]))
    model = model_from_spec(f"scripted:{script}")
    assert isinstance(model, ScriptedModel)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ModelConfigError, match="invalid script"):
        model_from_spec(f"scripted:{tmp_path / 'bad.json'}")


def test_a_bad_script_says_each_problem_on_a_line_of_its_own(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(
        json.dumps([{"content": "ok"}, {"contnt": "x", "tool_calls": [{"nam": "add"}]}, "hi"])
    )
    with pytest.raises(ModelConfigError) as caught:
        model_from_spec(f"scripted:{script}")
    assert str(caught.value).splitlines() == [
        f"invalid script {script}, answer 2: tool_calls[0].name: Field required",
        f"invalid script {script}, answer 2: tool_calls[0].nam: unknown key (did you mean 'name'?)",
        f"invalid script {script}, answer 2: contnt: unknown key (did you mean 'content'?)",
        f'invalid script {script}, answer 3: must be an object: {{"content": "...", ...}}',
    ]
    script.write_text('{"content": "one answer, not a list"}')
    with pytest.raises(ModelConfigError) as caught:
        model_from_spec(f"scripted:{script}")
    assert str(caught.value) == (
        f"invalid script {script}: must be a JSON list of answers: "
        '[{"content": "...", "tool_calls": [...]}, ...]'
    )
    script.write_text("[{")
    with pytest.raises(ModelConfigError, match=r"^invalid script .*: not valid JSON: [^\n]*$"):
        model_from_spec(f"scripted:{script}")


def test_settings_reach_the_model() -> None:
    settings = ModelSettings(max_tokens=100)
    model = model_from_spec("openai:gpt-4.1", api_keys=KEYS, settings=settings)
    assert isinstance(model, OpenAIModel)
    assert model.settings is settings


@pytest.mark.parametrize(
    ("spec", "stored"),
    [
        (
            "openai-compatible:http://bob:p%40ss@127.0.0.1:8/v1?v=1#m",
            "openai-compatible:http://bob:***@127.0.0.1:8/v1?v=1#m",
        ),
        ("openai-compatible:https://TOKEN@[::1]/v1#m", "openai-compatible:https://***@[::1]/v1#m"),
        (
            "openai-compatible:http://127.0.0.1:8/v1?api-version=1&api_key=K%2B#m",
            "openai-compatible:http://127.0.0.1:8/v1?api-version=1&api_key=***#m",
        ),
        (
            "openai-compatible:http://bob:pw@127.0.0.1:8/v1?token=K#m",
            "openai-compatible:http://bob:***@127.0.0.1:8/v1?token=***#m",
        ),
        ("openai-compatible:http://127.0.0.1:8/v1#m", "openai-compatible:http://127.0.0.1:8/v1#m"),
        ("openai:gpt-4o", "openai:gpt-4o"),
        ("scripted:/runs/a@b.json", "scripted:/runs/a@b.json"),
        ("scripted:/runs/a?key=b.json", "scripted:/runs/a?key=b.json"),
    ],
)
def test_a_spec_to_store_has_no_credentials_and_says_they_were_taken(
    spec: str, stored: str
) -> None:
    assert spec_without_credentials(spec) == stored
    assert stored_without_credentials(stored) == (stored != spec)
    assert not stored_without_credentials(spec)
