"""An agent offering its model more tools than the provider takes in one request (OpenAI: 128)
is warned of, once, by name, with the count and the limit: at the run, in `tools` and by
`serve`. Never refused here: the provider says no itself."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agent.models import (
    AnthropicModel,
    FallbackModel,
    GeminiModel,
    OpenAICompatibleModel,
    OpenAIModel,
)
from gateway import AgentSpec, Gateway
from gateway.cli import main
from gateway.tool_limits import max_tools, too_many_tools
from tests.durable.cli_runs import REPO
from tests.models.support import FakeProvider, Sleeps, json_response, retry_policy
from tests.server.processes import untimed
from toolkits import FunctionToolkit, calculator

MANY = FunctionToolkit(
    "many", [dataclasses.replace(calculator, name=f"calc{n:03}") for n in range(130)]
)
"""A node of 130 tools: two more than OpenAI takes."""

COMPLETION = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-mini-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "It is 42.", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 19, "completion_tokens": 5, "total_tokens": 24},
}


def _like_openai(request: httpx.Request) -> httpx.Response:
    """OpenAI's own answer to a request: its real 400 past 128 tools."""
    tools = json.loads(request.content).get("tools", [])
    if len(tools) <= 128:
        return json_response(200, COMPLETION)
    message = (
        "Invalid 'tools': array too long. Expected an array with maximum length 128, but got "
        f"an array with length {len(tools)} instead."
    )
    error = {
        "message": message,
        "type": "invalid_request_error",
        "param": "tools",
        "code": "array_above_max_length",
    }
    return json_response(400, {"error": error})


def _openai(provider: FakeProvider) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        http_client=provider.client(),
        retry=retry_policy(Sleeps()),
    )


@pytest.mark.anyio
async def test_a_run_warns_once_that_its_provider_takes_fewer_tools_and_still_asks_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = FakeProvider(_like_openai, _like_openai)
    gateway = Gateway([MANY], [AgentSpec("wide", _openai(provider), ["many"])])
    with caplog.at_level(logging.WARNING, logger="gateway.step_loop"):
        first = await gateway.run("wide", "6 * 7?")
        second = await gateway.run("wide", "6 * 7?")
    warned = [r.getMessage() for r in caplog.records if "tools, more than" in r.getMessage()]
    assert warned == [
        "agent 'wide' offers its model 130 tools, more than its provider takes in one request "
        "(openai:gpt-4.1-mini takes at most 128): that provider will refuse its calls. Give the "
        "agent fewer tools (a server's include/exclude, or fewer servers)"
    ]
    # Not refused here: the provider was asked, and said no itself.
    assert [len(json.loads(r.content)["tools"]) for r in provider.requests] == [130, 130]
    for result in (first, second):
        assert "array too long" in (result.items[0].error or "")


@pytest.mark.anyio
async def test_an_agent_within_the_limit_is_not_warned(caplog: pytest.LogCaptureFixture) -> None:
    few = FunctionToolkit("few", [calculator])
    provider = FakeProvider(_like_openai)
    gateway = Gateway([few], [AgentSpec("narrow", _openai(provider), ["few"])])
    with caplog.at_level(logging.WARNING, logger="gateway.step_loop"):
        assert (await gateway.run("narrow", "6 * 7?")).output == "It is 42."
    assert not [r for r in caplog.records if "tools, more than" in r.getMessage()]


def test_only_providers_that_document_a_limit_are_held_to_one() -> None:
    openai = OpenAIModel("gpt-4.1-mini", api_key="sk-test")
    others = [
        OpenAICompatibleModel("http://127.0.0.1:8080/v1", "qwen3"),  # its own server's limit
        AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-test"),
        GeminiModel("gemini-2.5-flash", api_key="test"),
    ]
    assert max_tools(openai) == 128
    assert too_many_tools("a", openai, 128) is None
    for model in others:
        assert (max_tools(model), too_many_tools("a", model, 5000)) == (None, None)
    # A fallback list: each model that takes fewer is named; the others are not.
    fallback = FallbackModel([others[1], openai])
    assert max_tools(fallback) == 128
    said = too_many_tools("a", fallback, 200) or ""
    assert "(openai:gpt-4.1-mini takes at most 128)" in said


def _config(directory: Path) -> Path:
    """130 local tools; `wide` has them all on an OpenAI model, `narrow` one."""
    names = [f"calc{n:03}" for n in range(130)]
    config = directory / "agent-gateway.toml"
    config.write_text(
        "".join(f'[tools.{name}]\nbuiltin = "calculator"\n' for name in names)
        + f'[agents.wide]\nmodel = "openai:gpt-4.1-mini"\ntools = {json.dumps(names)}\n'
        + '[agents.narrow]\nmodel = "openai:gpt-4.1-mini"\ntools = ["calc000"]\n'
    )
    return config


def test_tools_shows_each_agents_tool_count_and_warns_of_too_many(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = _config(tmp_path)
    with caplog.at_level(logging.WARNING, logger="gateway.cli.tools"):
        assert main(["tools", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    [wide] = [line for line in out.splitlines() if line.startswith("agent wide:")]
    assert wide.endswith("'calc129'] (130 tools, more than its model takes: 128)")
    assert "agent narrow: model=openai:gpt-4.1-mini tools=['calc000'] (1 tool)" in out
    warned = [r.getMessage() for r in caplog.records if r.name == "gateway.cli.tools"]
    assert [said.partition(", more than")[0] for said in warned] == [
        "agent 'wide' offers its model 130 tools"
    ]
    assert main(["tools", "--config", str(config), "--json"]) == 0
    agents = json.loads(capsys.readouterr().out)["agents"]
    assert [(a["name"], a["tool_count"], a["max_tools"]) for a in agents] == [
        ("wide", 130, 128),
        ("narrow", 1, 128),
    ]


@pytest.mark.integration
def test_serve_warns_of_an_agent_with_more_tools_than_its_provider_takes(
    tmp_path: Path,
) -> None:
    executable = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
    assert executable is not None
    done = subprocess.run(
        [executable, "serve", "--stdio", "--config", str(_config(tmp_path))],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-test"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warned = [untimed(line) for line in done.stderr.splitlines() if "tools, more than" in line]
    assert warned == [
        "agent-gateway: warning: agent 'wide' offers its model 130 tools, more than its "
        "provider takes in one request (openai:gpt-4.1-mini takes at most 128): that provider "
        "will refuse its calls. Give the agent fewer tools (a server's include/exclude, or "
        "fewer servers)"
    ]
    assert "sk-test" not in done.stderr
