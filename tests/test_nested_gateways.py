"""Gateways inside gateways: gateway A has gateway B as an MCP server, as real processes.

A's agent calls B's agent as the tool `b__math`; B runs it in place (its agent on its own
tools) and its progress notifications land in A's trace under A's tool span. Loops between
gateways (A runs B, B runs A) stop at the depth limit, and cancelling A's run cancels the tool
B is running.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from pydantic import JsonValue

from agent import ScriptedModel, ToolMessage, Usage
from gateway import TraceEvent
from gateway.assembly import open_gateway
from gateway.config import Config, load_config
from tests.server.processes import REPO, SCRIPT, http_server
from tests.servers.openai_stub import openai_stub

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

EXAMPLE = REPO / "examples" / "two_gateways"
ANSWER = "17 shirts at 25 dollars cost 459 dollars with 8% tax."


class Recorder:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    async def __call__(self, event: TraceEvent) -> None:
        self.events.append(event)

    def start_of(self, kind: str, name: str) -> TraceEvent:
        return next(e for e in self.events if (e.kind, e.name, e.phase) == (kind, name, "start"))

    def end_of(self, span: TraceEvent) -> TraceEvent:
        return next(e for e in self.events if e.id == span.id and e.phase != "start")

    def progress_under(self, span: TraceEvent) -> list[str]:
        """The messages of the progress events whose parent is `span`."""
        messages: list[str] = []
        for event in self.events:
            if event.phase == "progress" and event.parent_id == span.id:
                assert isinstance(event.output, dict)
                message = event.output["message"]
                assert isinstance(message, str)
                messages.append(message)
        return messages


class StderrWatch(logging.Handler):
    """What a stdio server writes to stderr (its node logs each line): await a line by text."""

    def __init__(self, node: str) -> None:
        super().__init__(logging.INFO)
        self.logger = logging.getLogger(f"toolkits.mcp.{node}")
        self.lines: list[str] = []
        self._waiting: list[tuple[str, anyio.Event]] = []

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        for text, event in self._waiting:
            if text in line:
                event.set()

    async def wait_for(self, text: str) -> None:
        """Unbounded: wrap it in `anyio.fail_after`."""
        if not any(text in line for line in self.lines):
            event = anyio.Event()
            self._waiting.append((text, event))
            await event.wait()

    @contextmanager
    def attached(self) -> Generator[StderrWatch]:
        level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)
        try:
            yield self
        finally:
            self.logger.removeHandler(self)
            self.logger.setLevel(level)


def script(path: Path, *answers: JsonValue) -> str:
    """Write a scripted model's file (a string is a final answer); returns its name."""
    path.write_text(json.dumps([{"content": a} if isinstance(a, str) else a for a in answers]))
    return path.name


def call(tool: str, **arguments: JsonValue) -> JsonValue:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def serve_stdio(config: Path, **env: str) -> str:
    """A `[mcpServers.NAME]` body starting `agent-gateway serve --stdio` on `config`, on this
    checkout's code (a stdio server gets only a few of our environment variables), with `env`
    too."""
    args = json.dumps(["serve", "--stdio", "--config", str(config)])
    passed = "".join(f", {name} = {json.dumps(value)}" for name, value in env.items())
    return (
        f"command = {json.dumps(str(SCRIPT))}\nargs = {args}\ncwd = {json.dumps(str(REPO))}\n"
        f"env = {{PYTHONPATH = {json.dumps(str(REPO))}{passed}}}\n"
    )


def example_over_stdio() -> Config:
    """The example's A, starting B by the script's full path (the venv need not be on PATH),
    in A's folder as the file says, on this checkout's code."""
    config = load_config(EXAMPLE / "a.toml")
    assert config.mcp_servers["b"].cwd == str(EXAMPLE)
    update = {"command": str(SCRIPT), "env": {"PYTHONPATH": str(REPO)}}
    b = config.mcp_servers["b"].model_copy(update=update)
    return config.model_copy(update={"mcp_servers": {"b": b}})


def check_b_progress_nested(recorder: Recorder) -> None:
    """A's trace has B's model and tool calls as progress under A's `b__math` span."""
    agent = recorder.start_of("agent", "assistant")
    tool = recorder.start_of("tool", "b__math")
    assert tool.parent_id == agent.id
    assert recorder.end_of(tool).phase == "end"
    messages = recorder.progress_under(tool)
    assert any(
        m.startswith("model scripted:math.json: answered") and m.endswith("calling calculator")
        for m in messages
    )
    assert "tool calculator: running" in messages
    assert any(m.startswith("tool calculator: done") for m in messages)
    progress = [e for e in recorder.events if e.phase == "progress"]
    assert all(e.parent_id == tool.id for e in progress)


async def test_an_agent_calls_another_gateways_agent_over_stdio_and_traces_its_progress() -> None:
    recorder = Recorder()
    with anyio.fail_after(30):
        async with open_gateway(example_over_stdio()) as gateway:
            result = await gateway.run(
                "assistant", "What do 17 shirts at 25 dollars cost, with 8% tax?", hooks=[recorder]
            )
    assert result.error is None
    assert result.output == ANSWER
    end = recorder.end_of(recorder.start_of("tool", "b__math"))
    assert end.output == {"response": "459"}  # B's answer, not its usage
    check_b_progress_nested(recorder)


async def test_an_agent_calls_another_gateways_agent_over_http(tmp_path: Path) -> None:
    a = tmp_path / "a.toml"
    async with http_server(EXAMPLE / "b.toml") as b:
        assert b.url.startswith("http://127.0.0.1:")
        a.write_text(
            f"[mcpServers.b]\nurl = {json.dumps(b.url)}\n"
            '[agents.assistant]\nmodel = "scripted:assistant.json"\ntools = ["b"]\n'
        )
        (tmp_path / "assistant.json").write_text((EXAMPLE / "assistant.json").read_text())
        recorder = Recorder()
        with anyio.fail_after(30):
            async with open_gateway(load_config(a)) as gateway:
                result = await gateway.run("assistant", "17 shirts with tax?", hooks=[recorder])
    assert result.output == ANSWER
    check_b_progress_nested(recorder)


def model_usages(recorder: Recorder) -> list[Usage]:
    """What each model call in the trace cost (this gateway's own models)."""
    ends = [e for e in recorder.events if e.kind == "model" and e.phase == "end"]
    return [Usage.model_validate(cast(dict[str, Any], e.output)["usage"]) for e in ends]


async def test_a_served_agents_answer_is_read_and_its_usage_rolls_up(tmp_path: Path) -> None:
    prompt = "17 * 25 dollars, plus 8% tax"  # what A's model asks B's math agent
    async with open_gateway(load_config(EXAMPLE / "b.toml")) as b_alone:
        b_usage = (await b_alone.run("math", prompt)).usage
    assert b_usage.input_tokens > 0
    a = tmp_path / "a.toml"
    (tmp_path / "assistant.json").write_text((EXAMPLE / "assistant.json").read_text())
    async with http_server(EXAMPLE / "b.toml") as b:
        tools = f"[mcpServers.b]\nurl = {json.dumps(b.url)}\n"
        agent = '[agents.assistant]\nmodel = "scripted:assistant.json"\ntools = ["b"]\n'
        a.write_text(tools + agent)
        recorder = Recorder()
        with anyio.fail_after(30):
            async with open_gateway(load_config(a)) as gateway:
                model = gateway.agents["assistant"].model
                assert isinstance(model, ScriptedModel)
                result = await gateway.run("assistant", "17 shirts with tax?", hooks=[recorder])
        # A's model read B's answer, and A's usage is its own and B's.
        [observed] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
        assert observed == "459"
        first, second = model_usages(recorder)
        assert result.usage == first + second + b_usage
    # A budget that A's first call leaves room for is spent once B's usage is counted (B's
    # scripted model, like A's, answers one run: a B of its own).
    budget = first.total_tokens + 1
    async with http_server(EXAMPLE / "b.toml") as b:
        tools = f"[mcpServers.b]\nurl = {json.dumps(b.url)}\n"
        a.write_text(f"{tools}{agent}token_budget = {budget}\n")
        with anyio.fail_after(30):
            async with open_gateway(load_config(a)) as gateway:
                stopped = await gateway.run("assistant", "17 shirts with tax?")
    assert stopped.usage == first + b_usage
    assert (stopped.error or "").startswith(f"Token budget ({budget}) exceeded")


async def test_gateways_that_call_each_other_stop_at_the_depth_limit(tmp_path: Path) -> None:
    # A's agent asks B's, whose agent asks A's again: A -> B -> A -> B, where the fourth
    # gateway refuses (depth limit 3). Each also starts the other over stdio, so without a
    # limit on that too, starting A would start copies without end before any call.
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a_script = script(tmp_path / "a.json", call("b__math", prompt="ask B"), "A is done.")
    b_script = script(tmp_path / "b.json", call("a__assistant", prompt="ask A"), "B is done.")
    for path, agent, model, (server, server_config) in (
        (a, "assistant", a_script, ("b", b)),
        (b, "math", b_script, ("a", a)),
    ):
        path.write_text(
            "[gateway]\nmax_depth = 3\n"
            f"[mcpServers.{server}]\n{serve_stdio(server_config)}"
            f'[agents.{agent}]\nmodel = "scripted:{model}"\ntools = ["{server}"]\n'
            "return_intermediate_steps = true\n"
        )
    recorder = Recorder()
    with anyio.fail_after(45):
        async with open_gateway(load_config(a)) as gateway:
            model = gateway.agents["assistant"].model
            assert isinstance(model, ScriptedModel)
            result = await gateway.run("assistant", "loop?", hooks=[recorder])
    assert result.output == "A is done."
    # The refusal is an observation of the third gateway's agent, which it returned among its
    # steps to B, and B to us.
    [observed] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    refusal = "agent 'math' failed: refused: the request arrives 3 levels deep, the depth limit"
    assert refusal in observed
    assert "(3, max_depth), counting each agent on the calling gateways" in observed
    # It also came up as progress, relayed through two gateways.
    messages = recorder.progress_under(recorder.start_of("tool", "b__math"))
    failed = [m for m in messages if "tool b__math: failed" in m]
    assert len(failed) == 1
    assert failed[0].startswith("tool a__assistant: tool b__math: failed in ")
    assert "the depth limit (3, max_depth)" in failed[0]


async def test_a_key_set_where_the_calling_gateway_runs_reaches_the_inner_one_only_in_its_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stdio server gets only a few of the gateway's variables and its own `env`: B's model
    said "set OPENAI_API_KEY" to a user who had set it where A runs. B now says the key is not
    in its environment, and how A passes it; passed in `env`, B's model gets it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-set-where-a-runs")
    b = tmp_path / "b.toml"
    b.write_text('[agents.math]\nmodel = "openai:gpt-4.1-mini"\n')
    with openai_stub(["459"]) as stub:
        told: list[str] = []
        for passed in ({}, {"OPENAI_API_KEY": "${OPENAI_API_KEY}"}):
            a = tmp_path / "a.toml"
            answers = script(tmp_path / "a.json", call("b__math", prompt="17 * 27"), "done")
            a.write_text(
                f"[mcpServers.b]\n{serve_stdio(b, OPENAI_BASE_URL=stub.url, **passed)}"
                f'[agents.assistant]\nmodel = "scripted:{answers}"\ntools = ["b"]\n'
            )
            with anyio.fail_after(45):
                async with open_gateway(load_config(a)) as gateway:
                    model = gateway.agents["assistant"].model
                    assert isinstance(model, ScriptedModel)
                    assert (await gateway.run("assistant", "go")).output == "done"
            [observed] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
            told.append(str(observed))
    assert len(stub.requests) == 1  # B's model was asked once: with the key passed
    missing, answered = told
    assert "agents.math.model: openai needs an API key: set OPENAI_API_KEY in this " in missing
    assert "gateway's environment: it runs as a stdio MCP server of another gateway" in missing
    assert 'env = { OPENAI_API_KEY = "${OPENAI_API_KEY}" }' in missing
    assert "sk-set-where-a-runs" not in missing
    assert answered == "459"


async def test_cancelling_the_outer_run_cancels_the_tool_the_inner_gateway_runs(
    tmp_path: Path,
) -> None:
    a, b, marker = tmp_path / "a.toml", tmp_path / "b.toml", tmp_path / "cancelled.txt"
    b_script = script(tmp_path / "b.json", call("wait", marker=str(marker)), "never")
    b.write_text(
        '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
        f'[agents.math]\nmodel = "scripted:{b_script}"\ntools = ["wait"]\n'
    )
    a_script = script(tmp_path / "a.json", call("b__math", prompt="wait"), "never")
    a.write_text(
        f"[mcpServers.b]\n{serve_stdio(b)}"
        f'[agents.assistant]\nmodel = "scripted:{a_script}"\ntools = ["b"]\n'
    )
    recorder = Recorder()
    with StderrWatch("b").attached() as b_stderr, anyio.fail_after(30):
        async with open_gateway(load_config(a)) as gateway:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: gateway.run("assistant", "wait", hooks=[recorder]))
                await b_stderr.wait_for("wait_until_cancelled: started")
                tg.cancel_scope.cancel()
            # B is still running: its tool saw the cancellation, not the shutdown.
            await b_stderr.wait_for("wait_until_cancelled: cancelled")
            assert marker.read_text() == "cancelled"
    assert recorder.end_of(recorder.start_of("tool", "b__math")).error == "cancelled"


async def test_a_served_agent_on_the_callers_model_is_counted_once(tmp_path: Path) -> None:
    """B's agent runs on A's model (sampling): each request B makes, A's model answers and
    counts; B's rolled-up usage counts it too, and A did not add it twice."""
    b = tmp_path / "b.toml"
    b.write_text('[agents.helper]\nmodel = "sampling"\ndescription = "Answers on your model."\n')
    script = [
        {"tool_calls": [{"name": "b__helper", "arguments": {"prompt": "2 + 2?"}}]},
        {"content": "4"},  # A's model, answering B's sampling request
        {"content": "B says 4."},
    ]
    (tmp_path / "assistant.json").write_text(json.dumps(script))
    a = tmp_path / "a.toml"
    async with http_server(b) as served:
        a.write_text(
            f"[mcpServers.b]\nurl = {json.dumps(served.url)}\n"
            '[agents.assistant]\nmodel = "scripted:assistant.json"\ntools = ["b"]\n'
        )
        recorder = Recorder()
        with anyio.fail_after(30):
            async with open_gateway(load_config(a)) as gateway:
                result = await gateway.run("assistant", "Ask B.", hooks=[recorder])
    assert result.output == "B says 4."
    own = model_usages(recorder)
    assert len(own) == 3  # its two turns and its answer to B
    assert result.usage == sum(own, Usage())  # was: one request more, B's count of A's answer


async def test_a_trusted_gateways_agent_reads_the_calling_runs_context(tmp_path: Path) -> None:
    """With `forward_context`, B's agent is given A's run's context (its system message reads
    it), and A's model is offered B's agent without `context`; without it, B's `{{ context.
    ... }}` has nothing to read and B's run fails saying so."""
    b = tmp_path / "b.toml"
    a_script = [call("b__helper", prompt="Who am I?"), {"content": "A is done."}]
    with openai_stub(["You are Ada."]) as b_model:
        b.write_text(
            f'[agents.helper]\nmodel = "{b_model.spec}"\n'
            'system = "You help {{ context.customer.name }}."\n'
        )
        async with http_server(b) as served:
            observed: list[str] = []
            for forward in ("true", "false"):
                (tmp_path / "a.json").write_text(json.dumps(a_script))
                a = tmp_path / "a.toml"
                a.write_text(
                    f"[mcpServers.b]\nurl = {json.dumps(served.url)}\n"
                    f"forward_context = {forward}\n"
                    '[agents.assistant]\nmodel = "scripted:a.json"\ntools = ["b"]\n'
                )
                with anyio.fail_after(30):
                    async with open_gateway(load_config(a)) as gateway:
                        model = gateway.agents["assistant"].model
                        assert isinstance(model, ScriptedModel)
                        context: dict[str, JsonValue] = {"customer": {"name": "Ada"}}
                        result = await gateway.run("assistant", "Hi", context=context)
                assert result.output == "A is done."
                [offered] = [t for t in model.calls[0][1] if t.name == "b__helper"]
                properties = cast(dict[str, Any], offered.input_schema["properties"])
                assert ("context" in properties) is (forward == "false")
                [said] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
                observed.append(said)
    assert [m["role"] for m in b_model.messages(0)] == ["system", "user"]
    assert b_model.messages(0)[0]["content"] == "You help Ada."
    assert observed[0] == "You are Ada."
    assert len(b_model.requests) == 1  # B's second run failed before its model call
    missing = "the system message uses {{ context.customer.name }}, but the run's context has no"
    assert f"{missing} 'customer' in context" in observed[1]
