"""Runs of many items: batches, items that fail alone (or, with fail_fast, end the run), and
a step that a failing model cannot make repeat itself, through the engine and its checkpoints."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from agent import (
    AgentItem,
    AgentOptions,
    AssistantMessage,
    ChatMessage,
    InProcessStore,
    ModelHTTPError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    SQLiteStore,
    TokenCallback,
    ToolCall,
    ToolDefinition,
    Usage,
    UserMessage,
)
from agent.errors import ModelConnectionError
from gateway import AgentSpec, Gateway, RunState
from gateway.cli import main
from tests.prompt_model import PromptModel
from toolkits import FunctionToolkit, calculator


class BatchWatcher:
    """Item `qN` asks the calculator for N * 2, then answers it; `q7` is refused by the
    provider (HTTP 400). Records the order of calls and how many were in flight at once."""

    name = "watcher"

    def __init__(self) -> None:
        self.log: list[int] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        question = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        n = int(question.removeprefix("q"))
        self.log.append(n)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        for _ in range(5):  # let the other items' calls begin before this one ends
            await anyio.lowlevel.checkpoint()
        self.in_flight -= 1
        if n == 7:
            raise ModelHTTPError(
                "openai: HTTP 400: the prompt is too long", status_code=400, provider="openai"
            )
        if messages[-1].role == "user":
            call = ToolCall(id=f"c{n}", name="calculator", arguments={"expression": f"{n} * 2"})
            return AssistantMessage(tool_calls=(call,), usage=Usage(requests=1))
        return AssistantMessage(content=messages[-1].content, usage=Usage(requests=1))


def batch_gateway(model: BatchWatcher | PromptModel, **options: object) -> Gateway:
    spec = AgentSpec(
        name="assistant",
        model=model,
        tools=["calculator"],
        options=AgentOptions(**options),  # type: ignore[arg-type]
        memory=SessionMemory(InProcessStore()),
    )
    return Gateway([FunctionToolkit("calculator", [calculator])], [spec])


ITEMS = [AgentItem(prompt=f"q{n}", session_id=f"s{n}") for n in range(20)]


@pytest.mark.anyio
async def test_twenty_items_run_in_batches_of_five_and_a_failing_item_fails_alone() -> None:
    model = BatchWatcher()
    result = await batch_gateway(model, batch_size=5).run("assistant", ITEMS)
    for n, item in enumerate(result.items):
        if n == 7:
            assert item.output is None
            assert item.error is not None
            assert "the model rejected the request" in item.error
            assert "HTTP 400" in item.error
        else:
            assert (item.output, item.error) == (str(n * 2), None)
    assert model.most_in_flight == 5
    batches = [n // 5 for n in model.log]
    assert batches == sorted(batches)  # a batch ends before the next begins
    assert len(model.log) == 19 * 2 + 1


@pytest.mark.anyio
async def test_fail_fast_ends_the_run_at_the_first_failing_item() -> None:
    model = BatchWatcher()
    result = await batch_gateway(model, batch_size=5, fail_fast=True).run("assistant", ITEMS)
    assert [item.output for item in result.items[:5]] == ["0", "2", "4", "6", "8"]
    for item in result.items[8:]:
        assert item.error == "not finished: item 7 failed and fail_fast is set"
    assert max(model.log) == 9  # no later batch began


@pytest.mark.anyio
async def test_delay_between_batches_waits_before_each_later_batch() -> None:
    model = BatchWatcher()
    items = [item for item in ITEMS if item.prompt != "q7"][:6]
    started = anyio.current_time()
    await batch_gateway(model, batch_size=2, delay_between_batches=0.05).run("assistant", items)
    assert anyio.current_time() - started >= 0.1  # two later batches


@pytest.mark.anyio
async def test_a_run_stopped_by_its_model_resumes_without_repeating_a_finished_item() -> None:
    call = ScriptedAnswer(
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "1"})]
    )
    model = PromptModel(
        {"first": ["one"], "second": [call, "two"]},
        failures={"second": ModelConnectionError("the provider is down")},
    )
    gateway = batch_gateway(model, batch_size=2)
    memory = gateway.agents["assistant"].memory
    assert isinstance(memory, SessionMemory)
    items = [AgentItem(prompt="first", session_id="a"), AgentItem(prompt="second", session_id="b")]
    stored: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(RunState.model_validate_json(state.model_dump_json()))

    with pytest.raises(ModelConnectionError):
        await gateway.run("assistant", items, checkpoint=checkpoint)
    assert stored[-1].request is not None
    assert stored[-1].request.metadata.finished_items[0].output == "one"
    result = await gateway.resume(stored[-1], checkpoint=checkpoint)
    assert [item.output for item in result.items] == ["one", "two"]
    assert model.asked("first") == 1
    assert [len(await memory.store.turns(s)) for s in ("a", "b")] == [1, 1]


def test_run_items_reads_json_lines_and_writes_one_line_per_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "one"}, {"content": "two"}]))
    items = tmp_path / "items.jsonl"
    items.write_text('"first"\n\n{"prompt": "second", "session_id": "s2"}\n')
    assert main(["run", "--items", str(items), "--model", f"scripted:{script}"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"index": 0, "output": "one", "error": None},
        {"index": 1, "output": "two", "error": None},
    ]
    items.write_text('{"question": "wrong key"}\n')
    assert main(["run", "--items", str(items), "--model", f"scripted:{script}"]) == 2
    assert f"{items}:1: an item is a JSON string" in capsys.readouterr().err
    assert main(["run", "q", "--items", str(items)]) == 2
    assert "--items takes no question" in capsys.readouterr().err
    for blank in ('{"prompt": ""}', '"  "'):
        items.write_text(f'"first"\n{blank}\n')
        assert main(["run", "--items", str(items), "--model", f"scripted:{script}"]) == 2
        assert f"{items}:2: the item's prompt is empty" in capsys.readouterr().err


@pytest.mark.parametrize("store", ["--no-store", "--state-dir"])
def test_an_items_lone_surrogate_is_the_replacement_character_and_no_item_is_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store: str
) -> None:
    """`{"prompt": "smile \\ud83d"}` (half an emoji) was a traceback, no JSON and exit 1, and
    the other items were lost with it: no run can digest or store such a string."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "one"}, {"content": "two"}]))
    items = tmp_path / "items.jsonl"
    items.write_text('{"prompt": "smile \\ud83d", "session_id": "s\\udc00"}\n"fine"\n')
    where = [store] if store == "--no-store" else [store, str(tmp_path / "runs")]
    run = ["run", "--items", str(items), "--model", f"scripted:{script}", "--json", *where]
    assert main(run) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line.get("output") for line in lines[:2]] == ["one", "two"]
    assert lines[-1]["status"] == "succeeded"
    if store != "--no-store":
        assert main(["runs", "show", lines[-1]["run_id"], "--json", *where]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert [item["prompt"] for item in shown["state"]["items"]] == ["smile \ufffd", "fine"]


def test_run_items_says_on_stderr_how_many_items_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    looping = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]}
    script.write_text(json.dumps([{"content": "one"}, looping, {"content": "three"}]))
    config = tmp_path / "c.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.a]\nmodel = "scripted:answers.json"\ntools = ["calculator"]\n'
        "max_iterations = 1\n"
    )
    items = tmp_path / "items.jsonl"
    items.write_text('"first"\n"second"\n"third"\n')
    assert main(["run", "--items", str(items), "--config", str(config), "--no-store"]) == 1
    out, err = capsys.readouterr()
    assert [json.loads(line)["output"] for line in out.splitlines()] == ["one", None, "three"]
    reason = "Max iterations (1) reached. The agent could not complete the task within the"
    assert err.startswith(f"1 of 3 items failed (item 1: {reason}")
    script.write_text(json.dumps([looping, looping, {"content": "three"}]))
    assert main(["run", "--items", str(items), "--config", str(config), "--no-store"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"2 of 3 items failed (the first, item 0: {reason}")


def test_a_stored_run_of_items_resumes_where_it_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "first.json"
    first.write_text(json.dumps([{"content": "one"}]))  # then it has nothing more to say
    items = tmp_path / "items.jsonl"
    items.write_text('"first"\n"second"\n')
    state = ["--state-dir", str(tmp_path / "runs")]
    assert main(["run", "--items", str(items), "--model", f"scripted:{first}", *state]) == 1
    err = capsys.readouterr().err
    match = re.search(r"agent-gateway resume (\w+)", err)
    assert match is not None, err
    second = tmp_path / "second.json"
    second.write_text(json.dumps([{"content": "two"}]))
    resume = ["resume", match.group(1), "--model", f"scripted:{second}", *state]
    assert main(resume) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["output"] for line in lines] == ["one", "two"]  # the first was not asked again


@pytest.mark.anyio
async def test_a_scripts_answers_go_to_a_batchs_items_in_item_order(tmp_path: Path) -> None:
    """The first item reads its session's history from SQLite (a worker thread) before its
    call, the second has none: the second reaches the model first, yet each step's answers
    are the script's in item order, every run alike."""
    script = [
        ScriptedAnswer(tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "1"})]),
        "second: no tool",
        "first: after the tool",
    ]
    memory = SessionMemory(SQLiteStore(tmp_path / "sessions.sqlite3"))
    for _ in range(3):
        model = ScriptedModel(script)
        spec = AgentSpec(
            "a", model, tools=["calculator"], options=AgentOptions(batch_size=2), memory=memory
        )
        gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
        items = [AgentItem(prompt="first", session_id="s"), AgentItem(prompt="second")]
        with anyio.fail_after(30):
            result = await gateway.run("a", items)
        assert [item.output for item in result.items] == [
            "first: after the tool",
            "second: no tool",
        ]
        asked = [messages[-1].content for messages, _ in model.calls]
        assert asked[:2] == ["first", "second"]
