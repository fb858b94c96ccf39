"""The scripted model: a bounded history (a demo gateway serving a script for days stays the
same size, and tests still read the conversations they made), answers in a script file's shape."""

from __future__ import annotations

import pytest

from agent import ScriptedModel, ScriptExhausted, StateError, UserMessage
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


async def test_answers_may_be_written_as_in_a_script_file() -> None:
    """Dicts in a script file's shape failed at the first call, with an AttributeError deep in
    the engine (the README's example filled that way)."""
    model = ScriptedModel(
        [{"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}, "42."]
    )
    first = await model.invoke([UserMessage(content="6 * 7?")], [])
    assert [(c.name, c.arguments) for c in first.tool_calls] == [
        ("calculator", {"expression": "6 * 7"})
    ]
    assert (await model.invoke([UserMessage(content="and?")], [])).content == "42."
    with pytest.raises(StateError) as bad:
        ScriptedModel([{"content": "ok"}, {"tool_call": []}])
    assert (
        str(bad.value)
        == "invalid answers, answer 2: tool_call: unknown key (did you mean 'tool_calls'?)"
    )
