"""Model settings from the config and the command line reach each provider's request body."""

from __future__ import annotations

import tomllib
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from agent.models import ModelSettings
from gateway.assembly import open_gateway
from gateway.cli import parser
from gateway.cli.common import config_of
from gateway.config import parse_config
from gateway.errors import ConfigError
from tests.models.support import FakeProvider, json_response
from tests.models.test_anthropic import message as anthropic_message
from tests.models.test_gemini import generated as gemini_answer
from tests.models.test_openai import completion as openai_completion

pytestmark = pytest.mark.anyio

SETTINGS = {"temperature": 0.2, "max_tokens": 321, "top_p": 0.9}


def answers(spec: str) -> list[httpx.Response]:
    """What the provider answers: its model listing first where the gateway asks for the
    context window, then one answer."""
    provider = spec.split(":")[0]
    if provider == "anthropic":
        return [json_response(200, anthropic_message([{"type": "text", "text": "ok"}], "end_turn"))]
    if provider == "gemini":
        info = {"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576}
        return [json_response(200, info), json_response(200, gemini_answer([{"text": "ok"}]))]
    completion = json_response(200, openai_completion({"role": "assistant", "content": "ok"}))
    if provider == "openai-compatible":
        listing = {"object": "list", "data": [{"id": "qwen2.5", "max_model_len": 32768}]}
        return [json_response(200, listing), completion]
    return [completion]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("openai:gpt-4.1-mini", {"temperature": 0.2, "max_completion_tokens": 321, "top_p": 0.9}),
        (
            "openai-compatible:http://127.0.0.1:8080/v1#qwen2.5",
            {"temperature": 0.2, "max_tokens": 321, "top_p": 0.9},
        ),
        ("anthropic:claude-sonnet-4-5", {"temperature": 0.2, "max_tokens": 321, "top_p": 0.9}),
        (
            "gemini:gemini-2.5-flash",
            {"generationConfig": {"temperature": 0.2, "maxOutputTokens": 321, "topP": 0.9}},
        ),
    ],
)
async def test_an_agents_settings_reach_its_providers_request(
    spec: str, expected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key-0123")
    config = parse_config({"agents": {"a": {"model": spec, **SETTINGS}}})
    fake = FakeProvider(*answers(spec))
    async with open_gateway(config, http_client=fake.client()) as gateway:
        result = await gateway.run("a", "hi")
    assert result.output == "ok"
    body = fake.body()
    assert {key: body[key] for key in expected} == expected


async def test_system_temperature_and_max_tokens_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0123")
    config = tmp_path / "c.toml"
    config.write_text(
        '[agents.a]\nmodel = "openai:gpt-4.1-mini"\nsystem = "Be long."\ntop_p = 0.5\n'
        '[agents.b]\nmodel = "openai:gpt-4.1-mini"\nsystem = "Be B."\n'
    )
    args = parser().parse_args(
        ["run", "hi", "--config", str(config), "--agent", "a", "--system", "Be brief.",
         "--temperature", "0", "--max-tokens", "50"]
    )  # fmt: skip
    fake = FakeProvider(*answers("openai:gpt-4.1-mini"))
    async with open_gateway(config_of(args), http_client=fake.client()) as gateway:
        assert gateway.agents["b"].options.system_message == "Be B."  # --system: the chosen one
        await gateway.run("a", "hi")
    body = fake.body()
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (body["temperature"], body["max_completion_tokens"], body["top_p"]) == (0, 50, 0.5)


def test_out_of_range_settings_are_clear_errors(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match=r"agents\.a\.temperature: Input should be less than"):
        parse_config({"agents": {"a": {"temperature": 3}}})
    args = parser().parse_args(["run", "hi", "--max-tokens", "0"])
    with pytest.raises(ConfigError, match="--max-tokens: Input should be greater than or equal"):
        config_of(args)
    args = parser().parse_args(["run", "hi", "--temperature", "nan"])
    with pytest.raises(ConfigError, match="--temperature: Input should be a finite number"):
        config_of(args)
    # In code, as in a file: no request could carry it (json_body raised on every call).
    with pytest.raises(
        ValidationError, match=r"extra_body\.penalty\.float\n  Input should be a finite"
    ):
        ModelSettings(extra_body={"penalty": float("inf")})


async def test_an_agents_model_timeout_is_its_requests_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-0123")
    config = parse_config(
        {
            "agents": {
                "slow": {"model": "openai:gpt-4.1-mini", "model_timeout": 900},
                "quick": {"model": "openai:gpt-4.1-mini"},
            }
        }
    )
    fake = FakeProvider(*answers("openai:gpt-4.1-mini"), *answers("openai:gpt-4.1-mini"))
    async with open_gateway(config, http_client=fake.client()) as gateway:
        await gateway.run("slow", "hi")
        await gateway.run("quick", "hi")
    reads = [request.extensions["timeout"]["read"] for request in fake.requests]
    assert reads == [900, 5.0]  # the other agent keeps its client's timeout
    with pytest.raises(ConfigError, match=r"agents\.a\.model_timeout: Input should be greater"):
        parse_config({"agents": {"a": {"model_timeout": 0}}})


@pytest.mark.parametrize(
    ("spec", "table", "expected"),
    [
        (
            "anthropic:claude-sonnet-4-5",
            'thinking = { type = "enabled", budget_tokens = 2048 }',
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        ),
        ("openai:gpt-4.1-mini", 'reasoning_effort = "high"', {"reasoning_effort": "high"}),
        (
            "gemini:gemini-2.5-flash",
            "generationConfig = { thinkingConfig = { thinkingBudget = 1024 } }",
            {"generationConfig": {"temperature": 0.2, "thinkingConfig": {"thinkingBudget": 1024}}},
        ),
    ],
)
async def test_an_agents_extra_body_reaches_its_providers_request(
    spec: str, table: str, expected: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, "test-key-0123")
    source = f'[agents.a]\nmodel = "{spec}"\ntemperature = 0.2\n[agents.a.extra_body]\n{table}\n'
    config = parse_config(tomllib.loads(source))
    fake = FakeProvider(*answers(spec))
    async with open_gateway(config, http_client=fake.client()) as gateway:
        assert (await gateway.run("a", "hi")).output == "ok"
    body = fake.body()
    assert {key: body[key] for key in expected} == expected
