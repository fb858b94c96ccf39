"""Agents on the calling client's own model (MCP sampling with tools), over both eras."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from pydantic import JsonValue

from agent import (
    AgentOptions,
    AssistantMessage,
    MediaPart,
    ModelError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from agent.models import ModelSettings
from gateway import AgentSpec, ConfigError, Gateway
from gateway.cli import main
from gateway.config import GatewaySettings
from gateway.model_specs import ClientSampling, resolve_model
from gateway.sampling_model import to_assistant_message, to_sampling_request
from gateway.server import http_options
from toolkits import FunctionToolkit, calculator

from .support import ERAS, SAMPLING_WITH_TOOLS, LogLog, serve

pytestmark = pytest.mark.anyio


def sampling_gateway(*, tools: bool = True) -> Gateway:
    spec = AgentSpec(
        name="helper", model=resolve_model("sampling"), tools=["calculator"] if tools else []
    )
    return Gateway([FunctionToolkit("calculator", [calculator])], [spec])


class ClientModel:
    """The test client's model: asks for the calculator, then answers with what it saw."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        self.requests.append(params)
        last = params.messages[-1].content_as_list[0]
        if isinstance(last, types.ToolResultContent):
            seen = last.content[0]
            assert isinstance(seen, types.TextContent)
            return types.CreateMessageResultWithTools(
                role="assistant",
                content=[types.TextContent(text=f"It is {seen.text}.")],
                model="client-model",
                stop_reason="endTurn",
            )
        return types.CreateMessageResultWithTools(
            role="assistant",
            content=[
                types.ToolUseContent(id="use_1", name="calculator", input={"expression": "6 * 7"})
            ],
            model="client-model",
            stop_reason="toolUse",
        )


@pytest.mark.parametrize("era", ERAS)
async def test_the_agent_runs_on_the_client_model_with_tools(era: str) -> None:
    model = ClientModel()
    log = LogLog()
    async with Client(
        serve(sampling_gateway()),
        mode=era,
        sampling_callback=model,
        sampling_capabilities=SAMPLING_WITH_TOOLS,
        logging_callback=log,
        log_level="info",
    ) as client:
        result = await client.call_tool("helper", {"prompt": "What is 6 * 7?"})
    assert not result.is_error, result.content
    # 2026-07-28 runs pause for each answer; a pause is not reported as a failure.
    waits = log.lines.count("info: agent helper: waiting for the client's model")
    assert waits == (0 if era == "legacy" else 2)
    assert not [line for line in log.lines if "failed" in line]
    assert result.content == [types.TextContent(text="It is 42.")]
    assert result.structured_content is not None
    assert result.structured_content["usage"]["requests"] == 2
    first, second = model.requests
    assert first.system_prompt == "You are a helpful assistant"
    assert [t.name for t in first.tools or []] == ["calculator"]
    assert first.messages == [
        types.SamplingMessage(role="user", content=types.TextContent(text="What is 6 * 7?"))
    ]
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    tool_result = second.messages[2].content_as_list[0]
    assert isinstance(tool_result, types.ToolResultContent)
    assert tool_result.tool_use_id == "use_1"


class ItemsClientModel:
    """Asks the calculator for the question (an expression), then answers with its result."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        question = params.messages[0].content_as_list[0]
        assert isinstance(question, types.TextContent)
        self.asked.append(question.text)
        last = params.messages[-1].content_as_list[0]
        if isinstance(last, types.ToolResultContent):
            seen = last.content[0]
            assert isinstance(seen, types.TextContent)
            return types.CreateMessageResultWithTools(
                role="assistant",
                content=[types.TextContent(text=f"It is {seen.text}.")],
                model="client-model",
                stop_reason="endTurn",
            )
        use = types.ToolUseContent(
            id=f"use_{len(self.asked)}", name="calculator", input={"expression": question.text}
        )
        return types.CreateMessageResultWithTools(
            role="assistant", content=[use], model="client-model", stop_reason="toolUse"
        )


@pytest.mark.parametrize("era", ERAS)
async def test_items_run_together_on_the_client_model_each_step_in_one_round(era: str) -> None:
    """Two items in one batch: a 2026-07-28 client is asked both items' questions of a step in
    one round, and each question once (a pause of one item used to lose the other's answer,
    so the run asked again and again, then refused a round as answered already)."""
    spec = AgentSpec(
        name="helper",
        model=resolve_model("sampling"),
        tools=["calculator"],
        options=AgentOptions(batch_size=2),
    )
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    model = ItemsClientModel()
    log = LogLog()
    async with Client(
        serve(gateway),
        mode=era,
        sampling_callback=model,
        sampling_capabilities=SAMPLING_WITH_TOOLS,
        logging_callback=log,
        log_level="info",
    ) as client:
        items = [{"prompt": "6 * 7"}, {"prompt": "2 * 3"}]
        result = await client.call_tool("helper", {"items": items})
    assert not result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["items"] == [
        {"output": "It is 42.", "error": None},
        {"output": "It is 6.", "error": None},
    ]
    assert sorted(model.asked) == ["2 * 3", "2 * 3", "6 * 7", "6 * 7"]  # each question once
    waits = log.lines.count("info: agent helper: waiting for the client's model")
    assert waits == (0 if era == "legacy" else 2)  # a round for each step


@pytest.mark.parametrize("era", ERAS)
async def test_the_agent_asks_the_client_model_with_its_settings(era: str) -> None:
    settings = ModelSettings(temperature=0.2, max_tokens=321, top_p=0.9)
    spec = AgentSpec(
        name="helper", model=resolve_model("sampling", settings=settings), tools=["calculator"]
    )
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    model = ClientModel()
    async with Client(
        serve(gateway), mode=era, sampling_callback=model, sampling_capabilities=SAMPLING_WITH_TOOLS
    ) as client:
        result = await client.call_tool("helper", {"prompt": "What is 6 * 7?"})
    assert result.content == [types.TextContent(text="It is 42.")]
    assert len(model.requests) == 2
    for asked in model.requests:
        assert (asked.temperature, asked.max_tokens) == (0.2, 321)
        assert asked.metadata == {"top_p": 0.9}


async def test_modern_rounds_carry_the_run_sealed_and_refuse_a_forged_state() -> None:
    server = serve(sampling_gateway())
    model = ClientModel()
    async with Client(
        server, sampling_callback=model, sampling_capabilities=SAMPLING_WITH_TOOLS
    ) as client:
        args = {"prompt": "What is 6 * 7?"}
        first = await client.session.call_tool("helper", args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        assert first.request_state is not None
        [(key, request)] = first.input_requests.items()
        assert isinstance(request, types.CreateMessageRequest)
        # Encrypted: the client sees neither the prompt nor the run's internals.
        assert first.request_state.startswith("v1.")
        assert "6 * 7" not in first.request_state
        assert "run_id" not in first.request_state
        answer = await model(
            ClientRequestContext(session=client.session, request_id=key), request.params
        )
        forged = first.request_state[:-4] + (
            "AAAA" if not first.request_state.endswith("AAAA") else "BBBB"
        )
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "helper",
                args,
                input_responses={key: answer},
                request_state=forged,
                allow_input_required=True,
            )
        with pytest.raises(MCPError, match="Invalid or expired requestState"):
            await client.session.call_tool(
                "helper",
                {"prompt": "Something else"},
                input_responses={key: answer},
                request_state=first.request_state,
                allow_input_required=True,
            )
        second = await client.session.call_tool(
            "helper",
            args,
            input_responses={key: answer},
            request_state=first.request_state,
            allow_input_required=True,
        )
        # The tool ran; the next question is the client model's second turn.
        assert isinstance(second, types.InputRequiredResult)
        assert second.input_requests is not None
        [(key2, request2)] = second.input_requests.items()
        assert key2 != key
        assert isinstance(request2, types.CreateMessageRequest)
        assert len(request2.params.messages) == 3


@pytest.mark.parametrize(
    "unanswered",
    [
        None,
        {},
        {
            "nope": types.CreateMessageResult(
                role="assistant", content=types.TextContent(text="4"), model="m"
            )
        },
    ],
    ids=["no input responses", "empty input responses", "an unknown key"],
)
async def test_a_retry_that_answers_nothing_is_asked_again_and_the_answer_then_goes_on(
    unanswered: dict[str, types.InputResponse] | None,
) -> None:
    """A retry with the round's state but no answer to its question decides nothing: the
    question comes again, and answering it as asked resumes the run (it was recorded as the
    round's decision, so every answer after it was refused)."""
    server = serve(sampling_gateway())
    model = ClientModel()
    async with Client(
        server, sampling_callback=model, sampling_capabilities=SAMPLING_WITH_TOOLS
    ) as client:
        args = {"prompt": "What is 6 * 7?"}
        first = await client.session.call_tool("helper", args, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        again = await client.session.call_tool(
            "helper",
            args,
            input_responses=unanswered,
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(again, types.InputRequiredResult)
        assert again.input_requests is not None
        assert again.input_requests.keys() == (first.input_requests or {}).keys()
        [(key, request)] = again.input_requests.items()
        assert isinstance(request, types.CreateMessageRequest)
        context = ClientRequestContext(session=client.session, request_id=key)
        answer = await model(context, request.params)
        resumed = await client.session.call_tool(
            "helper",
            args,
            input_responses={key: answer},
            request_state=again.request_state,
            allow_input_required=True,
        )
        # The calculator ran: the next question is the client model's second turn.
        assert isinstance(resumed, types.InputRequiredResult), resumed
        assert resumed.input_requests is not None
        [(key2, request2)] = resumed.input_requests.items()
        assert key2 != key
        assert isinstance(request2, types.CreateMessageRequest)
        assert len(request2.params.messages) == 3


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_without_sampling_gets_an_error_naming_the_setting(era: str) -> None:
    async with Client(serve(sampling_gateway()), mode=era) as client:
        result = await client.call_tool("helper", {"prompt": "hi"})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    text = result.content[0].text
    assert "the client does not support sampling" in text
    assert "set `model` in [agents.helper]" in text


@pytest.mark.parametrize("era", ERAS)
async def test_sampling_without_tools_support_is_refused_for_an_agent_with_tools(era: str) -> None:
    plain = types.SamplingCapability()
    async with Client(
        serve(sampling_gateway()),
        mode=era,
        sampling_callback=ClientModel(),
        sampling_capabilities=plain,
    ) as client:
        result = await client.call_tool("helper", {"prompt": "hi"})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text == (
        "agent 'helper' runs on the client's own model (model = \"sampling\" in "
        "[agents.helper]), which this client cannot be: the client supports sampling, but not "
        "with tools (sampling.tools). To run it here instead, set `model` in [agents.helper] "
        "to a model spec."
    )


@pytest.mark.parametrize("era", ERAS)
async def test_an_agent_without_tools_needs_plain_sampling_only(era: str) -> None:
    model = ClientModel()

    async def answer(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        await model(context, params)
        return types.CreateMessageResultWithTools(
            role="assistant", content=types.TextContent(text="Hello."), model="m"
        )

    async with Client(
        serve(sampling_gateway(tools=False)),
        mode=era,
        sampling_callback=answer,
        sampling_capabilities=types.SamplingCapability(),
    ) as client:
        result = await client.call_tool("helper", {"prompt": "hi"})
    assert result.content == [types.TextContent(text="Hello.")]
    assert model.requests[0].tools is None


async def test_a_failing_client_model_is_an_error_result() -> None:
    async def refuse(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.ErrorData:
        return types.ErrorData(code=-1, message="the user declined")

    async with Client(
        serve(sampling_gateway()),
        mode="legacy",
        sampling_callback=refuse,
        sampling_capabilities=SAMPLING_WITH_TOOLS,
    ) as client:
        result = await client.call_tool("helper", {"prompt": "hi"})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert "the client's model failed: the user declined" in result.content[0].text


def test_a_tools_media_go_to_the_clients_model_in_its_result() -> None:
    image = MediaPart(type="image", media_type="image/png", data="iVBORw0KGgo=")
    audio = MediaPart(type="audio", media_type="audio/wav", data="UklGRiQAAAA=")
    shown = ToolMessage(
        tool_call_id="a", name="shot", content="[image: image/png, 8 bytes]", media=(image, audio)
    )
    call = ToolCall(id="a", name="shot", arguments={})
    request = to_sampling_request(
        [UserMessage(content="Look"), AssistantMessage(tool_calls=(call,)), shown],
        [ToolDefinition(name="shot", source_node="shot")],
        max_tokens=100,
    )
    [result] = request.params.messages[2].content_as_list
    assert isinstance(result, types.ToolResultContent)
    assert result.content == [
        types.TextContent(text="[image: image/png, 8 bytes]"),
        types.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        types.AudioContent(data="UklGRiQAAAA=", mime_type="audio/wav"),
    ]


def test_a_failed_calls_result_is_marked_is_error_for_the_clients_model() -> None:
    calls = tuple(ToolCall(id=i, name="calculator", arguments={}) for i in "ab")
    request = to_sampling_request(
        [
            UserMessage(content="Sum them"),
            AssistantMessage(tool_calls=calls),
            ToolMessage(tool_call_id="a", name="calculator", content="2"),
            ToolMessage(tool_call_id="b", name="calculator", content="Error: no", is_error=True),
        ],
        [ToolDefinition(name="calculator", source_node="calculator")],
        max_tokens=100,
    )
    results = request.params.messages[2].content_as_list
    assert [
        (r.tool_use_id, r.is_error) for r in results if isinstance(r, types.ToolResultContent)
    ] == [
        ("a", None),
        ("b", True),
    ]
    said = request.model_dump(by_alias=True, exclude_none=True)["params"]["messages"][2]["content"]
    assert ["isError" in block for block in said] == [False, True]


def test_messages_map_to_sampling_and_back() -> None:
    calls = (
        ToolCall(id="a", name="calculator", arguments={"expression": "1+1"}),
        ToolCall(id="b", name="calculator", arguments={"expression": "2+2"}),
    )
    request = to_sampling_request(
        [
            SystemMessage(content="Be brief."),
            UserMessage(content="Sum them"),
            AssistantMessage(content="Let me see.", tool_calls=calls),
            ToolMessage(tool_call_id="a", name="calculator", content="2"),
            ToolMessage(tool_call_id="b", name="calculator", content="4"),
        ],
        [ToolDefinition(name="calculator", description="Math.", source_node="calculator")],
        max_tokens=100,
    )
    params = request.params
    assert params.system_prompt == "Be brief."
    assert params.max_tokens == 100
    assert [m.role for m in params.messages] == ["user", "assistant", "user"]
    assistant = params.messages[1].content_as_list
    assert assistant[0] == types.TextContent(text="Let me see.")
    assert [b.id for b in assistant[1:] if isinstance(b, types.ToolUseContent)] == ["a", "b"]
    results = params.messages[2].content_as_list
    assert [r.tool_use_id for r in results if isinstance(r, types.ToolResultContent)] == ["a", "b"]

    answer = to_assistant_message(
        types.CreateMessageResultWithTools(
            role="assistant",
            content=[
                types.TextContent(text="Checking. "),
                types.ToolUseContent(id="c", name="calculator", input={"expression": "3"}),
            ],
            model="claude-sonnet-4-5-20250929",
            stop_reason="toolUse",
        )
    )
    assert answer.response_model == "claude-sonnet-4-5-20250929"  # as the client named it
    assert answer.content == "Checking. "
    assert answer.tool_calls == (
        ToolCall(id="c", name="calculator", arguments={"expression": "3"}),
    )
    assert answer.usage.requests == 1


def test_what_the_clients_model_writes_is_read_as_a_providers_answer_is() -> None:
    """NaN and nesting past 100 levels are refused arguments; a lone surrogate is U+FFFD."""
    deep: JsonValue = {}
    for _ in range(100):
        deep = [deep]
    answer = to_assistant_message(
        types.CreateMessageResultWithTools(
            role="assistant",
            content=[
                types.TextContent(text="half \ud83d"),
                types.ToolUseContent(id="c", name="calculator", input={"x": float("nan")}),
                types.ToolUseContent(id="d", name="calculator", input={"x": deep}),
                types.ToolUseContent(id="e", name="calculator", input={"x": "a\ud800"}),
            ],
            model="m",
            stop_reason="toolUse",
        )
    )
    assert answer.content == "half \ufffd"
    assert [(c.arguments, c.invalid_arguments) for c in answer.tool_calls] == [
        ({}, '{"x": NaN}'),
        ({}, json.dumps({"x": deep})),
        ({"x": "a\ufffd"}, None),
    ]


async def test_the_marker_explains_itself_outside_a_server() -> None:
    marker = resolve_model("sampling")
    assert isinstance(marker, ClientSampling)
    with pytest.raises(ModelError, match="needs the MCP client that called the gateway, and"):
        await marker.invoke([UserMessage(content="hi")], [])


def lead_and_sampling_helper() -> tuple[Gateway, ScriptedModel]:
    """`lead` thinks with a model of its own, and asks `helper`, on the client's model (with
    settings of its own), and the calculator."""
    lead_model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[ScriptedCall(name="helper", id="h1", arguments={"prompt": "6 * 7?"})]
            ),
            "The helper says 42.",
        ]
    )
    settings = ModelSettings(temperature=0.2, max_tokens=321)
    helper = AgentSpec("helper", resolve_model("sampling", settings=settings), tools=["calculator"])
    lead = AgentSpec("lead", lead_model, tools=["helper"])
    return Gateway([FunctionToolkit("calculator", [calculator])], [lead, helper]), lead_model


@pytest.mark.parametrize("era", ERAS)
async def test_a_sub_agent_on_sampling_thinks_with_the_client_model_under_a_lead_with_its_own(
    era: str,
) -> None:
    gateway, lead_model = lead_and_sampling_helper()
    model = ClientModel()
    async with Client(
        serve(gateway), mode=era, sampling_callback=model, sampling_capabilities=SAMPLING_WITH_TOOLS
    ) as client:
        result = await client.call_tool("lead", {"prompt": "Ask the helper"})
    assert not result.is_error, result.content
    assert result.content == [types.TextContent(text="The helper says 42.")]
    assert len(model.requests) == 2  # the helper's two answers, its own settings in each
    for asked in model.requests:
        assert (asked.temperature, asked.max_tokens) == (0.2, 321)
        assert [t.name for t in asked.tools or []] == ["calculator"]
    told = [m.content for m in lead_model.calls[1][0] if isinstance(m, ToolMessage)]
    assert told == ["It is 42."]


@pytest.mark.parametrize("era", ERAS)
async def test_two_sub_agents_on_sampling_called_in_one_step_ask_in_one_round(era: str) -> None:
    """The lead calls two sub-agents on the client's model at once: a 2026-07-28 client gets
    both their questions in one round (the run used to fail: `ExceptionGroup`)."""
    both = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name=name, id=name, arguments={"prompt": question})
            for name, question in (("first", "6 * 7"), ("second", "2 * 3"))
        ]
    )
    lead = ScriptedModel([both, "Both answered."])
    helpers = [
        AgentSpec(name=name, model=resolve_model("sampling"), tools=["calculator"])
        for name in ("first", "second")
    ]
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [AgentSpec(name="lead", model=lead, tools=["first", "second"]), *helpers],
    )
    model = ItemsClientModel()
    log = LogLog()
    async with Client(
        serve(gateway),
        mode=era,
        sampling_callback=model,
        sampling_capabilities=SAMPLING_WITH_TOOLS,
        logging_callback=log,
        log_level="info",
    ) as client:
        result = await client.call_tool("lead", {"prompt": "Ask both"})
    assert result.content == [types.TextContent(text="Both answered.")]
    told = {m.tool_call_id: m.content for m in lead.calls[1][0] if isinstance(m, ToolMessage)}
    assert told == {"first": "It is 42.", "second": "It is 6."}
    assert sorted(model.asked) == ["2 * 3", "2 * 3", "6 * 7", "6 * 7"]  # each question once
    waits = log.lines.count("info: agent lead: waiting for the client's model")
    assert waits == (0 if era == "legacy" else 2)  # a round for each step of theirs


@pytest.mark.parametrize("era", ERAS)
async def test_a_sub_agent_on_sampling_says_why_a_client_that_cannot_sample_fails_it(
    era: str,
) -> None:
    gateway, _ = lead_and_sampling_helper()
    async with Client(serve(gateway), mode=era) as client:
        result = await client.call_tool("lead", {"prompt": "Ask the helper"})
    assert result.is_error
    assert result.content == [
        types.TextContent(
            text="agent 'lead' stopped in the sub-agent 'helper' (lead -> helper): cannot use "
            "the client's model: the client does not support sampling. The run is not stored "
            "(the gateway has no run store): calling again starts it over, and may work once "
            "the cause is gone."
        )
    ]


def test_cli_run_refuses_the_client_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[agents.helper]\nmodel = "sampling"\n')
    assert main(["run", "hi", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "model 'sampling' needs an MCP client: use `agent-gateway serve`" in err


Round = tuple[str, types.InputResponse, str]
"""A round's input request key, the client's answer, and the sealed `requestState`."""
ARGS = {"prompt": "What is 6 * 7?"}


async def first_round(server: Server[Any], model: ClientModel) -> Round:
    async with Client(
        server, sampling_capabilities=SAMPLING_WITH_TOOLS, sampling_callback=model
    ) as client:
        first = await client.session.call_tool("helper", ARGS, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        assert first.request_state is not None
        [(key, request)] = first.input_requests.items()
        assert isinstance(request, types.CreateMessageRequest)
        context = ClientRequestContext(session=client.session, request_id=key)
        return key, await model(context, request.params), first.request_state


async def takes(server: Server[Any], model: ClientModel, round: Round) -> bool:
    """Whether `server` takes the round's retry (else it refuses its state)."""
    key, answer, state = round
    async with Client(
        server, sampling_capabilities=SAMPLING_WITH_TOOLS, sampling_callback=model
    ) as client:
        refused = ""
        try:
            next_round = await client.session.call_tool(
                "helper",
                ARGS,
                input_responses={key: answer},
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            refused = str(exc)
        else:
            assert isinstance(next_round, types.InputRequiredResult)
    assert refused in ("", "Invalid or expired requestState"), refused
    return not refused


async def test_replicas_sharing_the_state_key_take_each_others_rounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GW_STATE_KEY", "k" * 40)
    shared = [serve(sampling_gateway(), state_key_env="GW_STATE_KEY") for _ in range(2)]
    alone = serve(sampling_gateway())
    model = ClientModel()
    round = await first_round(shared[0], model)
    assert await takes(shared[1], model, round)
    assert not await takes(alone, model, round)


async def test_the_state_key_changes_with_no_round_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rotation, each step rolled out to every replica before the next: `old,new` (old
    seals), `new old` (new seals), `new`. Replicas a step apart take each other's rounds."""
    old, new = "o" * 40, "n" * 40
    steps = {
        "GW_OLD": old,
        "GW_BOTH": f"{old},{new}",
        "GW_SWAPPED": f" {new}\n{old} ",
        "GW_NEW": new,
    }
    for name, value in steps.items():
        monkeypatch.setenv(name, value)
    replica = {name: serve(sampling_gateway(), state_key_env=name) for name in steps}
    model = ClientModel()
    taken: dict[tuple[str, str], bool] = {}
    for sealer, opener in itertools.pairwise(steps):
        for one, other in ((sealer, opener), (opener, sealer)):
            taken[one, other] = await takes(
                replica[other], model, await first_round(replica[one], model)
            )
    assert all(taken.values()), taken
    # Skipping a step does refuse: `new` alone cannot open what `old` sealed, nor back.
    sealed_by_old = await first_round(replica["GW_OLD"], model)
    assert not await takes(replica["GW_NEW"], model, sealed_by_old)
    assert not await takes(replica["GW_OLD"], model, await first_round(replica["GW_NEW"], model))


def test_a_state_key_must_be_set_and_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="GW_NO_SUCH_KEY is not set"):
        serve(sampling_gateway(), state_key_env="GW_NO_SUCH_KEY")
    monkeypatch.setenv("GW_SHORT_KEY", "short")
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        serve(sampling_gateway(), state_key_env="GW_SHORT_KEY")
    monkeypatch.setenv("GW_SECOND_SHORT", f"{'k' * 40}, tiny-second-key")
    with pytest.raises(ConfigError, match=r"keys\[1\] is 15 bytes") as refused:
        serve(sampling_gateway(), state_key_env="GW_SECOND_SHORT")
    assert "tiny" not in str(refused.value)
    monkeypatch.setenv("GW_BLANK_KEYS", " , ")
    with pytest.raises(ConfigError, match="GW_BLANK_KEYS is not set"):
        serve(sampling_gateway(), state_key_env="GW_BLANK_KEYS")


def test_serving_stateless_without_a_state_key_warns_once_at_start(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GW_STATE_KEY", "k" * 40)
    keyed = GatewaySettings(state_key_env="GW_STATE_KEY")
    with caplog.at_level(logging.WARNING, logger="gateway.server.transports.http"):
        http_options("127.0.0.1:0", GatewaySettings(), stateless=False)
        http_options("127.0.0.1:0", keyed, stateless=True)
        assert caplog.messages == []
        http_options("127.0.0.1:0", GatewaySettings(), stateless=True)
    [warning] = caplog.messages
    assert warning.startswith("serving --stateless without [gateway] state_key_env: ")
    assert "only this replica takes its next round" in warning
