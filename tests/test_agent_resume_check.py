"""A step refuses a response it cannot resume from (`StateError`), and says why."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import JsonValue, ValidationError

from agent import (
    ActionResponse,
    AgentItem,
    AgentOptions,
    AgentRequestMetadata,
    AgentResult,
    AssistantMessage,
    EngineRequest,
    EngineResponse,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    StateError,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    ToolsAgent,
    UserMessage,
)
from agent.protocol import Action, ItemResult
from agent.resume_check import check_request, items_digest

pytestmark = pytest.mark.anyio

ADD = ToolDefinition(name="add", source_node="add")
MUL = ToolDefinition(name="mul", source_node="math", is_from_toolkit=True)
ITEM = [AgentItem(prompt="compute")]
TWO_CALLS = ScriptedAnswer(
    tool_calls=[
        ScriptedCall(name="add", arguments={"a": 1, "b": 2}, id="c1"),
        ScriptedCall(name="mul", arguments={"a": 3, "b": 4}, id="c2"),
    ]
)


def results(request: EngineRequest, data: JsonValue = "ok") -> list[ActionResponse]:
    return [ActionResponse(action=a, data=data) for a in request.actions]


async def asked(model: ScriptedModel | None = None) -> tuple[ToolsAgent, EngineRequest]:
    """An agent and its first request: the item calls add (c1) and mul (c2)."""
    agent = ToolsAgent(model=model or ScriptedModel([TWO_CALLS, "done"]), tools=[ADD, MUL])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    return agent, request


def moved(action: Action, **changes: JsonValue) -> Action:
    return action.model_copy(update=changes)


async def test_a_result_for_a_call_the_model_never_made_is_refused() -> None:
    model = ScriptedModel([TWO_CALLS, "done"])
    agent, request = await asked(model)
    done = results(request)
    done[0] = done[0].model_copy(update={"action": moved(done[0].action, tool_call_id="zzz")})
    response = EngineResponse(action_responses=done, metadata=request.metadata)
    with pytest.raises(StateError) as caught:
        await agent.step(ITEM, response)
    assert str(caught.value) == (
        "the response has a result for call 'zzz' of item 0, which made no such call "
        "(it waits for 'c1', 'c2')"
    )
    assert len(model.calls) == 1  # no turn invented, no model called
    with pytest.raises(StateError):
        await agent.stop(ITEM, response, "budget spent")


async def test_a_result_for_an_item_that_is_not_there_is_refused() -> None:
    agent, request = await asked()
    done = results(request)
    done[0] = done[0].model_copy(update={"action": moved(done[0].action, item_index=5)})
    with pytest.raises(StateError, match=r"a result for item 5 \(call 'c1'\), but the step was"):
        await agent.step(ITEM, EngineResponse(action_responses=done, metadata=request.metadata))


async def test_a_result_for_another_item_than_the_one_that_called_is_refused() -> None:
    items = [AgentItem(prompt="compute"), AgentItem(prompt="say hi")]
    model = ScriptedModel([TWO_CALLS, "hi"])
    agent = ToolsAgent(model=model, tools=[ADD, MUL], options=AgentOptions(batch_size=2))
    request = await agent.step(items)
    assert isinstance(request, EngineRequest)
    assert 1 in request.metadata.finished_items
    done = results(request)
    done[0] = done[0].model_copy(update={"action": moved(done[0].action, item_index=1)})
    with pytest.raises(StateError) as caught:
        await agent.step(items, EngineResponse(action_responses=done, metadata=request.metadata))
    assert str(caught.value) == (
        "the response has a result for call 'c1' of item 1, which made no such call "
        "(it waits for no tool result)"
    )


async def test_a_response_over_no_items_is_refused_as_one_over_other_items() -> None:
    """A stored run whose items were emptied ended in `ValueError: a step needs one item or
    more`, a traceback, where a response over other items is a `StateError`."""
    agent, request = await asked()
    response = EngineResponse(action_responses=results(request), metadata=request.metadata)
    with pytest.raises(StateError, match="the step was given no items"):
        await agent.step([], response)
    with pytest.raises(ValueError, match="a step needs one item or more"):
        await agent.step([])  # a fresh step of nothing: the caller's mistake, not a state's


async def test_an_item_both_finished_and_waiting_or_every_item_finished_is_refused() -> None:
    """Both ended in `IndexError: list index out of range` (no item was left to step)."""
    agent, request = await asked()
    done = results(request)
    result = ItemResult(output="x")
    both = request.metadata.model_copy(update={"finished_items": {0: result}})
    with pytest.raises(StateError, match="holds item 0 as finished and as waiting for the"):
        await agent.step(ITEM, EngineResponse(action_responses=done, metadata=both))
    ended = both.model_copy(update={"pending": {}})
    with pytest.raises(StateError, match=r"holds every item as finished \(1 item\)"):
        await agent.step(ITEM, EngineResponse(action_responses=[], metadata=ended))


async def test_a_stored_request_that_does_not_fit_its_items_is_refused_before_it_runs() -> None:
    """An action of an item the run has not waited for a person's approval that nothing
    would ever ask for; one of a call no model made ran it."""
    _, request = await asked()
    check_request(ITEM, request)  # as the step made it
    beyond = request.model_copy(update={"actions": [moved(request.actions[1], item_index=5)]})
    with pytest.raises(StateError) as caught:
        check_request(ITEM, beyond)
    assert str(caught.value) == (
        "the request has an action for item 5 (call 'c2'), but the run has 1 item: resume a "
        "run with the items it started with"
    )
    unmade = request.model_copy(update={"actions": [moved(request.actions[0], tool_call_id="z")]})
    with pytest.raises(StateError, match="the request has an action for call 'z' of item 0, wh"):
        check_request(ITEM, unmade)
    other = request.model_copy(update={"actions": [moved(request.actions[0], tool="mul")]})
    with pytest.raises(StateError, match="the request's action for call 'c1' of item 0 is from"):
        check_request(ITEM, other)
    with pytest.raises(StateError, match="the request's metadata belongs to a run over other"):
        check_request([AgentItem(prompt="something else")], request)
    with pytest.raises(StateError, match="the step was given no items"):
        check_request([], request)


async def test_two_different_results_for_one_call_are_refused_the_same_one_twice_is_not() -> None:
    agent, request = await asked()
    done = results(request)
    twice = EngineResponse(action_responses=[*done, done[0]], metadata=request.metadata)
    assert isinstance(await agent.step(ITEM, twice), AgentResult)  # delivered twice: one step

    agent, request = await asked()
    done = results(request)
    other = done[0].model_copy(update={"data": "another answer"})
    response = EngineResponse(action_responses=[*done, other], metadata=request.metadata)
    with pytest.raises(StateError, match="two different results for call 'c1' of item 0"):
        await agent.step(ITEM, response)


async def test_a_result_from_another_tool_than_the_call_named_is_refused() -> None:
    agent, request = await asked()
    done = results(request)
    done[0] = done[0].model_copy(update={"action": moved(done[0].action, tool="mul")})
    with pytest.raises(StateError, match="is from tool 'mul', but the call was to 'add'"):
        await agent.step(ITEM, EngineResponse(action_responses=done, metadata=request.metadata))


@pytest.mark.parametrize("version", [0, 8])
async def test_metadata_of_another_version_is_refused_and_says_both_versions(
    version: int,
) -> None:
    _, request = await asked()
    response = EngineResponse(action_responses=results(request), metadata=request.metadata)
    stored = response.model_dump(mode="json")
    stored["metadata"]["version"] = version
    # Parsing refuses it, as pydantic refuses any input that does not fit; the cause is the
    # agent's own StateError.
    with pytest.raises(ValidationError) as caught:
        EngineResponse.model_validate(stored)
    error = caught.value.errors()[0]
    assert error["loc"] == ("metadata",)
    cause = error.get("ctx", {}).get("error")
    assert isinstance(cause, StateError)
    assert str(cause) == (
        f"the agent metadata is version {version}; this agent resumes versions 1, 2, 3, "
        "4, 5, 6 and 7 only: finish or restart the run with the version that began it"
    )
    with pytest.raises(
        ValidationError,
        match=f"version {version}; this agent resumes versions 1, 2, 3, 4, 5, 6 and 7",
    ):
        AgentRequestMetadata.model_validate_json(f'{{"version": {version}}}')


async def test_a_response_resumed_with_other_items_is_refused() -> None:
    items = [AgentItem(prompt="q0"), AgentItem(prompt="q1")]
    model = ScriptedModel(["a0", "a1"])
    agent = ToolsAgent(model=model)
    request = await agent.step(items)  # item 0 answered; item 1 is next
    assert isinstance(request, EngineRequest)
    assert list(request.metadata.finished_items) == [0]
    response = EngineResponse(action_responses=[], metadata=request.metadata)
    for others in (
        [AgentItem(prompt="other")],  # fewer: item 0's answer would be given for "other"
        [AgentItem(prompt="q0"), AgentItem(prompt="changed")],
        [AgentItem(prompt="q0"), AgentItem(prompt="q1", session_id="s")],
        [*items, AgentItem(prompt="q2")],
    ):
        with pytest.raises(StateError, match="belongs to a run over other items than the"):
            await agent.step(others, response)
    result = await agent.step(items, response)
    assert isinstance(result, AgentResult)
    assert [i.output for i in result.items] == ["a0", "a1"]


async def test_metadata_kept_before_the_items_digest_is_still_checked_for_items_it_knows() -> None:
    items = [AgentItem(prompt="q0"), AgentItem(prompt="q1")]
    model = ScriptedModel([TWO_CALLS, "a1"])
    agent = ToolsAgent(model=model, tools=[ADD, MUL], options=AgentOptions(batch_size=2))
    request = await agent.step(items)  # item 0 calls tools, item 1 answered
    assert isinstance(request, EngineRequest)
    older = request.metadata.model_copy(update={"items_digest": None})
    response = EngineResponse(action_responses=results(request), metadata=older)
    # Without the check, item 1's result lay beyond the list forever: every step returned an
    # empty request, and the engine looped.
    with pytest.raises(StateError) as caught:
        await agent.step(items[:1], response)
    assert str(caught.value) == (
        "the response's metadata holds a result for item 1, but the step was given 1 item: "
        "resume a run with the items it started with"
    )


async def test_an_engine_that_never_saw_the_metadata_is_taken_at_its_word() -> None:
    # An engine that keeps no metadata sends its results with fresh metadata: each result
    # describes its own call, which the model then sees with its result.
    model = ScriptedModel(["3"])
    agent = ToolsAgent(model=model, tools=[ADD])
    action = Action(node="add", input={"a": 1, "b": 2}, tool_call_id="x1", item_index=0, tool="add")
    response = EngineResponse(
        action_responses=[ActionResponse(action=action, data=3)], metadata=AgentRequestMetadata()
    )
    result = await agent.step(ITEM, response)
    assert isinstance(result, AgentResult)
    sent = model.calls[0][0]
    assert sent[-2] == AssistantMessage(
        tool_calls=(ToolCall(id="x1", name="add", arguments={"a": 1, "b": 2}),)
    )
    assert sent[-1] == ToolMessage(tool_call_id="x1", name="add", content="3")


async def test_calls_the_engine_returned_nothing_for_are_shown_with_no_result() -> None:
    _, request = await asked()
    for done in (results(request)[:1], []):
        model = ScriptedModel(["done"])
        agent = ToolsAgent(model=model, tools=[ADD, MUL])
        response = EngineResponse(action_responses=done, metadata=request.metadata)
        result = await agent.step(ITEM, response)
        assert isinstance(result, AgentResult)
        sent = model.calls[0][0]
        # The model's own turn is kept (it was left out when no result came), each call
        # answered.
        turn = sent[-3]
        assert isinstance(turn, AssistantMessage)
        assert [c.id for c in turn.tool_calls] == ["c1", "c2"]
        told = [m.content for m in sent if isinstance(m, ToolMessage)]
        first = "ok" if done else "Error: this call produced no result"
        assert told == [first, "Error: this call produced no result"]


def test_an_items_history_is_part_of_its_digest_and_no_history_keeps_the_old_digest() -> None:
    plain = AgentItem(prompt="q", session_id="s")
    # The digest as it was before items could bring a history: runs stored then resume.
    before = hashlib.sha256(json.dumps([["q", "s"]]).encode()).hexdigest()[:32]
    assert items_digest([plain]) == before
    told = [AgentItem(prompt="q", history=[UserMessage(content=said)]) for said in ("a", "b")]
    assert len({items_digest([item]) for item in told}) == 2
    assert "history" not in plain.model_dump()  # an item without one is stored as before


def test_an_item_is_given_a_session_or_a_history_not_both() -> None:
    with pytest.raises(ValidationError, match="give `session_id` or `history`, not both"):
        AgentItem(prompt="q", session_id="s", history=[])
