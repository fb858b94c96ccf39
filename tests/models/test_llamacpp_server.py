"""The OpenAI-compatible provider against a real llama.cpp server (the `xllamacpp` wheel).

Opt-in: set AGENT_GATEWAY_TEST_GGUF to a chat GGUF with tool-call support in its template
(checked with Qwen2.5-Coder-1.5B-Instruct Q4_K_M). Skipped, never failed, when it is absent.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent import AgentOptions, OutputSchema
from agent.errors import ModelHTTPError
from agent.messages import SystemMessage, ToolMessage, UserMessage
from agent.models import ModelSettings, OpenAICompatibleModel, RetryPolicy
from gateway import AgentSpec, Gateway
from toolkits import FunctionToolkit, calculator

from .conftest import load_tools
from .support import Tokens

pytestmark = pytest.mark.integration

GGUF = os.environ.get("AGENT_GATEWAY_TEST_GGUF", "")
GET_SUM = next(t for t in load_tools("server-everything") if t.name == "get-sum")
ASK = [
    SystemMessage(content="You are a helpful assistant. Use the tools when needed."),
    UserMessage(content="What is 17 plus 25? Use the get-sum tool."),
]
SETTINGS = ModelSettings(max_tokens=120, temperature=0)

# The server lives while this child's stdin is open, so it dies with the test process.
SERVER = """
import sys, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.use_jinja = True
p.hostnames = ["127.0.0.1"]
p.port = int(sys.argv[2])
p.cpuparams.n_threads = 2
p.n_ctx = 4096
server = xllamacpp.Server(p)
print("ready", flush=True)
sys.stdin.read()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    if not GGUF:
        pytest.skip("AGENT_GATEWAY_TEST_GGUF is not set (path to a chat GGUF for llama.cpp)")
    if not Path(GGUF).is_file():
        pytest.skip(f"AGENT_GATEWAY_TEST_GGUF points at no file: {GGUF}")
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("the xllamacpp wheel is not installed (pip install xllamacpp)")
    port = _free_port()
    child = subprocess.Popen(
        [sys.executable, "-c", SERVER, GGUF, str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        # The child prints "ready" once the server holds the model and listens (EOF if it
        # died); pytest-timeout bounds the wait.
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            pytest.fail(f"llama.cpp server exited with {child.wait(timeout=10)}")
        assert httpx.get(f"{base}/health", timeout=10).status_code == 200
        yield f"{base}/v1"
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()


def _model(server_url: str, client: httpx.AsyncClient, **settings: object) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        server_url,
        "qwen2.5-coder",
        http_client=client,
        settings=SETTINGS.model_copy(update=settings),
        retry=RetryPolicy(max_attempts=1),
    )


@pytest.mark.anyio
async def test_real_server_tool_call_round_trip(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(50)) as client:
        model = _model(server_url, client)
        first = await model.invoke(ASK, [GET_SUM])
        assert [(c.name, c.arguments) for c in first.tool_calls] == [
            ("get-sum", {"a": 17, "b": 25})
        ]
        assert first.usage.input_tokens > 0
        assert first.usage.requests == 1

        # The assistant turn goes back with content "" beside tool_calls.
        result = ToolMessage(tool_call_id=first.tool_calls[0].id, name="get-sum", content="42")
        second = await model.invoke([*ASK, first, result], [GET_SUM])
        assert second.usage.output_tokens > 0
        assert second.content or second.tool_calls


@pytest.mark.anyio
async def test_real_server_streams_tokens_and_the_same_call(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(50)) as client:
        tokens = Tokens()
        answer = await _model(server_url, client).invoke(ASK, [GET_SUM], on_token=tokens)
    assert len(tokens.received) > 5
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("get-sum", {"a": 17, "b": 25})]
    assert answer.usage.input_tokens > 0  # from stream_options.include_usage


@pytest.mark.anyio
async def test_real_server_error_message_reaches_the_caller(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=httpx.Timeout(50)) as client:
        model = _model(server_url, client, extra_body={"messages": "not a list"})
        with pytest.raises(ModelHTTPError) as caught:
            await model.invoke(ASK, [])
    assert caught.value.status_code == 400
    assert caught.value.provider_message == "Expected 'messages' to be an array"


@pytest.mark.anyio
async def test_real_server_answers_in_a_schema_through_an_agent(server_url: str) -> None:
    schema = OutputSchema.from_json_schema(
        {
            "type": "object",
            "properties": {"total": {"type": "integer"}},
            "required": ["total"],
            "additionalProperties": False,
        }
    )
    async with httpx.AsyncClient(timeout=httpx.Timeout(50)) as client:
        spec = AgentSpec(
            name="adder",
            model=_model(server_url, client),
            tools=["calculator"],
            options=AgentOptions(output=schema, output_retries=2),
        )
        gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
        result = await gateway.run("adder", "What is 17 plus 25? Answer with the total.")
    # The text-tool-call path or a real tool call: either way a validated object comes out.
    assert result.error is None, result.error
    assert isinstance(result.structured, dict)
    assert result.structured == {"total": 42}
