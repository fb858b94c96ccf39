"""What a served agent's caller is told when the run ends without an answer: *failed* for a
question that got an error of its own (the model rejected it: the run has ended), *stopped*
for a cause outside it (the model failing after retries: with a store, the run is kept where
it stopped, resumable), in words that agree with the run's stored status and name the run,
never the store. Real SDK clients of both eras, in process, on a real SQLite store."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from agent import (
    AssistantMessage,
    ChatMessage,
    ModelAuthError,
    ModelError,
    ModelHTTPError,
    ScriptedModel,
    TokenCallback,
    ToolCall,
    ToolDefinition,
    Usage,
)
from gateway import AgentSpec, Gateway
from gateway.agent_tool import reported_usage
from gateway.assembly import open_gateway
from gateway.config import GatewaySettings, load_config
from gateway.durable import DurableRuns, open_runs
from gateway.model_specs import cannot_run
from gateway.server import build_server
from toolkits import FunctionToolkit, function_tool

from .support import ERAS, relays_alive, serve
from .test_run_handles import ORIGIN

pytestmark = pytest.mark.anyio

MODEL = "openai-compatible:http://127.0.0.1:8000/v1#m"
REJECTED = ModelHTTPError(
    f"{MODEL}: HTTP 400: Invalid request: bad thing", status_code=400, provider="openai"
)
DOWN = ModelHTTPError(f"{MODEL}: HTTP 500: The server had an error", status_code=500, provider="o")
BAD_KEY = ModelAuthError(f"{MODEL}: HTTP 401: Incorrect API key", status_code=401, provider="o")


class Failing(ScriptedModel):
    """A model whose every call fails with `error`, as a provider's client raises it."""

    def __init__(self, error: ModelError) -> None:
        super().__init__([])
        self.error = error

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        raise self.error


def _gateway(error: ModelError) -> Gateway:
    return Gateway([], [AgentSpec("assistant", Failing(error))])


@asynccontextmanager
async def _served(directory: Path, gateway: Gateway) -> AsyncGenerator[tuple[Any, DurableRuns]]:
    async with open_runs(f"sqlite:///{directory / 'runs.sqlite'}") as runs:
        runs.use(gateway)
        server, _router = build_server(gateway, GatewaySettings(), runs=runs, origin=ORIGIN)
        yield server, runs


def _text(result: types.CallToolResult) -> str:
    assert result.is_error, result
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


@pytest.mark.parametrize("era", ERAS)
async def test_without_a_store_a_rejected_question_failed_and_a_model_down_stopped(
    era: str,
) -> None:
    said: dict[str, str] = {}
    for name, error in (("rejected", REJECTED), ("down", DOWN), ("bad key", BAD_KEY)):
        async with Client(serve(_gateway(error)), mode=era) as client:
            said[name] = _text(await client.call_tool("assistant", {"prompt": "go"}))
    assert said == {
        "rejected": f"agent 'assistant' failed: the model rejected the request: {REJECTED}. The "
        "run has ended and cannot be continued: calling again with the same prompt would "
        "likely fail the same way.",
        "down": f"agent 'assistant' stopped: {DOWN}. The run is not stored (the gateway has no "
        "run store): calling again starts it over, and may work once the cause is gone.",
        "bad key": f"agent 'assistant' stopped: {BAD_KEY}. The run is not stored (the gateway "
        "has no run store): calling again fails the same way until the gateway's operator "
        "mends the model's configuration (its API key or model spec).",
    }


class AnswersThenFails(Failing):
    """A model that asks for a tool once (10 tokens in, 1 out), then fails with `error`."""

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        if len(messages) > 2:  # the tool's result is back
            raise self.error
        return AssistantMessage(
            tool_calls=(ToolCall(id="n1", name="note", arguments={"text": "A"}),),
            usage=Usage(input_tokens=10, output_tokens=1, requests=1),
        )


def note(text: str) -> str:
    """Note a text."""
    return f"noted {text}"


@pytest.mark.parametrize("stored", [False, True], ids=["no store", "store"])
async def test_a_stopped_run_reports_what_it_spent_in_meta(tmp_path: Path, stored: bool) -> None:
    """A calling gateway's run counts a served agent's usage from its result's `_meta` (and
    its token_budget with it): a run that stopped reports what it spent too."""
    spec = AgentSpec("assistant", AnswersThenFails(DOWN), tools=["log"])
    gateway = Gateway([FunctionToolkit("log", [function_tool(note)])], [spec])
    if stored:
        async with _served(tmp_path, gateway) as (server, _runs), Client(server) as client:
            result = await client.call_tool("assistant", {"prompt": "go"})
    else:
        async with Client(serve(gateway)) as client:
            result = await client.call_tool("assistant", {"prompt": "go"})
    assert "stopped" in _text(result)
    assert reported_usage(result) == Usage(input_tokens=10, output_tokens=1, requests=1)


@pytest.mark.parametrize("era", ERAS)
async def test_with_a_store_the_words_name_the_run_and_agree_with_its_status(
    era: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    said: dict[str, str] = {}
    status: dict[str, str] = {}
    for name, error in (("rejected", REJECTED), ("down", DOWN)):
        directory = tmp_path / name.replace(" ", "_")
        directory.mkdir()
        async with _served(directory, _gateway(error)) as (server, runs):
            async with Client(server, mode=era) as client:
                text = _text(await client.call_tool("assistant", {"prompt": "go"}))
            found = re.search(r"[Rr]un ([0-9a-f]{12}) ", text)
            assert found is not None, text
            run_id = found.group(1)
            said[name] = text.replace(run_id, "RUN")
            status[name] = (await runs.get(run_id)).status
            if name == "down":  # the operator is told how to resume it, store and all
                store = f"sqlite:///{directory / 'runs.sqlite'}"
                assert (
                    f"run {run_id} of agent 'assistant' stopped: {DOWN}; to continue it: "
                    f"agent-gateway runs resume {run_id} --store {store}"
                ) in caplog.messages
    assert status == {"rejected": "failed", "down": "stopped"}
    assert said == {
        "rejected": f"agent 'assistant' failed: the model rejected the request: {REJECTED}. Run "
        "RUN has ended (failed) and cannot be continued: calling again with the same prompt "
        "would likely fail the same way.",
        "down": f"agent 'assistant' stopped: {DOWN}. Run RUN is stored where it stopped: the "
        "gateway's operator can continue it (agent-gateway runs resume RUN); or call again (a "
        "new run) once the cause is gone.",
    }
    assert str(tmp_path) not in " ".join(said.values())  # the store is the operator's


async def test_get_run_of_a_stopped_run_says_it_can_be_resumed(tmp_path: Path) -> None:
    async with _served(tmp_path, _gateway(DOWN)) as (server, _runs), Client(server) as client:
        text = _text(await client.call_tool("assistant", {"prompt": "go"}))
        found = re.search(r"Run ([0-9a-f]{12}) ", text)
        assert found is not None, text
        run_id = found.group(1)
        seen = await client.call_tool("get_run", {"run_id": run_id})
    assert seen.content == [
        types.TextContent(
            text=f"run {run_id} is stopped: {DOWN}. The gateway's operator can continue it "
            f"(agent-gateway runs resume {run_id})"
        )
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_a_stored_run_that_stopped_is_said_stopped_in_sentences_ended_once(
    era: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Chat memory's error says so: `... Error 111 connecting to 127.0.0.1:6379. Connection refused.`
    refused = ModelHTTPError(
        f"{MODEL}: HTTP 503: Connection refused.", status_code=503, provider="o"
    )
    heard: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append(message or "")

    async with (
        _served(tmp_path, _gateway(refused)) as (server, _runs),
        Client(server, mode=era) as client,
    ):
        result = await client.call_tool("assistant", {"prompt": "go"}, progress_callback=progress)
        text = _text(result)
        found = re.search(r"Run ([0-9a-f]{12}) ", text)
        assert found is not None, text
        run_id = found.group(1)
        seen = await client.call_tool("get_run", {"run_id": run_id})
    # Was: "agent assistant: failed in ... ms: ...", and "refused.. Run", "refused.; to continue".
    assert re.fullmatch(
        rf"agent assistant: stopped in \d+ ms: {re.escape(str(refused))}", heard[-1]
    ), heard
    assert text.startswith(f"agent 'assistant' stopped: {refused} Run {run_id} is stored "), text
    assert (
        f"run {run_id} of agent 'assistant' stopped: {MODEL}: HTTP 503: Connection refused; "
        in (" ".join(caplog.messages))
    )
    assert seen.content == [
        types.TextContent(
            text=f"run {run_id} is stopped: {refused} The gateway's operator can continue it "
            f"(agent-gateway runs resume {run_id})"
        )
    ]


class FailingAnew(ScriptedModel):
    """A model whose every call fails with a new error like `error`, as a provider's client
    raises one per call (one error object raised again keeps every run's frames alive in its
    traceback)."""

    def __init__(self, error: ModelHTTPError) -> None:
        super().__init__([])
        self.error = error

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        was = self.error
        raise ModelHTTPError(str(was), status_code=was.status_code, provider=was.provider)


async def test_a_server_keeps_nothing_of_its_runs_that_stopped(tmp_path: Path) -> None:
    """A run that stopped (the model down: kept in the store, resumable) leaves nothing in
    the serving process once it no longer executes there: calls that fail over for days hold
    no more than one."""
    gateway = Gateway([], [AgentSpec("assistant", FailingAnew(DOWN))])
    before = relays_alive()  # other tests' (the `DOWN` raised again holds their frames)
    async with _served(tmp_path, gateway) as (server, _runs), Client(server) as client:
        for i in range(12):
            assert "stopped" in _text(await client.call_tool("assistant", {"prompt": f"go {i}"}))
        assert relays_alive() - before <= 1  # the last run's, if its workflow still unwinds


async def test_a_model_without_its_key_is_told_to_a_client_without_the_config_files_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path is the operator's: serve's log (`cannot_run`) names it, a client is told what
    is misconfigured only."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    file = tmp_path / "agent-gateway.toml"
    file.write_text('[agents.assistant]\nmodel = "openai:gpt-4.1-mini"\n')
    async with open_gateway(load_config(file)) as gateway:
        operator = cannot_run(gateway.agents["assistant"].model)
        assert operator is not None
        assert operator.startswith(f"{file}: agents.assistant.model: openai needs an API key")
        async with Client(serve(gateway)) as client:
            said = _text(await client.call_tool("assistant", {"prompt": "go"}))
    assert "agents.assistant.model: openai needs an API key: set OPENAI_API_KEY" in said
    assert str(tmp_path) not in said
