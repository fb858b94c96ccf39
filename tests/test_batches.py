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
from pydantic import JsonValue
from trio.testing import MockClock

from agent import (
    AgentItem,
    AgentOptions,
    AgentResult,
    AssistantMessage,
    ChatMessage,
    EngineResponse,
    InProcessStore,
    MemoryStoreError,
    ModelHTTPError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    SQLiteStore,
    StepPaused,
    TokenCallback,
    ToolCall,
    ToolDefinition,
    ToolsAgent,
    Usage,
    UserMessage,
    store_from_url,
)
from agent.errors import ModelConnectionError
from gateway import AgentSpec, Gateway, RunState
from gateway.cli import main
from tests.prompt_model import PromptModel
from toolkits import FunctionToolkit, calculator, function_tool


class BatchWatcher:
    """Item `qN` asks the calculator for N * 2, then answers it; `q7` is refused by the
    provider (HTTP 400). Records the order of calls and how many were in flight at once."""

    name = "watcher"

    def __init__(self) -> None:
        self.log: list[int] = []
        self.times: list[tuple[float, int]] = []
        """(the clock's time, n) of every call."""
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
        self.times.append((anyio.current_time(), n))
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
@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
async def test_delay_between_batches_waits_once_before_each_later_batch() -> None:
    """On a clock that moves only when every task waits (trio's, jumping at once to the next
    deadline), the time of each model call counts the waits before it: none before the first
    batch, one before each later batch (a last batch of one item too), none between a batch's
    steps (each item calls the calculator, then answers)."""
    model = BatchWatcher()
    started = anyio.current_time()
    result = await batch_gateway(model, batch_size=2, delay_between_batches=60).run(
        "assistant", [AgentItem(prompt=f"q{n}") for n in range(5)]
    )
    assert [item.output for item in result.items] == ["0", "2", "4", "6", "8"]
    # Within a step the items' calls go in any order: sorted by time, then item.
    assert sorted((time - started, n) for time, n in model.times) == [
        *[(0, 0), (0, 0), (0, 1), (0, 1)],
        *[(60, 2), (60, 2), (60, 3), (60, 3)],
        *[(120, 4), (120, 4)],
    ]


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


class DropsOnce(BatchWatcher):
    """A `BatchWatcher` whose call for `q{n}` after its tool's result fails once: the
    provider's connection drops."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self._dropping: int | None = n

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        question = next(m.content for m in reversed(messages) if isinstance(m, UserMessage))
        if messages[-1].role == "tool" and question == f"q{self._dropping}":
            self._dropping = None
            self.log.append(int(question.removeprefix("q")))
            raise ModelConnectionError("openai: the connection was reset")
        return await super().invoke(messages, tools, on_token=on_token)


@pytest.mark.anyio
async def test_an_interrupted_item_resumes_after_its_tool_call_not_before_it() -> None:
    """Item 0 called the calculator, then its model failed while item 1 answered: the stored
    run resumes item 0 at the call after the tool (its tool ran once, its model was asked
    once more), and item 1 is not asked again."""
    ran: list[str] = []

    @function_tool(name="calculator", blocking=False)
    def counted(expression: str) -> str:
        """Evaluate an arithmetic expression."""
        ran.append(expression)
        return str(calculator.function(expression))

    model = DropsOnce(0)
    spec = AgentSpec(
        name="assistant", model=model, tools=["calculator"], options=AgentOptions(batch_size=2)
    )
    gateway = Gateway([FunctionToolkit("calculator", [counted])], [spec])
    items = [AgentItem(prompt="q0"), AgentItem(prompt="q1")]
    stored: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(RunState.model_validate_json(state.model_dump_json()))

    with pytest.raises(ModelConnectionError):
        await gateway.run("assistant", items, checkpoint=checkpoint)
    assert sorted(ran) == ["0 * 2", "1 * 2"]
    result = await gateway.resume(stored[-1], checkpoint=checkpoint)
    assert [item.output for item in result.items] == ["0", "2"]
    assert sorted(ran) == ["0 * 2", "1 * 2"]  # no tool call made twice
    # Item 0: its call, the one that failed, its answer. Item 1: its call, its answer.
    assert sorted(model.log) == [0, 0, 0, 1, 1]


@pytest.mark.anyio
async def test_fail_fast_ends_the_run_even_when_another_items_model_is_unreachable() -> None:
    """In one step item 0's request is refused (it fails alone) while item 1's provider cannot
    be reached: with fail_fast the run ends with its result, item 1 failing for item 0, rather
    than stopping to be resumed (which could only end it so)."""
    model = PromptModel(
        {"first": ["never"], "second": ["never"]},
        failures={
            "first": ModelHTTPError("openai: HTTP 400: bad", status_code=400, provider="openai"),
            "second": ModelConnectionError("openai: connection refused"),
        },
    )
    gateway = batch_gateway(model, batch_size=2, fail_fast=True)
    items = [AgentItem(prompt="first"), AgentItem(prompt="second"), AgentItem(prompt="third")]
    result = await gateway.run("assistant", items)
    assert [item.error for item in result.items] == [
        "the model rejected the request: openai: HTTP 400: bad",
        "not finished: item 0 failed and fail_fast is set",
        "not finished: item 0 failed and fail_fast is set",
    ]
    assert [question for question, _ in model.calls] == ["first", "second"]


@pytest.mark.anyio
async def test_items_fail_fast_ends_keep_the_calls_they_made() -> None:
    """Item 1 called a tool that does not exist (answered by the agent itself) in the step
    where item 0 failed: fail_fast ends it, and its steps still show that call."""
    wrong = ScriptedAnswer(tool_calls=[ScriptedCall(name="nope", arguments={}, id="n1")])
    model = PromptModel(
        {"first": ["never"], "second": [wrong, "never"]},
        failures={
            "first": ModelHTTPError("openai: HTTP 400: bad", status_code=400, provider="openai")
        },
    )
    result = await batch_gateway(model, batch_size=2, fail_fast=True).run(
        "assistant", [AgentItem(prompt="first"), AgentItem(prompt="second")]
    )
    second = result.items[1]
    assert second.error == "not finished: item 0 failed and fail_fast is set"
    assert second.steps is not None
    assert [(step.tool_call_id, step.tool) for step in second.steps] == [("n1", "nope")]
    assert second.steps[0].observation.startswith("Error: ")


class Paused(Exception):
    """A signal from outside the agent, as the gateway's pause for the client's own model."""


class PausesOnce(PromptModel):
    """A `PromptModel` whose first call for `pausing` raises `Paused`."""

    def __init__(self, script: dict[str, list[ScriptedAnswer | str]], pausing: str) -> None:
        super().__init__(script)
        self._pausing: str | None = pausing

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        if messages[-1].content == self._pausing:
            self._pausing = None
            raise Paused("waiting for an answer from outside")
        return await super().invoke(messages, tools, on_token=on_token)


@pytest.mark.anyio
async def test_a_pause_in_one_items_call_keeps_the_other_items_progress() -> None:
    """Item 1's call pauses (a signal, not a failure) while item 0 answers: the step raises
    `StepPaused` with the pause and item 0's answer, and the step made again from there asks
    item 1's model alone. An item alone in its step lets the pause through as itself."""
    model = PausesOnce({"first": ["one"], "second": ["two"]}, pausing="second")
    agent = ToolsAgent(model=model, options=AgentOptions(batch_size=2))
    items = [AgentItem(prompt="first"), AgentItem(prompt="second")]
    with pytest.raises(StepPaused) as caught:
        await agent.step(items)
    [signal] = caught.value.signals
    assert isinstance(signal, Paused)
    progress = caught.value.progress.metadata
    assert {i: r.output for i, r in progress.finished_items.items()} == {0: "one"}
    again = await agent.step(items, EngineResponse(action_responses=[], metadata=progress))
    assert isinstance(again, AgentResult)
    assert [item.output for item in again.items] == ["one", "two"]
    assert [question for question, _ in model.calls] == ["first", "second"]

    alone = PausesOnce({"second": ["two"]}, pausing="second")
    with pytest.raises(Paused):
        await ToolsAgent(model=alone).step([AgentItem(prompt="second")])


ITEM_SHAPE = 'an item is a JSON string or {"prompt": "...", "session_id": "...", "context": {...}}'


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
    assert capsys.readouterr().err == (
        f"error: {items}:1: prompt: Field required; question: unknown key\n"
    )
    assert main(["run", "q", "--items", str(items)]) == 2
    assert "--items takes no question" in capsys.readouterr().err
    for blank in ('{"prompt": ""}', '"  "'):
        items.write_text(f'"first"\n{blank}\n')
        assert main(["run", "--items", str(items), "--model", f"scripted:{script}"]) == 2
        assert f"{items}:2: the item's prompt is empty" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"prompt": "a", "promt": "b"}', "promt: unknown key (did you mean 'prompt'?)"),
        (
            '{"prompt": "a", "sesion_id": "s"}',
            "sesion_id: unknown key (did you mean 'session_id'?)",
        ),
        ('{"prompt": 5}', "prompt: Input should be a valid string, not 5"),
        ('{"prompt": "a", "context": [1]}', "context: Input should be a valid dictionary"),
        ("[1, 2]", f"{ITEM_SHAPE}, not an array"),
        ("null", f"{ITEM_SHAPE}, not null"),
    ],
)
def test_a_bad_items_line_is_one_line_naming_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, said: str
) -> None:
    """Was pydantic's own dump: several lines, its links, no suggestion for a misspelt key."""
    items = tmp_path / "items.jsonl"
    items.write_text(f'"fine"\n{line}\n')
    assert main(["run", "--items", str(items), "--model", "scripted:none.json"]) == 2
    assert capsys.readouterr().err == f"error: {items}:2: {said}\n"


@pytest.mark.parametrize("session", ["", "x" * 257, "a\nb"])
def test_an_items_bad_session_id_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], session: str
) -> None:
    """Found by the run, it was a stored run stopped after the other items had spent their
    model calls, which every resume stopped the same way; `--session` was refused at once."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "one"}, {"content": "two"}]))
    items = tmp_path / "items.jsonl"
    items.write_text(f'"first"\n{json.dumps({"prompt": "a", "session_id": session})}\n')
    runs = ["--state-dir", str(tmp_path / "runs")]
    run = ["run", "--items", str(items), "--model", f"scripted:{script}", "--json", *runs]
    assert main(run) == 2
    out, err = capsys.readouterr()
    problem = (
        "a session id has no control characters"
        if session == "a\nb"
        else "a session id has 1 to 256 characters"
    )
    assert (out, err) == ("", f"error: {items}:2: bad session id {session[:40]!r}: {problem}\n")
    assert main(["runs", "list", "--json", *runs]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_an_items_line_names_the_agent_it_was_handed_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[agents.triage]\nhandoffs = ["billing"]\n[agents.billing]\n')
    script = tmp_path / "answers.json"
    handing: dict[str, JsonValue] = {"tool_calls": [{"name": "billing", "arguments": {}}]}
    script.write_text(json.dumps([handing, {"content": "42 EUR"}, {"content": "hello"}]))
    items = tmp_path / "items.jsonl"
    items.write_text('"my bill?"\n"hi"\n')
    run = ["run", "--items", str(items), "--config", str(config), "--agent", "triage"]
    assert main([*run, "--model", f"scripted:{script}", "--no-store"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        {"index": 0, "output": "42 EUR", "error": None, "handoff": "billing"},
        {"index": 1, "output": "hello", "error": None},
    ]


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
    store = SQLiteStore(tmp_path / "sessions.sqlite3")
    memory = SessionMemory(store)
    try:
        for _ in range(3):
            model = ScriptedModel(script)
            options = AgentOptions(batch_size=2)
            spec = AgentSpec("a", model, tools=["calculator"], options=options, memory=memory)
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
    finally:
        await store.aclose()  # its file and the -wal and -shm stayed open for the session


@pytest.mark.anyio
async def test_an_item_making_no_model_call_does_not_hold_up_the_scripts_next_item() -> None:
    """Item 0's session history cannot be read (its Redis is down), so it makes no model call;
    item 1, waiting for item 0 to take its turn at the script first, goes on, and the run
    stops with the store's error."""
    memory = SessionMemory(store_from_url("redis://127.0.0.1:1/0"))
    model = ScriptedModel(["second: answered"])
    spec = AgentSpec("a", model, options=AgentOptions(batch_size=2), memory=memory)
    items = [AgentItem(prompt="first", session_id="s"), AgentItem(prompt="second")]
    try:
        with (
            anyio.fail_after(20),
            pytest.raises(MemoryStoreError, match=re.escape("chat memory redis://127.0.0.1:1/0: ")),
        ):
            await Gateway([], [spec]).run("a", items)
    finally:
        await memory.store.aclose()
    assert [messages[-1].content for messages, _ in model.calls] == ["second"]


@pytest.mark.anyio
async def test_items_of_a_batch_on_one_session_take_turns_and_read_the_turn_before() -> None:
    model = PromptModel(
        {"My name is Ada.": ["Hello Ada."], "What is my name?": ["Ada."], "Hi": ["Hi."]}
    )
    spec = AgentSpec("assistant", model, options=AgentOptions(batch_size=3))
    gateway = Gateway([], [spec], memory=SessionMemory(InProcessStore()))
    items = [
        AgentItem(prompt="My name is Ada.", session_id="dup"),
        AgentItem(prompt="Hi", session_id="other"),
        AgentItem(prompt="What is my name?", session_id="dup"),
    ]
    result = await gateway.run("assistant", items)
    assert [item.output for item in result.items] == ["Hello Ada.", "Hi.", "Ada."]
    asked = [(question, [m.content for m in sent[1:]]) for question, sent in model.calls]
    # The two on other sessions went side by side; the second on "dup" after the first's turn.
    assert sorted(asked[:2]) == [("Hi", ["Hi"]), ("My name is Ada.", ["My name is Ada."])]
    assert asked[2] == (
        "What is my name?",
        ["My name is Ada.", "Hello Ada.", "What is my name?"],
    )
