"""The Tools Agent's step on its own: no engine, results handed in by hand."""

from __future__ import annotations

import json
from collections.abc import Sequence

import httpx
import pytest
from pydantic import JsonValue

from agent import (
    Action,
    ActionResponse,
    AgentItem,
    AgentOptions,
    AgentRequestMetadata,
    AgentResult,
    AssistantMessage,
    ChatMessage,
    ContextWindowExceeded,
    EngineRequest,
    EngineResponse,
    InProcessStore,
    ItemResult,
    ModelAuthError,
    ModelResponseError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    StepInterrupted,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    ToolsAgent,
    Usage,
    UserMessage,
)
from agent.models import GeminiModel, OpenAIModel
from agent.scratchpad import observation
from agent.stopped import UNREADABLE_CALL_RETRIES

pytestmark = pytest.mark.anyio

CALC = ToolDefinition(name="calculator", source_node="calculator")
ECHO = ToolDefinition(name="srv__echo", source_node="srv", is_from_toolkit=True)
ITEM = [AgentItem(prompt="question")]


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def answer_all(request: EngineRequest, data: JsonValue = "ok") -> EngineResponse:
    responses = [ActionResponse(action=a, data={"response": data}) for a in request.actions]
    return EngineResponse(action_responses=responses, metadata=request.metadata)


async def test_plain_tool_gets_its_arguments_and_toolkit_tool_gets_its_name() -> None:
    model = ScriptedModel([call("calculator", expression="1+1"), call("srv__echo", text="hi")])
    agent = ToolsAgent(model=model, tools=[CALC, ECHO])
    first = await agent.step(ITEM)
    assert isinstance(first, EngineRequest)
    assert first.actions[0].node == "calculator"
    assert first.actions[0].input == {"expression": "1+1"}
    second = await agent.step(ITEM, answer_all(first))
    assert isinstance(second, EngineRequest)
    assert second.actions[0].node == "srv"
    assert second.actions[0].input == {"text": "hi", "tool": "srv__echo"}
    assert second.metadata.iteration_count == 2


async def test_parallel_calls_share_one_request_and_one_replayed_assistant_message() -> None:
    parallel = ScriptedAnswer(
        content="thinking aloud",
        tool_calls=[
            ScriptedCall(name="calculator", arguments={"expression": "1"}),
            ScriptedCall(name="calculator", arguments={"expression": "2"}),
        ],
    )
    model = ScriptedModel([parallel, "done"])
    agent = ToolsAgent(model=model, tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert len(request.actions) == 2
    result = await agent.step(ITEM, answer_all(request, "r"))
    assert isinstance(result, AgentResult)
    sent = model.calls[1][0]
    assistants = [m for m in sent if isinstance(m, AssistantMessage)]
    assert len(assistants) == 1
    assert assistants[0].content == "thinking aloud"
    assert [m.tool_call_id for m in sent if isinstance(m, ToolMessage)] == ["call_1", "call_2"]


async def test_raw_provider_payload_is_replayed_verbatim() -> None:
    raw: JsonValue = {"thinking": [{"type": "thinking", "signature": "sig=="}]}

    class Thinking(ScriptedModel):
        async def invoke(self, messages, tools, *, on_token=None):  # type: ignore[override]
            answer = await super().invoke(messages, tools, on_token=on_token)
            return answer.model_copy(update={"provider": "anthropic", "raw": raw})

    model = Thinking([call("calculator", expression="1"), "done"])
    agent = ToolsAgent(model=model, tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    # Through JSON, as a stored run would go.
    response = EngineResponse.model_validate_json(answer_all(request).model_dump_json())
    await agent.step(ITEM, response)
    replayed = next(m for m in model.calls[1][0] if isinstance(m, AssistantMessage))
    assert replayed.raw == raw
    assert replayed.provider == "anthropic"


async def test_scratchpad_deduplicates_results_by_tool_call_id() -> None:
    model = ScriptedModel([call("calculator", expression="1"), "done"])
    agent = ToolsAgent(model=model, tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    once = answer_all(request)
    twice = once.model_copy(update={"action_responses": once.action_responses * 2})
    await agent.step(ITEM, twice)
    tool_messages = [m for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1


@pytest.mark.parametrize(
    ("data", "error", "expected"),
    [
        ({"response": "425"}, None, "425"),
        ({"response": {"a": 1}}, None, '{"a":1}'),
        ({"a": 1, "b": [1, 2]}, None, '{"a":1,"b":[1,2]}'),
        ("plain", None, "plain"),
        (None, "boom", "Error: boom"),
    ],
)
def test_observation_rules(data: JsonValue, error: str | None, expected: str) -> None:
    action = Action(node="n", input={}, tool_call_id="c", item_index=0, tool="t")
    assert observation(ActionResponse(action=action, data=data, error=error)) == expected


async def test_unknown_tool_is_answered_with_the_real_tool_names() -> None:
    model = ScriptedModel([call("calculater", expression="1"), "sorry"])
    agent = ToolsAgent(model=model, tools=[CALC, ECHO])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert request.actions == []
    assert request.metadata.iteration_count == 1
    result = await agent.step(ITEM, answer_all(request))
    assert isinstance(result, AgentResult)
    tool_message = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert "calculater" in tool_message.content
    assert "calculator, srv__echo" in tool_message.content


def _huge_server() -> list[ToolDefinition]:
    """2,500 tools of one server, named as a gateway offers them (`huge__...`)."""
    verbs = ("get", "list", "create", "update", "delete")
    nouns = ("user", "lead", "ticket", "invoice", "order")
    return [
        ToolDefinition(name=f"huge__{verb}_{noun}_v{n}", source_node="huge", is_from_toolkit=True)
        for n in range(100)
        for verb in verbs
        for noun in nouns
    ] + [ToolDefinition(name="huge__delete_user", source_node="huge", is_from_toolkit=True)]


async def _told_for_unknown(name: str, tools: list[ToolDefinition]) -> str:
    """What the agent tells the model for a call of `name`."""
    agent = ToolsAgent(model=ScriptedModel([call(name)]), tools=tools)
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert request.actions == []
    [step] = request.metadata.previous_steps[0]
    return step.observation


async def test_an_unknown_tool_among_thousands_gets_the_closest_names_and_a_bounded_list() -> None:
    told = await _told_for_unknown("delete_usr", _huge_server())
    assert told.startswith(
        "Error: there is no tool named 'delete_usr'; did you mean 'huge__delete_user'"
    )
    assert told.endswith(" and 2451 more.")
    assert told.count("huge__") < 60  # 50 listed, 3 guessed: not 2,501 (~56 KB)
    assert len(told) < 2_000


async def test_a_bare_name_finds_its_prefixed_tool_and_a_prefixed_one_its_bare_tool() -> None:
    tools = [CALC, ECHO, ToolDefinition(name="search", source_node="crm", is_from_toolkit=True)]
    assert "did you mean 'srv__echo'?" in await _told_for_unknown("echo", tools)
    assert "did you mean 'search'?" in await _told_for_unknown("crm__serch", tools)
    # Few tools are all listed, and a name like none of them guesses nothing.
    told = await _told_for_unknown("weather", tools)
    assert told == (
        "Error: there is no tool named 'weather'. Available tools: calculator, srv__echo, search."
    )


async def test_malformed_arguments_become_an_error_observation() -> None:
    class Broken(ScriptedModel):
        async def invoke(self, messages, tools, *, on_token=None):  # type: ignore[override]
            answer = await super().invoke(messages, tools, on_token=on_token)
            if not answer.tool_calls:
                return answer
            bad = ToolCall(id="x", name="calculator", invalid_arguments='{"expression": 1+')
            return answer.model_copy(update={"tool_calls": (bad,)})

    model = Broken([call("calculator"), "ok"])
    agent = ToolsAgent(model=model, tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert request.actions == []
    await agent.step(ITEM, answer_all(request))
    tool_message = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert tool_message.content.startswith("Error: the arguments for 'calculator' were not")


async def test_repeated_call_ids_are_made_unique() -> None:
    same_id = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="calculator", arguments={"expression": "1"}, id="dup"),
            ScriptedCall(name="calculator", arguments={"expression": "2"}, id="dup"),
        ]
    )
    agent = ToolsAgent(model=ScriptedModel([same_id]), tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    ids = [a.tool_call_id for a in request.actions]
    assert len(set(ids)) == 2
    assert [c.id for c in request.metadata.pending[0].tool_calls] == ids


async def test_a_new_call_id_is_none_the_conversation_uses_and_the_trace_is_told() -> None:
    warnings: list[tuple[int, str]] = []

    async def warn(item: int, warning: str) -> None:
        warnings.append((item, warning))

    def calc(call_id: str, expression: str) -> ScriptedCall:
        return ScriptedCall(name="calculator", arguments={"expression": expression}, id=call_id)

    model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[calc("call_X", "1"), calc("call_X", "2"), calc("call_1", "3")]
            ),
            ScriptedAnswer(tool_calls=[calc("call_2", "4")]),  # the id the agent made up
            "done",
        ]
    )
    agent = ToolsAgent(model=model, tools=[CALC], on_warning=warn)
    first = await agent.step(ITEM)
    assert isinstance(first, EngineRequest)
    # The model's own call_1 keeps its id: the duplicate's new id is not taken from it.
    assert [a.tool_call_id for a in first.actions] == ["call_X", "call_2", "call_1"]
    second = await agent.step(ITEM, answer_all(first))
    assert isinstance(second, EngineRequest)
    assert [a.tool_call_id for a in second.actions] == ["call_4"]
    said = "call ids renamed (the model gave a call one another call has, or none): "
    assert warnings == [(0, said + "call_X -> call_2"), (0, said + "call_2 -> call_4")]


async def test_a_call_id_of_an_earlier_turn_of_the_session_is_not_used_again() -> None:
    same_id = ScriptedAnswer(tool_calls=[ScriptedCall(name="calculator", id="toolu_1")])
    model = ScriptedModel([same_id, "a1", same_id, "a2"])
    agent = ToolsAgent(model=model, tools=[CALC], memory=SessionMemory(InProcessStore()))
    ids: list[str] = []
    for prompt in ("q1", "q2"):
        items = [AgentItem(prompt=prompt, session_id="s")]
        request = await agent.step(items)
        assert isinstance(request, EngineRequest)
        ids += [a.tool_call_id for a in request.actions]
        assert isinstance(await agent.step(items, answer_all(request)), AgentResult)
    assert ids[0] == "toolu_1"
    assert ids[1] != "toolu_1"
    sent = [
        c.id for m in model.calls[-1][0] if isinstance(m, AssistantMessage) for c in m.tool_calls
    ]
    assert sent == ids


async def test_tool_usage_of_two_items_counts_twice_though_their_call_ids_are_the_same() -> None:
    same = ScriptedAnswer(tool_calls=[ScriptedCall(name="calculator", id="call_0")])
    items = [AgentItem(prompt="a"), AgentItem(prompt="b")]

    async def run(tool_usage: Usage) -> Usage:
        model = ScriptedModel([same, same, "a", "b"])
        agent = ToolsAgent(model=model, tools=[CALC], options=AgentOptions(batch_size=2))
        request = await agent.step(items)
        assert isinstance(request, EngineRequest)
        assert [(a.item_index, a.tool_call_id) for a in request.actions] == [
            (0, "call_0"),
            (1, "call_0"),
        ]
        done = [ActionResponse(action=a, data="r", usage=tool_usage) for a in request.actions]
        result = await agent.step(
            items, EngineResponse(action_responses=done, metadata=request.metadata)
        )
        assert isinstance(result, AgentResult)
        return result.usage

    models_only = await run(Usage())
    # What an agent run as the tool spent, once for each item's call.
    with_tools = await run(Usage(input_tokens=100, requests=1))
    assert with_tools.input_tokens == models_only.input_tokens + 200
    assert with_tools.requests == models_only.requests + 2


async def test_max_iterations_fails_the_item_with_its_partial_steps() -> None:
    model = ScriptedModel([call("calculator", expression=str(n)) for n in range(5)])
    agent = ToolsAgent(model=model, tools=[CALC], options=AgentOptions(max_iterations=2))
    outcome = await agent.step(ITEM)
    while isinstance(outcome, EngineRequest):
        outcome = await agent.step(ITEM, answer_all(outcome))
    item = outcome.items[0]
    assert item.output is None
    assert item.error is not None
    assert item.error.startswith("Max iterations (2) reached")
    assert item.steps is not None
    assert [s.tool_input for s in item.steps] == [{"expression": "0"}, {"expression": "1"}]
    assert len(model.calls) == 2


async def test_memory_keeps_a_window_of_turns_per_session() -> None:
    memory = SessionMemory(InProcessStore(), turns=1)
    model = ScriptedModel(["a1", "a2", "a3"])
    agent = ToolsAgent(model=model, memory=memory)
    await agent.step([AgentItem(prompt="q1", session_id="s")])
    await agent.step([AgentItem(prompt="q2", session_id="s")])
    await agent.step([AgentItem(prompt="q3", session_id="other")])
    contents = [m.content for m in model.calls[1][0]]
    assert contents[1:] == ["q1", "a1", "q2"]
    assert [m.content for m in model.calls[2][0]][1:] == ["q3"]
    assert [m.content for m in (await memory.load("s")).messages] == ["q2", "a2"]


async def test_intermediate_steps_are_returned_only_when_asked() -> None:
    for keep in (False, True):
        model = ScriptedModel([call("calculator", expression="1"), "done"])
        agent = ToolsAgent(
            model=model, tools=[CALC], options=AgentOptions(return_intermediate_steps=keep)
        )
        request = await agent.step(ITEM)
        assert isinstance(request, EngineRequest)
        result = await agent.step(ITEM, answer_all(request, "1"))
        assert isinstance(result, AgentResult)
        steps = result.items[0].steps
        assert (steps is not None) == keep
        if steps is not None:
            assert steps[0].observation == "1"


async def test_a_call_repeated_a_second_time_is_answered_with_the_result_it_already_has() -> None:
    same = call("calculator", expression="6*7")
    other = call("calculator", expression="6*8")
    model = ScriptedModel([same, same, same, other, same, "42"])
    agent = ToolsAgent(model=model, tools=[CALC])
    ran: list[int] = []
    outcome = await agent.step(ITEM)
    turn = 0
    while isinstance(outcome, EngineRequest):
        turn += 1
        if outcome.actions:
            ran.append(turn)
        outcome = await agent.step(ITEM, answer_all(outcome, f"result {turn}"))
    assert ran == [1, 2, 4]  # the call and its first repeat ran; the other arguments ran
    observed = [m.content for m in model.calls[-1][0] if isinstance(m, ToolMessage)]
    assert observed[:2] == ["result 1", "result 2"]
    assert observed[2].startswith("Not run again: you already called 'calculator' with these")
    assert "2 times. Its result was: result 2" in observed[2]
    assert observed[3] == "result 4"
    assert "3 times. Its result was: result 2" in observed[4]


async def test_an_identical_call_within_one_answer_runs_once() -> None:
    """Once all five ran: a side effect five times, though the guard allows one repeat."""
    expression: dict[str, JsonValue] = {"expression": "6*7"}
    five = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(id=f"c{n}", name="calculator", arguments=expression) for n in range(4)
        ]
        + [ScriptedCall(name="calculator", arguments={"expression": "6*8"})]
    )
    model = ScriptedModel([five, call("calculator", expression="6*7"), "42"])
    agent = ToolsAgent(model=model, tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert [a.input for a in request.actions] == [expression, {"expression": "6*8"}]
    request = await agent.step(ITEM, answer_all(request, "result"))
    assert isinstance(request, EngineRequest)
    observed = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed == ["result"] + [
        "Not run again: this answer already calls 'calculator' with these exact arguments "
        "(c0); that call's result is this one's too."
    ] * 3 + ["result"]
    assert request.actions == []  # the model called it 4 times already: one ran
    result = await agent.step(ITEM, answer_all(request))
    assert isinstance(result, AgentResult)
    told = [m.content for m in model.calls[2][0] if isinstance(m, ToolMessage)][-1]
    assert told.startswith("Not run again: you already called 'calculator' with these exact")
    assert "4 times. Its result was: result" in told


async def test_calls_alike_only_to_pythons_equality_are_not_identical() -> None:
    """`true`, `1` and `1.0` are other arguments to a tool (JSON Schema's `boolean` refuses
    `1`): compared with `==`, two of these three were told the first one's result, unrun."""
    values: list[JsonValue] = [1, True, 1.0, 0, False]
    many = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(id=f"c{n}", name="calculator", arguments={"expression": value})
            for n, value in enumerate(values)
        ]
    )
    agent = ToolsAgent(model=ScriptedModel([many, "done"]), tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert [a.input["expression"] for a in request.actions] == values
    assert [type(a.input["expression"]) for a in request.actions] == [int, bool, float, int, bool]


class CutOff(ScriptedModel):
    """Its answers with calls end at the token limit, the last call's arguments unfinished."""

    async def invoke(self, messages, tools, *, on_token=None):  # type: ignore[override]
        answer = await super().invoke(messages, tools, on_token=on_token)
        if not answer.tool_calls:
            return answer
        whole, *_ = answer.tool_calls
        cut = ToolCall(id="cut", name="calculator", invalid_arguments='{"expression": "1+')
        return answer.model_copy(
            update={
                "tool_calls": (whole, cut),
                "stop_reason": "max_tokens",
                "stop_detail": "length",
            }
        )


async def test_a_call_cut_off_at_the_token_limit_is_told_so_not_that_its_json_was_bad() -> None:
    model = CutOff([call("calculator", expression="2"), "ok"])
    agent = ToolsAgent(model=model, tools=[CALC])
    request = await agent.step(ITEM)
    assert isinstance(request, EngineRequest)
    assert [a.input for a in request.actions] == [{"expression": "2"}]  # the whole call runs
    await agent.step(ITEM, answer_all(request))
    told = {m.tool_call_id: m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)}
    assert told["cut"].startswith("Error: your answer was cut off at the output token limit")
    assert "not a JSON object" not in told["cut"]


@pytest.mark.parametrize(
    ("stopped", "content", "error"),
    [
        (
            ("max_tokens", "length"),
            "The three causes are: first,",
            "the answer was cut off at the model's output token limit (length); raise the "
            "model's max_tokens, or ask for a shorter answer",
        ),
        (("content_filter", "SAFETY"), "", "the model stopped: content filter (SAFETY)"),
        (("refusal", "refusal"), "", "the model stopped: it refused to answer (refusal)"),
    ],
    ids=["max_tokens", "content_filter", "refusal"],
)
async def test_an_answer_that_stopped_short_fails_its_item_and_says_why(
    stopped: tuple[str, str], content: str, error: str
) -> None:
    class Stopped(ScriptedModel):
        async def invoke(self, messages, tools, *, on_token=None):  # type: ignore[override]
            answer = await super().invoke(messages, tools, on_token=on_token)
            reason, detail = stopped
            return answer.model_copy(update={"stop_reason": reason, "stop_detail": detail})

    memory = SessionMemory(InProcessStore())
    agent = ToolsAgent(model=Stopped([content]), memory=memory)
    result = await agent.step([AgentItem(prompt="question", session_id="s")])
    assert isinstance(result, AgentResult)
    item = result.items[0]
    assert item.error == error
    assert item.output == (content or None)  # what text there was is kept
    assert (await memory.load("s")).messages == []  # not remembered as an answer
    assert result.iterations == 1  # the model was called all the same


UNREADABLE = ScriptedAnswer(stop_reason="malformed_tool_call")


async def test_a_call_the_provider_could_not_read_is_asked_again() -> None:
    warnings: list[tuple[int, str]] = []

    async def warn(item: int, warning: str) -> None:
        warnings.append((item, warning))

    model = ScriptedModel([UNREADABLE, call("calculator", expression="2"), "4"])
    agent = ToolsAgent(model=model, tools=[CALC], on_warning=warn)
    again = await agent.step(ITEM)
    assert isinstance(again, EngineRequest)
    assert again.actions == []  # nothing to run: the engine steps again at once
    # The state goes through JSON as a stored run's does.
    metadata = AgentRequestMetadata.model_validate_json(again.metadata.model_dump_json())
    request = await agent.step(ITEM, EngineResponse(action_responses=[], metadata=metadata))
    assert isinstance(request, EngineRequest)
    assert [a.input for a in request.actions] == [{"expression": "2"}]
    told = [m.content for m in model.calls[1][0] if isinstance(m, UserMessage)]
    assert told[-1].startswith("Error: your last tool call could not be read.")
    result = await agent.step(ITEM, answer_all(request))
    assert isinstance(result, AgentResult)
    assert result.items[0].output == "4"
    assert result.iterations == 3
    assert warnings == [
        (0, "the model stopped: it wrote a tool call the provider could not read; asking it again")
    ]


async def test_calls_still_unreadable_after_two_retries_fail_the_item_and_say_why() -> None:
    model = ScriptedModel([UNREADABLE, UNREADABLE, UNREADABLE])
    agent = ToolsAgent(model=model, tools=[CALC])
    response: EngineResponse | None = None
    for _ in range(UNREADABLE_CALL_RETRIES):
        request = await agent.step(ITEM, response)
        assert isinstance(request, EngineRequest)
        response = EngineResponse(action_responses=[], metadata=request.metadata)
    result = await agent.step(ITEM, response)
    assert isinstance(result, AgentResult)
    assert result.items[0].error == (
        "the model stopped: it wrote a tool call the provider could not read"
    )
    assert len(model.calls) == 3


async def test_a_wrong_gemini_key_stops_the_step_rather_than_failing_the_item() -> None:
    """Gemini says a wrong key with HTTP 400, as it says a request it rejects: the step must
    stop (resumable once the key is mended), not fail every item one by one."""
    invalid = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                }
            ],
        }
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(400, json=invalid))
    async with httpx.AsyncClient(transport=transport) as client:
        model = GeminiModel("gemini-2.5-flash", api_key="AIza-wrong", http_client=client)
        agent = ToolsAgent(model=model)
        with pytest.raises(StepInterrupted) as caught:
            await agent.step([AgentItem(prompt="one"), AgentItem(prompt="two")])
    assert isinstance(caught.value.error, ModelAuthError)
    assert "API key not valid" in str(caught.value)


async def test_a_prompt_gemini_blocks_fails_its_item_and_the_others_go_on() -> None:
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
    }
    answered = {
        "candidates": [
            {"content": {"parts": [{"text": "4"}], "role": "model"}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 1},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        said = request.content.decode()
        return httpx.Response(200, json=blocked if "forbidden" in said else answered)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        model = GeminiModel("gemini-2.5-flash", api_key="AIza-k", http_client=client)
        agent = ToolsAgent(model=model, options=AgentOptions(batch_size=2))
        items = [AgentItem(prompt="forbidden"), AgentItem(prompt="2 + 2")]
        result = await agent.step(items)
    assert isinstance(result, AgentResult)
    first, second = result.items
    assert first.error == "the model stopped: content filter (prompt blocked: SAFETY)"
    assert (second.output, second.error) == ("4", None)


async def test_a_stop_of_the_providers_own_without_text_is_said_as_that() -> None:
    """Gemini's TOO_MANY_TOOL_CALLS (no parts) failed its item as 'the model's final answer
    was empty'."""
    stopped = {
        "candidates": [{"content": {"role": "model"}, "finishReason": "TOO_MANY_TOOL_CALLS"}],
        "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
    }
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(
        200, json=stopped))) as client:  # fmt: skip
        model = GeminiModel("gemini-2.5-flash", api_key="AIza-k", http_client=client)
        result = await ToolsAgent(model=model, tools=[CALC]).step(ITEM)
    assert isinstance(result, AgentResult)
    assert result.items[0].error == "the model stopped without an answer (TOO_MANY_TOOL_CALLS)"


async def test_a_stream_whose_chunks_carry_no_choice_is_said_as_no_choices() -> None:
    """As Azure's prompt filter may end a stream: said as the whole answer's 'no choices in
    the answer', not as an empty answer."""
    chunk = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4.1-mini",
             "choices": [], "prompt_filter_results": [{"prompt_index": 0}]}  # fmt: skip
    stream = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"

    def answer(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=stream, headers={"content-type": "text/event-stream"})

    async def ignore(delta: str) -> None:
        return None

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        model = OpenAIModel("gpt-4.1-mini", api_key="sk-k", http_client=client)
        with pytest.raises(ModelResponseError, match="no choices in the answer"):
            await model.invoke([UserMessage(content="hi")], [], on_token=ignore)


async def test_a_failed_call_is_marked_for_the_model_and_kept_marked_in_the_runs_metadata() -> None:
    """A tool's error, and a call the agent answers itself with an error (no such tool), reach
    the model as failed results (`ToolMessage.is_error`, which providers with a field for it
    send); a result is not marked. A run holding a failed step is of metadata version 5."""
    calls = [
        ScriptedCall(name="calculator", arguments={"expression": "1+1"}),
        ScriptedCall(name="calculator", arguments={"expression": "1/0"}),
        ScriptedCall(name="calculater", arguments={}),
    ]
    model = ScriptedModel([ScriptedAnswer(tool_calls=calls), "2, and 1/0 failed"])
    agent = ToolsAgent(model=model, tools=[CALC])
    first = await agent.step(ITEM)
    assert isinstance(first, EngineRequest)
    ok, failing = first.actions
    response = EngineResponse(
        action_responses=[
            ActionResponse(action=ok, data={"response": "2"}),
            ActionResponse(action=failing, error="ZeroDivisionError: division by zero"),
        ],
        metadata=first.metadata,
    )
    assert isinstance(await agent.step(ITEM, response), AgentResult)
    sent = [m for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert [(m.content.startswith("Error: "), m.is_error) for m in sent] == [
        (False, False),
        (True, True),
        (True, True),
    ]
    assert "is_error" not in sent[0].model_dump_json()  # a result is written as before

    stored = EngineResponse.model_validate_json(response.model_dump_json())
    second = await ToolsAgent(
        model=ScriptedModel([call("calculator", expression="3")]), tools=[CALC]
    ).step(ITEM, stored)
    assert isinstance(second, EngineRequest)
    assert second.metadata.version == 5  # an older agent refuses it with its own words
    kept = EngineRequest.model_validate_json(second.model_dump_json())
    assert [s.is_error for s in kept.metadata.previous_steps[0]] == [False, True, True]


class _Windowed:
    """A model whose context window the long question does not fit (refused unsent, as the
    window check refuses it), beside one that asks for a tool."""

    name = "windowed"

    def __init__(self) -> None:
        self._scripted = ScriptedModel([call("calculator", expression="1+1")])

    def overflows(self, messages: Sequence[ChatMessage]) -> bool:
        return any(isinstance(m, UserMessage) and m.content == "long" for m in messages)

    async def invoke(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], **_: object
    ) -> AssistantMessage:
        if self.overflows(messages):
            raise ContextWindowExceeded("windowed: the request would not fit its window")
        return await self._scripted.invoke(messages, tools)


async def test_an_item_over_the_context_window_fails_with_its_code_kept_in_version_6() -> None:
    """A front tells its client the cause by code (OpenAI's `context_length_exceeded`), not
    by the message's words; a run holding such an item is of metadata version 6, which an
    older agent refuses with its own words rather than the field."""
    agent = ToolsAgent(model=_Windowed(), tools=[CALC])
    items = [AgentItem(prompt="long"), AgentItem(prompt="short")]
    first = await agent.step(items)
    assert isinstance(first, EngineRequest)
    failed = first.metadata.finished_items[0]
    assert failed.error == "windowed: the request would not fit its window"
    assert failed.error_code == "context_length_exceeded"
    assert first.metadata.version == 6
    kept = EngineRequest.model_validate_json(first.model_dump_json())
    assert kept.metadata.finished_items[0].error_code == "context_length_exceeded"
    rejected = ItemResult(error="the model rejected the request: HTTP 400")
    assert "error_code" not in rejected.model_dump_json()  # written only when set


class _OverflowedByResults(_Windowed):
    """The question fits; a tool's result does not."""

    def overflows(self, messages: Sequence[ChatMessage]) -> bool:
        return any(isinstance(m, ToolMessage) and m.content == "huge" for m in messages)


async def test_a_window_overflowed_by_the_runs_own_tool_results_has_no_code() -> None:
    """`context_length_exceeded` tells a client to trim its conversation and ask again: when
    the run's own tool results overflowed it, trimming would run the tools again, to fail the
    same way. The item fails with the reason, and no code."""
    agent = ToolsAgent(model=_OverflowedByResults(), tools=[CALC])
    request = await agent.step([AgentItem(prompt="short")])
    assert isinstance(request, EngineRequest)
    result = await agent.step([AgentItem(prompt="short")], answer_all(request, "huge"))
    assert isinstance(result, AgentResult)
    failed = result.items[0]
    assert failed.error == "windowed: the request would not fit its window"
    assert failed.error_code is None


async def test_a_run_stored_before_failed_calls_were_marked_resumes() -> None:
    """Metadata as versions 1 to 4 wrote it: a failed step is its `Error: ` text alone."""
    model = ScriptedModel(
        [call("calculator", expression="1/0"), call("calculator", expression="1"), "done"]
    )
    agent = ToolsAgent(model=model, tools=[CALC])
    first = await agent.step(ITEM)
    assert isinstance(first, EngineRequest)
    failed = [ActionResponse(action=first.actions[0], error="ZeroDivisionError")]
    second = await agent.step(
        ITEM, EngineResponse(action_responses=failed, metadata=first.metadata)
    )
    assert isinstance(second, EngineRequest)
    old = json.loads(second.model_dump_json())
    for step in old["metadata"]["previous_steps"]["0"]:
        step.pop("is_error")
    old["metadata"]["version"] = 1
    old["action_responses"] = [
        {"action": second.actions[0].model_dump(mode="json"), "data": {"response": "1"}}
    ]
    del old["actions"]
    result = await agent.step(ITEM, EngineResponse.model_validate_json(json.dumps(old)))
    assert isinstance(result, AgentResult)
    assert result.items[0].output == "done"
    sent = [m for m in model.calls[2][0] if isinstance(m, ToolMessage)]
    assert [(m.content, m.is_error) for m in sent] == [
        ("Error: ZeroDivisionError", False),
        ("1", False),
    ]
