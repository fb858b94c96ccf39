"""A call that would not fit the model's context window fails with a clear error before it
is sent, instead of a provider's 400."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest

from agent import AgentItem, ScriptedModel, ToolDefinition, UserMessage, estimate_tokens
from agent.models import FallbackModel, GeminiModel, OpenAICompatibleModel
from agent.scripted import ScriptedAnswer
from gateway import AgentSpec, Gateway
from gateway.assembly import open_gateway
from gateway.cli import main
from gateway.config import parse_config
from tests.models.support import FakeProvider, json_response
from tests.sample_tools import shout
from tests.servers.openai_stub import openai_stub
from tests.test_engine import Recorder
from toolkits import FunctionToolkit, calculator, function_tool

pytestmark = pytest.mark.anyio

LONG_QUESTION = "Please add these numbers for me: " + " + ".join(str(n) for n in range(400))


def test_the_estimate_counts_the_conversation_and_the_tool_schemas_apart() -> None:
    tool = ToolDefinition(
        name="search",
        description="x" * 400,
        input_schema={"type": "object", "properties": {}},
        source_node="n",
    )
    conversation, schemas = estimate_tokens([UserMessage(content="y" * 400)], [tool] * 3)
    assert conversation == 100 + 4  # four characters a token, and the message's framing
    schema_chars = len('{"type":"object","properties":{}}')
    assert schemas == math.ceil(3 * (len("search") + 400 + schema_chars) / 4) + 3 * 8


async def test_a_configured_window_refuses_a_call_that_cannot_fit_before_sending_it() -> None:
    model = ScriptedModel(["never sent"])
    spec = AgentSpec("a", model, tools=["calculator"], context_window=300)
    recorder = Recorder()
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    refused = await gateway.run("a", LONG_QUESTION, hooks=[recorder])
    message = refused.error or ""
    assert "would not fit the model's context window of 300 tokens" in message
    assert "1 tool definitions" in message
    assert model.calls == []  # nothing was sent
    failed = next(e for e in recorder.events if e.kind == "model" and e.phase == "error")
    assert failed.error == message
    fits = ScriptedModel(["42"])
    roomy = AgentSpec("a", fits, tools=["calculator"], context_window=10_000)
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [roomy])
    assert (await gateway.run("a", LONG_QUESTION)).output == "42"


async def test_the_window_an_openai_compatible_server_reports_is_used() -> None:
    # vLLM's /v1/models, as it answers.
    models: dict[str, object] = {
        "object": "list",
        "data": [
            {
                "id": "qwen2.5",
                "object": "model",
                "created": 1735689600,
                "owned_by": "vllm",
                "root": "Qwen/Qwen2.5-1.5B-Instruct",
                "parent": None,
                "max_model_len": 256,
                "permission": [],
            }
        ],
    }
    provider = FakeProvider(json_response(200, models))
    model = OpenAICompatibleModel(
        "http://127.0.0.1:8000/v1", "qwen2.5", http_client=provider.client()
    )
    gateway = Gateway([], [AgentSpec("a", model)])
    assert "context window of 256 tokens" in ((await gateway.run("a", LONG_QUESTION)).error or "")
    assert [(r.method, r.url.path) for r in provider.requests] == [("GET", "/v1/models")]


async def test_gemini_reports_its_input_token_limit_and_a_failed_lookup_is_no_window() -> None:
    described = {
        "name": "models/gemini-2.0-flash",
        "version": "2.0",
        "displayName": "Gemini 2.0 Flash",
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 8192,
        "supportedGenerationMethods": ["generateContent", "countTokens"],
    }
    provider = FakeProvider(json_response(200, described))
    gemini = GeminiModel("gemini-2.0-flash", api_key="k", http_client=provider.client())
    assert await gemini.context_window() == 1048576
    assert await gemini.context_window() == 1048576  # asked once
    assert len(provider.requests) == 1
    assert provider.requests[0].url.path == "/v1beta/models/gemini-2.0-flash"
    assert provider.requests[0].headers["x-goog-api-key"] == "k"

    down = FakeProvider(json_response(500, {"error": {"message": "internal"}}))
    unknown = GeminiModel("gemini-2.0-flash", api_key="k", http_client=down.client())
    assert await unknown.context_window() is None


async def test_context_window_is_an_agent_setting_in_the_config(tmp_path: Path) -> None:
    script = tmp_path / "never-asked.json"
    script.write_text("[]")
    config = parse_config(
        {
            "tools": {"calculator": {"builtin": "calculator"}},
            "agents": {"a": {"tools": ["calculator"], "context_window": 300}},
        }
    )
    async with open_gateway(config, model=f"scripted:{script}") as gateway:
        assert gateway.agents["a"].context_window == 300
        refused = await gateway.run("a", LONG_QUESTION)
        assert "context window of 300 tokens" in (refused.error or "")


def _vllm_listing(window: int) -> httpx.Response:
    entry = {"id": "qwen2.5", "object": "model", "owned_by": "vllm", "max_model_len": window}
    return json_response(200, {"object": "list", "data": [entry]})


async def test_a_fallback_list_checks_the_window_of_its_first_model() -> None:
    reporting = OpenAICompatibleModel(
        "http://127.0.0.1:8000/v1", "qwen2.5", http_client=FakeProvider(_vllm_listing(256)).client()
    )
    backup = ScriptedModel(["never asked"])
    gateway = Gateway([], [AgentSpec("a", FallbackModel([reporting, backup]))])
    assert "context window of 256 tokens" in ((await gateway.run("a", LONG_QUESTION)).error or "")
    assert backup.calls == []
    # Second in the list, the small window does not refuse what the first model can take.
    later = OpenAICompatibleModel(
        "http://127.0.0.1:8000/v1", "qwen2.5", http_client=FakeProvider(_vllm_listing(256)).client()
    )
    first = ScriptedModel(["42"])
    gateway = Gateway([], [AgentSpec("a", FallbackModel([first, later]))])
    assert (await gateway.run("a", LONG_QUESTION)).output == "42"


def test_a_stored_run_checks_the_window_the_provider_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with openai_stub(["never sent"], context_window=256) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(f'[agents.assistant]\nmodel = "{model.spec}"\n')
        code = main(["run", LONG_QUESTION, "--config", str(config)])  # stored: the default
        assert model.requests == []  # refused before it was sent
    assert code == 1
    assert "would not fit the model's context window of 256 tokens" in capsys.readouterr().err
    assert main(["runs", "list"]) == 0
    listed = capsys.readouterr().out  # it was a stored run, which says why it stopped
    assert "assistant" in listed
    assert "would not fit the m" in listed


LONG_RESULT: dict[str, object] = {
    "name": "shout",
    "arguments": {"text": "long text", "times": 2000},
}
"""A call whose result (~20,000 characters) cannot fit a window of 3,000 tokens."""


def _window_config(tmp_path: Path, window: int) -> Path:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.shout]\npython = "tests.sample_tools:shout"\n'
        f'[agents.assistant]\ntools = ["shout"]\ncontext_window = {window}\n'
    )
    return config


def call_answer(call: dict[str, object]) -> ScriptedAnswer:
    return ScriptedAnswer.model_validate({"tool_calls": [call]})


async def test_an_item_too_long_for_the_window_fails_alone_and_the_others_answer() -> None:
    model = ScriptedModel(["first", call_answer(LONG_RESULT), "third"])
    spec = AgentSpec("a", model, tools=["shout"], context_window=3000)
    gateway = Gateway([FunctionToolkit("shout", [function_tool(shout)])], [spec])
    items = [AgentItem(prompt=p) for p in ("one?", "two?", "three?")]
    result = await gateway.run("a", items)
    assert [i.output for i in result.items] == ["first", None, "third"]
    error = result.items[1].error or ""
    assert "would not fit the model's context window of 3000 tokens" in error
    assert "rejected" not in error  # it was never sent
    assert len(model.calls) == 3  # the refused call was not sent


def test_a_stored_items_run_reports_each_item_and_a_single_run_too_long_is_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _window_config(tmp_path, 3000)
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"content": "first"}, {"tool_calls": [LONG_RESULT]}, {"content": "third"}])
    )
    items = tmp_path / "f.jsonl"
    items.write_text('"one?"\n"two?"\n"three?"\n')
    run = ["--config", str(config), "--model", f"scripted:{script}"]
    assert main(["run", "--items", str(items), *run]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(line["index"], line["output"]) for line in lines] == [
        (0, "first"),
        (1, None),
        (2, "third"),
    ]
    assert "would not fit the model's context window" in lines[1]["error"]

    script.write_text(json.dumps([{"tool_calls": [LONG_RESULT]}]))
    assert main(["run", "two?", "--json", *run]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert "would not fit the model's context window" in printed["error"]
    assert main(["runs", "list", "--status", "failed", "--json"]) == 0
    [failed] = json.loads(capsys.readouterr().out)
    assert failed["run_id"] == printed["run_id"]  # failed: resuming cannot make it fit
    assert main(["resume", printed["run_id"]]) == 2
    assert "has ended (failed)" in capsys.readouterr().err
