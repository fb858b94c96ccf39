"""A session whose history outgrew the model's context window goes on: its oldest turns are
left out of the call (still stored), said in a warning, instead of every later turn failing."""

from __future__ import annotations

import pytest

from agent import (
    AgentItem,
    AssistantMessage,
    ChatMessage,
    InProcessStore,
    ScriptedModel,
    SessionMemory,
    SystemMessage,
    ToolDefinition,
    ToolsAgent,
    UserMessage,
)
from agent.context_window import estimate_tokens, fit_history
from gateway import AgentSpec, Gateway
from tests.memory.test_conversations import collect
from tests.test_engine import Recorder

pytestmark = pytest.mark.anyio

LONG = "word " * 480
"""An answer of 2,400 characters: about 600 tokens."""


def turn(n: int) -> list[ChatMessage]:
    return [UserMessage(content=f"q{n}"), AssistantMessage(content=f"a{n} {LONG}")]


def test_fitting_keeps_the_summary_then_the_newest_whole_turns() -> None:
    summary = SystemMessage(content="Summary of the conversation so far:\nthey met")
    history = [summary, *turn(1), *turn(2), *turn(3)]
    others: list[ChatMessage] = [SystemMessage(content="Be brief."), UserMessage(content="q4")]
    tool = ToolDefinition(name="calculator", source_node="calculator")
    fitted = fit_history(history, others, [tool], 1000)
    assert fitted.messages == [summary, *turn(3)]
    assert (fitted.turns_left_out, fitted.summary_left_out, fitted.turns) == (2, False, 3)
    assert sum(estimate_tokens([*others[:1], *fitted.messages, *others[1:]], [tool])) <= 1000
    nothing = fit_history(history, others, [tool], 20)
    assert (nothing.messages, nothing.turns_left_out, nothing.summary_left_out) == ([], 3, True)
    roomy = fit_history(history, others, [tool], 100_000)
    assert (roomy.messages, roomy.turns_left_out) == (history, 0)


async def test_a_session_that_outgrew_the_window_leaves_out_its_oldest_turns_and_says_so() -> None:
    memory = SessionMemory(InProcessStore())  # 10 turns, no token limit: it outgrows 1,600
    model = ScriptedModel([f"a{n} {LONG}" for n in range(1, 5)])
    spec = AgentSpec("a", model, memory=memory, context_window=1600)
    gateway = Gateway([], [spec])
    for n in range(1, 4):
        assert (await gateway.run("a", f"q{n}", session_id="s")).error is None
    recorder = Recorder()
    fourth = await gateway.run("a", "q4", session_id="s", hooks=[recorder])
    assert fourth.error is None  # it used to fail, and every turn after it
    assert fourth.output == f"a4 {LONG}"
    sent = [m.content for m in model.calls[3][0]]
    assert [c.split()[0] for c in sent[1:]] == ["q2", "a2", "q3", "a3", "q4"]  # q1 left out
    [note] = [e.output for e in recorder.events if e.phase == "note"]
    assert isinstance(note, dict)
    assert note["item"] == 0
    warning = str(note["warning"])
    assert "did not fit the model's context window (1600 tokens)" in warning
    assert "left out of this call (still stored): its 1 oldest of 3 turns." in warning
    assert "max_tokens" in warning
    assert len((await memory.load("s")).messages) == 8  # every turn is still stored


class WindowedModel(ScriptedModel):
    async def context_window(self) -> int | None:
        return 1600


class ReportsWindow(ScriptedModel):
    """Reports the context window it is given (None: it does not know its own)."""

    def __init__(self, answers: list[str], window: int | None) -> None:
        super().__init__(answers)
        self.window = window

    async def context_window(self) -> int | None:
        return self.window


async def _sent(
    memory: SessionMemory, window: int | None, prompt: str
) -> tuple[list[ChatMessage], list[tuple[int, str]]]:
    """What the model was sent for `prompt` on session `s`, and the warnings said."""
    model = ReportsWindow(["an answer"], window)
    warnings: list[tuple[int, str]] = []
    agent = ToolsAgent(
        model=model, memory=memory, fit_history_to_window=True, on_warning=collect(warnings)
    )
    await agent.step([AgentItem(prompt=prompt, session_id="s")])
    return model.calls[0][0], warnings


async def _one_turn() -> SessionMemory:
    memory = SessionMemory(InProcessStore())
    await memory.save("s", "k1", turn(1))
    return memory


async def test_a_call_that_fits_the_window_exactly_is_sent_whole() -> None:
    whole, _ = await _sent(await _one_turn(), None, "q2")
    needed = sum(estimate_tokens(whole, []))
    exactly, said = await _sent(await _one_turn(), needed, "q2")
    assert (exactly, said) == (whole, [])
    short, said = await _sent(await _one_turn(), needed - 1, "q2")
    assert [m.content for m in short[1:]] == ["q2"]
    [(_, warning)] = said
    assert "left out of this call (still stored): its 1 oldest of 1 turns." in warning


async def _summarised() -> SessionMemory:
    """Turn 2 in its window of one turn, after a summary of turn 1."""
    memory = SessionMemory(InProcessStore(), turns=1, summarise=True)
    for n in (1, 2):
        await memory.save("s", f"k{n}", turn(n))
    await memory.save_summary("s", 1, "They met.")
    return memory


async def test_a_window_too_small_for_the_summary_says_it_was_left_out_too() -> None:
    whole, _ = await _sent(await _summarised(), None, "q3")
    assert whole[0].content.endswith("They met.")  # the summary joins the system message
    assert [m.content.split()[0] for m in whole[1:]] == ["q2", "a2", "q3"]
    sent, said = await _sent(await _summarised(), 30, "q3")  # room for the question alone
    assert [m.content for m in sent] == ["You are a helpful assistant", "q3"]
    [(_, warning)] = said
    assert "(still stored): its 1 oldest of 1 turns and its summary." in warning


async def test_the_agent_fits_the_history_to_the_window_only_when_asked_to() -> None:
    answers = [f"a{n} {LONG}" for n in range(1, 5)]
    for fit, sent in ((False, 1 + 6 + 1), (True, 1 + 4 + 1)):
        model = WindowedModel(answers)
        warnings: list[tuple[int, str]] = []
        agent = ToolsAgent(
            model=model,
            memory=SessionMemory(InProcessStore()),
            fit_history_to_window=fit,
            on_warning=collect(warnings),
        )
        for n in range(1, 5):
            await agent.step([AgentItem(prompt=f"q{n}", session_id="s")])
        assert len(model.calls[3][0]) == sent
        assert len(warnings) == fit
