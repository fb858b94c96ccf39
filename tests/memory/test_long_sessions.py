"""A long session is read a part at a time, and summarised in one call of bounded size: a
past never summarised (summaries switched on late) does not make every turn fail its summary,
send megabytes, or read every stored turn."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent import (
    AssistantMessage,
    ChatMessage,
    InProcessStore,
    ScriptedModel,
    SessionMemory,
    SystemMessage,
    UserMessage,
)
from agent.context_window import estimate_tokens
from agent.memory import StoredTurn, summarise
from agent.memory.summary import CUT_NOTE, SUMMARY_INPUT_TOKENS
from gateway import AgentSpec, Gateway
from tests.test_engine import Recorder

pytestmark = pytest.mark.anyio

TEXT = "word " * 400
"""2,000 characters: about 500 tokens."""


def turn(n: int) -> list[ChatMessage]:
    return [UserMessage(content=f"q{n} {TEXT}"), AssistantMessage(content=f"a{n} {TEXT}")]


class CountingStore(InProcessStore):
    """Counts the turns each read returns."""

    def __init__(self) -> None:
        super().__init__()
        self.read = 0

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        found = await super().turns(session_id, after=after, before=before, last=last)
        self.read += len(found)
        return found


async def filled(turns: int) -> CountingStore:
    store = CountingStore()
    memory = SessionMemory(store)
    for n in range(1, turns + 1):
        await memory.save("s", f"k{n}", turn(n))
    store.read = 0
    return store


async def test_a_long_unsummarised_past_is_summarised_once_in_a_call_that_fits() -> None:
    store = await filled(300)  # ~300,000 tokens that never were summarised
    memory = SessionMemory(store, turns=2, summarise=True)
    model = ScriptedModel(["They talked of words.", "a301", "Turn 299 too.", "a302"])
    spec = AgentSpec("a", model, memory=memory, context_window=8000)
    recorder = Recorder()
    first = await Gateway([], [spec]).run("a", "q301", session_id="s", hooks=[recorder])
    assert first.error is None
    assert first.output == "a301"
    summarising = model.calls[0][0]
    # Half the window (it used to be ~300,000 tokens), the other half for the summary; less
    # only the part of a line (one message, ~505 tokens here) cut off to start at a whole one.
    assert 8000 // 2 - 505 < sum(estimate_tokens(summarising, [])) <= 8000 // 2
    assert "q298 " in summarising[-1].content  # the newest turns that fell out
    assert "q1 " not in summarising[-1].content
    summary = await store.summary("s")
    assert summary is not None
    assert (summary.through, summary.text) == (298, "They talked of words.")
    answering = model.calls[1][0]
    assert isinstance(answering[0], SystemMessage)  # the summary joins the system message
    assert answering[0].content.endswith("They talked of words.")
    assert [m.content.split()[0] for m in answering[1:]] == ["q299", "a299", "q300", "a300", "q301"]
    [note] = [e.output for e in recorder.events if e.phase == "note"]
    assert isinstance(note, dict)
    warning = str(note["warning"])
    # Every turn whose question the request, cut to half the window, does not hold: not
    # only those that fell out before the 16,000 tokens one summary reads at most.
    read_from = min(n for n in range(1, 299) if f"User: q{n} " in summarising[-1].content)
    assert 280 < read_from < 298
    assert warning.startswith(f"turns 1-{read_from - 1} of the session fell out"), warning
    assert "too many to summarise at once" in warning
    assert "through turn 298" in warning

    # The next turn summarises only what fell out since: the one turn, 299.
    second = await Gateway([], [spec]).run("a", "q302", session_id="s")
    assert second.output == "a302"
    asked = model.calls[2][0][-1].content
    assert "The summary so far:\nThey talked of words." in asked
    assert "q299 " in asked
    assert "q298 " not in asked
    assert "q300 " not in asked
    summary = await store.summary("s")
    assert summary is not None
    assert summary.through == 299


async def test_loading_a_long_session_reads_only_what_it_uses() -> None:
    store = await filled(400)
    memory = SessionMemory(store, turns=3, summarise=True)
    history = await memory.load("s")
    assert history.through == 397
    assert history.left_out == range(1, history.through - len(history.to_summarise) // 2 + 1)
    weight = sum(estimate_tokens(history.to_summarise, []))
    assert 0 < weight <= SUMMARY_INPUT_TOKENS + 600  # the newest of the 397 that fell out
    assert store.read < 60  # not the 400 stored

    store.read = 0
    by_tokens = SessionMemory(store, turns=None, max_tokens=3000)
    window = await by_tokens.load("s")
    assert [m.content.split()[0] for m in window.messages][-2:] == ["q400", "a400"]
    assert window.to_summarise == ()
    assert store.read <= 64  # two pages of 32: not the 400 stored


async def test_a_transcript_too_long_for_one_call_keeps_its_newest_part() -> None:
    model = ScriptedModel(["short"])
    messages: Sequence[ChatMessage] = [m for n in range(1, 60) for m in turn(n)]
    text, _ = await summarise(model, "Earlier: hello.", messages, max_tokens=3000)
    assert text == "short"
    sent = model.calls[0][0]
    assert sum(estimate_tokens(sent, [])) <= 3000
    asked = sent[-1].content
    assert asked.startswith("The summary so far:\nEarlier: hello.\n")
    assert f"The conversation since:\n{CUT_NOTE}\n" in asked
    assert asked.endswith(f"Assistant: a59 {TEXT}")
    assert "q1 " not in asked
