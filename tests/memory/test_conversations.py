"""Conversations through the agent: turns stored as their real messages, windows, summaries,
and a step that a failing model cannot make repeat itself."""

from __future__ import annotations

import os
import signal
import sqlite3
import uuid
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx
import pytest
from pydantic import JsonValue
from redis.asyncio import Redis

from agent import (
    ActionResponse,
    AgentItem,
    AgentOptions,
    AgentResult,
    AssistantMessage,
    ChatMessage,
    EngineRequest,
    EngineResponse,
    InProcessStore,
    MemoryStoreError,
    ModelError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    SQLiteStore,
    StepInterrupted,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    ToolsAgent,
    UserMessage,
    store_from_url,
)
from agent.errors import MemoryWriteUnknown, ModelConnectionError
from agent.memory import is_valid_history
from agent.memory.redis_store import RedisStore
from agent.model import TokenCallback
from agent.models import OpenAICompatibleModel
from agent.tools_agent import WarningCallback
from gateway import AgentSpec, Gateway, RunState
from tests.models.support import FakeProvider, json_response
from tests.models.test_openai import call as calling
from tests.models.test_openai import completion
from tests.prompt_model import PromptModel

pytestmark = pytest.mark.anyio

CALC = ToolDefinition(name="calculator", source_node="calculator")


def collect(warnings: list[tuple[int, str]]) -> WarningCallback:
    async def warn(item: int, warning: str) -> None:
        warnings.append((item, warning))

    return warn


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def answer_all(request: EngineRequest, data: JsonValue = "42") -> EngineResponse:
    responses = [ActionResponse(action=a, data={"response": data}) for a in request.actions]
    return EngineResponse(action_responses=responses, metadata=request.metadata)


async def run_to_end(
    agent: ToolsAgent, items: list[AgentItem], data: JsonValue = "42"
) -> AgentResult:
    outcome = await agent.step(items)
    while isinstance(outcome, EngineRequest):
        outcome = await agent.step(items, answer_all(outcome, data))
    return outcome


async def test_a_turn_with_tool_calls_comes_back_as_its_real_messages() -> None:
    memory = SessionMemory(InProcessStore())
    model = ScriptedModel([call("calculator", expression="6*7"), "It is 42.", "You asked 6*7."])
    agent = ToolsAgent(model=model, tools=[CALC], memory=memory)
    await run_to_end(agent, [AgentItem(prompt="What is 6*7?", session_id="s")])
    await run_to_end(agent, [AgentItem(prompt="What did I ask?", session_id="s")])
    sent = model.calls[2][0]
    assert [m.role for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert isinstance(sent[2], AssistantMessage)
    assert sent[2].tool_calls[0].arguments == {"expression": "6*7"}
    assert isinstance(sent[3], ToolMessage)
    assert (sent[3].tool_call_id, sent[3].content) == (sent[2].tool_calls[0].id, "42")
    assert [sent[4].content, sent[5].content] == ["It is 42.", "What did I ask?"]


async def test_a_step_made_again_after_its_turn_was_saved_reads_the_history_before_it() -> None:
    """A run that crashed after its turn was saved, before its progress was stored, resumed
    from the step before: its model read the session with that turn in it, its own question
    and answer before the same question again. A run's own turn (`run_id:index`) stays out
    of its history."""
    memory = SessionMemory(InProcessStore())
    earlier = ToolsAgent(model=ScriptedModel(["Earlier."]), memory=memory)
    await run_to_end(earlier, [AgentItem(prompt="before", session_id="s")])
    items = [AgentItem(prompt="one", session_id="s")]
    await run_to_end(ToolsAgent(model=ScriptedModel(["First."]), memory=memory, run_id="r1"), items)
    again = ScriptedModel(["First again."])
    await run_to_end(ToolsAgent(model=again, memory=memory, run_id="r1"), items)
    assert [m.content for m in again.calls[0][0][1:]] == ["before", "Earlier.", "one"]
    assert [t.key for t in await memory.store.turns("s")][1:] == ["r1:0"]  # stored once


class ImpatientSQLiteStore(SQLiteStore):
    """A SQLite store that waits for no other process's lock (SQLite's own wait is 30 s)."""

    def _connect(self) -> sqlite3.Connection:
        db = super()._connect()
        db.execute("PRAGMA busy_timeout = 0")
        return db


async def test_a_turn_the_store_cannot_save_says_the_answer_is_not_kept(tmp_path: Path) -> None:
    """A SQLite memory locked by another process failed the turn once its answer had been
    shown as it streamed, saying only `database is locked`: not that the session would not
    have it."""
    path = tmp_path / "memory.sqlite3"
    store = ImpatientSQLiteStore(path)
    agent = ToolsAgent(model=ScriptedModel(["First.", "Second."]), memory=SessionMemory(store))
    await run_to_end(agent, [AgentItem(prompt="one", session_id="s")])
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # a `sqlite3` shell, a backup: its write lock held
        with pytest.raises(StepInterrupted) as caught:
            await agent.step([AgentItem(prompt="two", session_id="s")])
    assert str(caught.value.error) == (
        f"chat memory {path}: database is locked; this turn was not saved: session 's' keeps "
        "neither its question nor its answer"
    )
    assert isinstance(caught.value.error, MemoryStoreError)
    # Its model answered (a call made, counted against max_iterations); its answer is kept
    # in the run's progress, so resuming saves the turn without asking the model again.
    progress = caught.value.progress.metadata
    assert progress.iterations == {0: 1}
    assert len(await store.turns("s")) == 1
    untouched = ScriptedModel([])  # any call raises: it has no answer to give
    again = ToolsAgent(model=untouched, memory=SessionMemory(store))
    items = [AgentItem(prompt="two", session_id="s")]
    result = await again.step(items, EngineResponse(action_responses=[], metadata=progress))
    assert isinstance(result, AgentResult)
    assert (result.items[0].output, untouched.calls) == ("Second.", [])
    assert [m.content for m in (await store.turns("s"))[1].messages] == ["two", "Second."]
    await store.aclose()


async def test_a_save_redis_did_not_answer_in_time_may_be_kept_and_is_kept_once(
    redis_url: str,
) -> None:
    """Redis stalled (SIGSTOP) after the history was read: the save timed out and the error
    said the session kept neither question nor answer, yet Redis ran the queued script when
    it woke, and the client's retry stored the turn twice. The outcome is unknown: the save
    is tried again by the turn's key, and the error says the turn may have been saved.
    Resuming the run then saved it once but asked the model again, with the stored turn in
    its history, and showed that second answer: now it saves the first answer again under
    the same key and ends with it, asking no model."""
    prefix = f"test-{uuid.uuid4().hex}"
    store = RedisStore(f"{redis_url}?socket_timeout=0.3", prefix=prefix)
    admin = Redis.from_url(redis_url)  # pyright: ignore[reportUnknownMemberType]
    server = int((await admin.info("server"))["process_id"])  # pyright: ignore[reportUnknownMemberType]

    class Stalling(ScriptedModel):
        """Stops Redis as it answers: after the history was read, before the save."""

        async def invoke(
            self,
            messages: Sequence[ChatMessage],
            tools: Sequence[ToolDefinition],
            *,
            on_token: TokenCallback | None = None,
        ) -> AssistantMessage:
            os.kill(server, signal.SIGSTOP)
            return await super().invoke(messages, tools, on_token=on_token)

    agent = ToolsAgent(model=Stalling(["First."]), memory=SessionMemory(store), run_id="r1")
    items = [AgentItem(prompt="one", session_id="s")]
    try:
        with pytest.raises(StepInterrupted) as caught:
            await agent.step(items)
    finally:
        os.kill(server, signal.SIGCONT)
    said = str(caught.value.error)
    assert isinstance(caught.value.error, MemoryWriteUnknown), said
    assert "keeps neither" not in said
    assert said.endswith(
        "; this turn may have been saved or not (the store may apply it once it answers): "
        "`sessions show s` tells: look before asking again"
    ), said
    with anyio.fail_after(10):  # Redis runs both queued scripts once it wakes
        while not await store.turns("s"):
            await anyio.lowlevel.checkpoint()
    # Resumed from its progress, as the run store does: the same key, stored once.
    untouched = ScriptedModel(["Asked again."])
    again = ToolsAgent(model=untouched, memory=SessionMemory(store), run_id="r1")
    progress = caught.value.progress.metadata
    result = await again.step(items, EngineResponse(action_responses=[], metadata=progress))
    assert isinstance(result, AgentResult)
    assert (result.items[0].output, untouched.calls) == ("First.", [])
    assert [t.key for t in await store.turns("s")] == ["r1:0"]
    assert [m.content for m in (await store.turns("s"))[0].messages] == ["one", "First."]
    await store.delete("s")
    await store.aclose()
    await admin.aclose()


async def test_a_run_its_budget_stops_still_ends_an_answered_turn_with_its_kept_answer(
    tmp_path: Path,
) -> None:
    """The answer that spent the run's token budget could not be saved (its SQLite file
    locked by another process): resumed on the same budget, the run failed the item with the
    budget's message and the answer was lost, though saving it calls no model. Stopping the
    run now saves the turn and ends the item with the kept answer, as any resume does; a save
    that fails again leaves the run as it was, its answer kept for the next resume."""
    path = tmp_path / "memory.sqlite3"
    store = ImpatientSQLiteStore(path)
    await store.turns("s")  # its tables made
    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(RunState.model_validate_json(state.model_dump_json()))

    def gateway(model: ScriptedModel) -> Gateway:
        spec = AgentSpec("a", model, token_budget=10)
        return Gateway([], [spec], memory=SessionMemory(store))

    question = " ".join(["word"] * 40)  # the scripted model counts words as tokens
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # a `sqlite3` shell holds its write lock
        with pytest.raises(MemoryStoreError, match="this turn was not saved"):
            await gateway(ScriptedModel(["Kept."])).run(
                "a", question, session_id="s", checkpoint=keep
            )
        stopped = stored[-1]
        assert stopped.request is not None
        assert 0 in stopped.request.metadata.unsaved
        with pytest.raises(MemoryStoreError, match="this turn was not saved"):
            await gateway(ScriptedModel([])).resume(stopped, checkpoint=keep)
    assert stored[-1] == stopped  # nothing written over the answer it keeps
    assert await store.turns("s") == []

    untouched = ScriptedModel([])  # any call raises: it has no answer to give
    resumed = await gateway(untouched).resume(stopped, checkpoint=keep)
    assert (resumed.output, resumed.error, untouched.calls) == ("Kept.", None, [])
    turns = await store.turns("s")
    assert [t.key for t in turns] == [f"{stopped.run_id}:0"]
    assert [m.content for m in turns[0].messages] == [question, "Kept."]
    again = await gateway(untouched).resume(stopped)  # the budget keeps it resumable
    assert (again.output, len(await store.turns("s"))) == ("Kept.", 1)
    await store.aclose()


async def test_a_handoffs_answer_that_spends_the_budget_is_the_items_answer() -> None:
    """The specialist answered and so spent the run's budget: the item failed with the
    budget's message, though its answer needs no further model call (as a resumed run
    ends it). It now ends with that answer, kept in the session as the lead's turn."""
    memory = SessionMemory(InProcessStore())
    handing = call("counter")
    answer = " ".join(["counted"] * 200)  # the scripted model counts words as tokens
    lead = ScriptedModel([handing])
    agents = [
        AgentSpec("triage", lead, handoffs=["counter"], token_budget=150),
        AgentSpec("counter", ScriptedModel([answer])),
    ]
    result = await Gateway([], agents, memory=memory).run("triage", "Count it.", session_id="s")
    assert (result.output, result.error, len(lead.calls)) == (answer, None, 1)
    assert result.usage.total_tokens >= 150
    turns = await memory.store.turns("s")
    assert [m.content for m in turns[0].messages] == ["Count it.", answer]


async def test_a_session_the_store_cannot_read_stops_the_step_before_the_model_is_called() -> None:
    """Chat memory's Redis is down as the session's history is read: the step stops (a
    `StepInterrupted` saying so, to retry from its progress), no model was called, and the
    retry, with the store back, asks the model once."""
    store = store_from_url("redis://127.0.0.1:1/0")
    model = ScriptedModel(["The answer."])
    items = [AgentItem(prompt="one", session_id="s")]
    try:
        with pytest.raises(StepInterrupted) as caught:
            await ToolsAgent(model=model, memory=SessionMemory(store)).step(items)
    finally:
        await store.aclose()
    assert isinstance(caught.value.error, MemoryStoreError)
    assert str(caught.value.error).startswith("chat memory redis://127.0.0.1:1/0: ")
    assert model.calls == []
    progress = caught.value.progress.metadata
    assert (progress.finished_items, progress.iteration_count) == ({}, 0)

    back = SessionMemory(InProcessStore())
    retry = EngineResponse(action_responses=[], metadata=progress)
    result = await ToolsAgent(model=model, memory=back).step(items, retry)
    assert isinstance(result, AgentResult)
    assert [item.output for item in result.items] == ["The answer."]
    assert (len(model.calls), result.iterations) == (1, 1)
    assert len(await back.store.turns("s")) == 1


async def test_history_keeps_thinking_only_for_providers_that_read_it_later() -> None:
    memory = SessionMemory(InProcessStore())
    for provider in ("anthropic", "openai-compatible"):
        turn = [
            UserMessage(content="q"),
            AssistantMessage(content="a", provider=provider, raw={"reasoning_content": "hmm"}),
        ]
        await memory.save(provider, "k", turn)
    kept = (await memory.load("anthropic")).messages[1]
    dropped = (await memory.load("openai-compatible")).messages[1]
    assert isinstance(kept, AssistantMessage)
    assert isinstance(dropped, AssistantMessage)
    assert kept.raw == {"reasoning_content": "hmm"}
    assert (dropped.raw, dropped.content) == (None, "a")


async def test_what_falls_out_of_the_window_is_summarised_by_the_agents_model() -> None:
    memory = SessionMemory(InProcessStore(), turns=1, summarise=True)
    model = ScriptedModel(["a1", "a2", "The user asked q1; it was a1.", "a3"])
    agent = ToolsAgent(model=model, memory=memory)
    result = None
    for question in ("q1", "q2", "q3"):
        result = await run_to_end(agent, [AgentItem(prompt=question, session_id="s")])
    assert result is not None
    summarising = model.calls[2][0]
    assert "User: q1\nAssistant: a1" in summarising[-1].content
    assert "q2" not in summarising[-1].content  # still in the window
    third = model.calls[3][0]
    assert isinstance(third[0], SystemMessage)
    assert third[0].content.endswith(
        "Summary of the conversation so far:\nThe user asked q1; it was a1."
    )
    assert [m.content for m in third[1:]] == ["q2", "a2", "q3"]
    assert result.usage.requests == 2  # the summary's call counts in the run that made it
    history = await memory.load("s")  # turn 2 falls out now: the next run summarises it
    assert [m.content for m in history.to_summarise] == ["q2", "a2"]
    assert history.previous_summary == "The user asked q1; it was a1."
    assert is_valid_history(history.messages)


async def test_a_summary_the_model_refuses_leaves_the_turn_to_go_on_with_the_window() -> None:
    def answer(text: str) -> httpx.Response:
        return json_response(200, completion({"role": "assistant", "content": text}))

    refused = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    fake = FakeProvider(
        answer("a1"),
        answer("a2"),
        json_response(400, refused),  # the summary of turn 1
        answer("a3"),
        answer("Turns 1 and 2: q1, q2."),  # asked again, with turn 2 now out of the window too
        answer("a4"),
    )
    model = OpenAICompatibleModel("http://127.0.0.1:8000/v1", "qwen", http_client=fake.client())
    warnings: list[tuple[int, str]] = []
    memory = SessionMemory(InProcessStore(), turns=1, summarise=True)
    agent = ToolsAgent(model=model, memory=memory, on_warning=collect(warnings))
    outputs: list[str | None] = []
    for question in ("q1", "q2", "q3", "q4"):
        result = await run_to_end(agent, [AgentItem(prompt=question, session_id="s")])
        outputs.append(result.items[0].output)
    assert outputs == ["a1", "a2", "a3", "a4"]  # the third turn was answered
    third = fake.body(3)["messages"]
    assert [m["content"] for m in third] == ["You are a helpful assistant", "q2", "a2", "q3"]
    [(item, warning)] = warnings
    assert item == 0
    assert warning.startswith("the summary of the session's older turns failed: ")
    assert "maximum context length is 8192 tokens" in warning
    assert "User: q1\nAssistant: a1\nUser: q2" in fake.body(4)["messages"][-1]["content"]
    assert fake.body(5)["messages"][0]["content"].endswith("Turns 1 and 2: q1, q2.")


async def test_a_summary_the_store_cannot_keep_leaves_the_turn_to_go_on_with_the_window(
    tmp_path: Path,
) -> None:
    """A store that refused the summary (PostgreSQL, a NUL in it) stopped the turn, and every
    later one: a summary is an optimisation, so the turn goes on without it, and says so."""
    path = tmp_path / "memory.sqlite3"
    store = SQLiteStore(path)
    memory = SessionMemory(store, turns=1, summarise=True)
    warnings: list[tuple[int, str]] = []
    model = ScriptedModel(["a1", "a2", "Turn 1: q1.", "a3"])
    agent = ToolsAgent(model=model, memory=memory, on_warning=collect(warnings))
    await run_to_end(agent, [AgentItem(prompt="q1", session_id="s")])
    with closing(sqlite3.connect(path)) as db:  # a store that refuses every summary
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON memory_summaries "
            "BEGIN SELECT RAISE(ABORT, 'no summaries here'); END"
        )
    outputs: list[str | None] = []
    for question in ("q2", "q3"):
        result = await run_to_end(agent, [AgentItem(prompt=question, session_id="s")])
        outputs.append(result.items[0].output)
    assert outputs == ["a2", "a3"]
    [(item, warning)] = warnings
    assert item == 0
    assert warning.startswith(
        f"the summary of the session's older turns could not be kept: chat memory {path}: "
        "no summaries here. This turn goes on without them (the window only)"
    ), warning
    assert [m.content for m in model.calls[3][0][1:]] == ["q2", "a2", "q3"]
    assert len(await store.turns("s")) == 3
    await store.aclose()


async def test_a_long_tool_result_stays_out_of_a_token_window() -> None:
    memory = SessionMemory(InProcessStore(), max_tokens=200)
    model = ScriptedModel([call("calculator", expression="big"), "It is huge.", "ok"])
    agent = ToolsAgent(model=model, tools=[CALC], memory=memory)
    await run_to_end(agent, [AgentItem(prompt="Compute big", session_id="s")], data="9" * 50_000)
    await run_to_end(agent, [AgentItem(prompt="And now?", session_id="s")])
    sent = model.calls[2][0]
    assert [m.content for m in sent[1:]] == ["Compute big", "It is huge.", "And now?"]
    assert sum(len(m.content) for m in sent) < 1000
    assert (await memory.load("s")).tokens <= 200


async def test_a_model_failing_mid_step_repeats_no_finished_call_and_no_saved_turn() -> None:
    store = InProcessStore()
    model = PromptModel(
        {"first": ["one"], "second": [call("calculator", expression="1"), "two"]},
        failures={"second": ModelConnectionError("the provider is down")},
    )
    agent = ToolsAgent(
        model=model,
        tools=[CALC],
        memory=SessionMemory(store),
        options=AgentOptions(batch_size=2),
        run_id="run1",
    )
    items = [
        AgentItem(prompt="first", session_id="s1"),
        AgentItem(prompt="second", session_id="s2"),
    ]
    with pytest.raises(StepInterrupted, match="the provider is down") as caught:
        await agent.step(items)
    progress = caught.value.progress
    assert isinstance(caught.value.error, ModelError)
    assert progress.metadata.finished_items[0].output == "one"
    assert len(await store.turns("s1")) == 1
    # Retried from the progress, as the engine does after storing it.
    outcome = await agent.step(items, answer_all(progress))
    while isinstance(outcome, EngineRequest):
        outcome = await agent.step(items, answer_all(outcome))
    assert [r.output for r in outcome.items] == ["one", "two"]
    assert model.asked("first") == 1  # never called again
    assert model.asked("second") == 3  # the failure, the tool call, the answer
    assert len(await store.turns("s1")) == 1
    assert len(await store.turns("s2")) == 1
    # Even a retry from the response before the failure saves the finished turn only once.
    await agent.step(items)
    assert len(await store.turns("s1")) == 1


async def test_deepseek_gets_back_the_reasoning_of_an_earlier_turn_that_called_tools() -> None:
    def deepseek(message: dict[str, object]) -> httpx.Response:
        return json_response(200, completion({"role": "assistant", **message}))

    fake = FakeProvider(
        deepseek(
            {
                "content": "",
                "reasoning_content": "I need the calculator.",
                "tool_calls": [calling("call_0", "calculator", '{"expression": "6*7"}')],
            }
        ),
        deepseek({"content": "It is 42.", "reasoning_content": "The tool said 42."}),
        deepseek({"content": "Hello.", "reasoning_content": "A greeting."}),
        deepseek({"content": "You asked 6*7.", "reasoning_content": "Looking back."}),
    )
    model = OpenAICompatibleModel(
        "https://api.deepseek.com/v1", "deepseek-chat", http_client=fake.client()
    )
    agent = ToolsAgent(model=model, tools=[CALC], memory=SessionMemory(InProcessStore()))
    for question in ("What is 6*7?", "Hi", "What did I ask?"):
        await run_to_end(agent, [AgentItem(prompt=question, session_id="s")])
    sent = fake.body(3)["messages"]
    answers = [m for m in sent if m["role"] == "assistant"]
    # The turn with tool calls: every answer's reasoning, as DeepSeek requires (400 otherwise).
    assert [a.get("reasoning_content") for a in answers] == [
        "I need the calculator.",
        "The tool said 42.",
        None,  # a turn without tool calls: DeepSeek ignores it, so it is not sent
    ]


async def test_a_session_on_a_gateway_without_memory_is_refused_before_the_run() -> None:
    """Once the session was dropped without a word: the second turn did not see the first."""
    model = ScriptedModel(["Hi Dana."])
    gateway = Gateway([], [AgentSpec("a", model)])
    with pytest.raises(ValueError, match=r"session_id 'u1': agent 'a' has no chat memory") as e:
        await gateway.run("a", "I'm Dana", session_id="u1")
    assert "Gateway(..., memory=SessionMemory(InProcessStore()))" in str(e.value)
    with pytest.raises(ValueError, match="session_id 'u2'"):
        await gateway.run("a", [AgentItem(prompt="one"), AgentItem(prompt="two", session_id="u2")])
    assert model.calls == []
    # The agent's own memory is memory too.
    kept = Gateway([], [AgentSpec("a", model, memory=SessionMemory(InProcessStore()))])
    assert (await kept.run("a", "I'm Dana", session_id="u1")).output == "Hi Dana."
