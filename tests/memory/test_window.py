"""Windows over stored turns: newest turns first, whole or short, never an orphan tool message."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent import AssistantMessage, ChatMessage, ToolCall, ToolMessage, Usage, UserMessage
from agent.memory import StoredTurn, count_tokens, is_valid_history, select_window


@st.composite
def turns(draw: st.DrawFn) -> list[StoredTurn]:
    """Sessions of turns: a question, rounds of (parallel) tool calls with results of any
    size, a final answer."""
    stored: list[StoredTurn] = []
    for seq in range(1, draw(st.integers(0, 8)) + 1):
        messages: list[ChatMessage] = [UserMessage(content="q" * draw(st.integers(0, 80)))]
        for round_ in range(draw(st.integers(0, 3))):
            calls = tuple(
                ToolCall(id=f"t{seq}-{round_}-{n}", name="tool", arguments={"n": n})
                for n in range(draw(st.integers(1, 3)))
            )
            messages.append(AssistantMessage(content="", tool_calls=calls))
            for call in calls:
                size = draw(st.integers(0, 2000))
                messages.append(ToolMessage(tool_call_id=call.id, name="tool", content="r" * size))
        messages.append(AssistantMessage(content="a" * draw(st.integers(0, 80))))
        stored.append(
            StoredTurn(seq=seq, key=str(seq), messages=messages, tokens=count_tokens(messages))
        )
    return stored


@settings(max_examples=300, deadline=None)
@given(
    turns(),
    st.one_of(st.none(), st.integers(1, 6)),
    st.one_of(st.none(), st.integers(1, 1500)),
)
def test_a_window_is_whole_newest_turns_within_both_limits(
    session: list[StoredTurn], max_turns: int | None, max_tokens: int | None
) -> None:
    window = select_window(session, max_turns=max_turns, max_tokens=max_tokens)
    assert is_valid_history(window.messages)  # no split call, no orphan result
    kept = len(session) - len(window.dropped)
    assert window.dropped == session[: len(window.dropped)]  # the oldest go first
    if max_turns is not None:
        assert kept <= max_turns
    if max_tokens is not None:
        assert window.tokens <= max_tokens
    questions = [m for m in window.messages if isinstance(m, UserMessage)]
    assert len(questions) == kept  # every kept turn begins with its question
    for stored in session[len(window.dropped) :]:
        assert stored.messages[-1] in window.messages  # ...and keeps its answer


def test_a_long_tool_result_leaves_its_question_and_answer_in_a_token_window() -> None:
    long_turn: list[ChatMessage] = [
        UserMessage(content="read the log"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="read", arguments={}),)),
        ToolMessage(tool_call_id="c1", name="read", content="x" * 40_000),
        AssistantMessage(content="The log says the disk is full."),
    ]
    short_turn: list[ChatMessage] = [UserMessage(content="hi"), AssistantMessage(content="hello")]
    session = [
        StoredTurn(seq=1, key="1", messages=short_turn, tokens=count_tokens(short_turn)),
        StoredTurn(seq=2, key="2", messages=long_turn, tokens=count_tokens(long_turn)),
    ]
    window = select_window(session, max_turns=None, max_tokens=100)
    assert [m.content for m in window.messages] == [
        "hi",
        "hello",
        "read the log",
        "The log says the disk is full.",
    ]
    assert window.tokens <= 100
    assert (
        select_window(session, max_turns=None, max_tokens=None)
        .messages[4]
        .content.startswith("xxx")
    )


def test_tokens_are_the_providers_where_its_usage_tells() -> None:
    call = ToolCall(id="c1", name="read", arguments={})
    messages: list[ChatMessage] = [
        UserMessage(content="read it"),
        AssistantMessage(tool_calls=(call,), usage=Usage(input_tokens=100, output_tokens=12)),
        ToolMessage(tool_call_id="c1", name="read", content="short"),
        AssistantMessage(content="done", usage=Usage(input_tokens=612, output_tokens=3)),
    ]
    tokens = count_tokens(messages)
    # The input grew by 612 - 100 - 12: that is the tool result, whatever its length says.
    assert tokens[1:] == [12, 500, 3]
    assert tokens[0] == 4 + 2  # an estimate: overhead plus about 4 characters a token
