"""The scripted model keeps a bounded history: a demo gateway serving a script for days stays
the same size, and tests still read the conversations they made."""

from __future__ import annotations

import pytest

from agent import ScriptedModel, ScriptExhausted, UserMessage
from agent.scripted import HISTORY

pytestmark = pytest.mark.anyio


async def test_the_history_keeps_the_last_conversations_and_the_script_goes_on() -> None:
    model = ScriptedModel([f"answer {n}" for n in range(1, 6)], history=2)
    answers = [
        (await model.invoke([UserMessage(content=f"question {n}")], [])).content
        for n in range(1, 6)
    ]
    assert answers == [f"answer {n}" for n in range(1, 6)]  # no answer skipped or repeated
    assert [messages[0].content for messages, _ in model.calls] == ["question 4", "question 5"]
    with pytest.raises(ScriptExhausted, match="has 5 answers and was asked for answer 6"):
        await model.invoke([UserMessage(content="question 6")], [])


async def test_a_long_lived_model_holds_at_most_its_default_history() -> None:
    asked = HISTORY + 200
    model = ScriptedModel(["ok"] * asked)
    for n in range(asked):
        await model.invoke([UserMessage(content=f"question {n}")], [])
    assert len(model.calls) == HISTORY
    assert model.calls[0][0][0].content == "question 200"
    assert model.calls[-1][0][0].content == f"question {asked - 1}"
