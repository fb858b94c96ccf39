"""Agents served as MCP tools, in process, over both protocol eras."""

from __future__ import annotations

import re

import anyio
import mcp_types as types
import pytest
from mcp import Client

from agent import (
    AgentOptions,
    InProcessStore,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
)
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.config import GatewaySettings
from gateway.server import build_server
from toolkits import CallInfo, FunctionToolkit, calculator, function_tool

from .proxying import set_log_level
from .support import (
    ERAS,
    Blocker,
    LogLog,
    ProgressLog,
    calculator_agent,
    calculator_gateway,
    call,
    serve,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


def times_42() -> list[ScriptedAnswer | str]:
    return [call("calculator", expression="6 * 7"), "It is 42."]


async def test_agents_are_listed_with_their_description_and_schemas(era: str) -> None:
    gateway = calculator_gateway(
        calculator_agent([], name="assistant"), calculator_agent([], name="researcher")
    )
    async with Client(serve(gateway), mode=era) as client:
        listing = await client.list_tools()
    tools = {tool.name: tool for tool in listing.tools}
    assert list(tools) == ["assistant", "researcher"]
    assert tools["researcher"].description == "The researcher agent."
    schema = tools["assistant"].input_schema
    # `prompt` or `items`: said in words, since providers refuse a top-level anyOf / oneOf.
    assert not {"required", "anyOf", "oneOf", "allOf"} & set(schema)
    assert set(schema["properties"]) == {"prompt", "session_id", "items", "context"}
    assert schema["properties"]["context"]["type"] == "object"
    assert "context" in schema["properties"]["items"]["items"]["properties"]
    assert "Give this, or `items` (not both)" in schema["properties"]["prompt"]["description"]
    assert tools["assistant"].output_schema is not None


async def test_an_agent_without_a_description_is_described_by_its_config(era: str) -> None:
    instructions = (
        "\nYou answer questions about money: prices, taxes and exchange rates, always with "
        "the calculator, never from memory, and you say which rates you used and when they "
        "were last updated.\nBe brief."
    )
    outer = AgentSpec(
        name="outer",
        model=ScriptedModel([]),
        tools=["calculator", "inner"],
        options=AgentOptions(system_message=instructions),
    )
    inner = AgentSpec(name="inner", model=ScriptedModel([]))
    async with Client(serve(calculator_gateway(outer, inner)), mode=era) as client:
        listing = await client.list_tools()
    described = {tool.name: tool.description for tool in listing.tools}
    assert described == {
        "outer": "Ask the agent 'outer'. It can use the tools of: calculator, inner. Its "
        'instructions begin: "You answer questions about money: prices, taxes and exchange '
        "rates, always with the calculator, never from memory, and you say which rates you "
        'used and when..."',
        "inner": "Ask the agent 'inner'.",  # no tools, the default instructions: nothing more
    }


async def test_an_agent_answers_with_text_and_structured_output(era: str) -> None:
    gateway = calculator_gateway(calculator_agent(times_42()))
    async with Client(serve(gateway), mode=era) as client:
        result = await client.call_tool("assistant", {"prompt": "What is 6 * 7?"})
    assert not result.is_error
    assert result.content == [types.TextContent(text="It is 42.")]
    structured = result.structured_content
    assert structured is not None
    assert structured["output"] == "It is 42."
    assert structured["usage"]["requests"] == 2
    assert "steps" not in structured


async def test_steps_are_returned_when_the_agent_is_configured_to(era: str) -> None:
    gateway = calculator_gateway(calculator_agent(times_42(), return_intermediate_steps=True))
    async with Client(serve(gateway), mode=era) as client:
        [tool] = (await client.list_tools()).tools
        result = await client.call_tool("assistant", {"prompt": "What is 6 * 7?"})
    assert result.structured_content is not None
    assert tool.output_schema is not None
    declared = tool.output_schema["properties"]["steps"]["items"]["properties"]
    assert list(declared) == ["call_id", "tool", "input", "observation"]
    assert result.structured_content["steps"] == [
        {
            "call_id": "call_1",
            "tool": "calculator",
            "input": {"expression": "6 * 7"},
            "observation": "42",
        }
    ]  # as `run --json` has them


async def test_session_id_continues_a_conversation(era: str) -> None:
    model = ScriptedModel(["Hello Ada.", "Your name is Ada."])
    gateway = Gateway(
        [], [AgentSpec(name="chat", model=model)], memory=SessionMemory(InProcessStore())
    )
    async with Client(serve(gateway), mode=era) as client:
        await client.call_tool("chat", {"prompt": "I am Ada", "session_id": "s1"})
        await client.call_tool("chat", {"prompt": "Who am I?", "session_id": "s1"})
    second_call_messages = [m.content for m in model.calls[1][0]]
    assert "I am Ada" in second_call_messages
    assert "Hello Ada." in second_call_messages


async def test_a_served_run_has_the_context_its_client_gives(era: str) -> None:
    """A client gives the run's `context` (and an item its own): the system message and the
    local tools read it; a placeholder it lacks fails the item, saying so."""
    told: list[CallInfo] = []

    @function_tool
    def account(info: CallInfo) -> str:
        """The caller's account."""
        told.append(info)
        return f"account of {info.context.get('customer')}"

    model = ScriptedModel([call("account"), "Ada's account.", "B.", "C."])
    spec = AgentSpec(
        name="helper",
        model=model,
        tools=["account"],
        options=AgentOptions(system_message="You serve {{ context.customer }}."),
    )
    gateway = Gateway([FunctionToolkit("account", [account])], [spec])
    async with Client(serve(gateway), mode=era) as client:
        one = await client.call_tool("helper", {"prompt": "Mine?", "context": {"customer": "Ada"}})
        items = [{"prompt": "b"}, {"prompt": "c", "context": {"customer": "Cy"}}]
        many = await client.call_tool("helper", {"items": items, "context": {"customer": "Bo"}})
        lacking = await client.call_tool("helper", {"prompt": "Hi"})
        bad = await client.call_tool("helper", {"prompt": "Hi", "context": ["Ada"]})
    assert not one.is_error
    assert one.structured_content is not None
    assert one.structured_content["output"] == "Ada's account."
    assert [info.context for info in told] == [{"customer": "Ada"}]
    assert told[0].agent == "helper"
    assert told[0].run_id is not None
    systems = [str(sent[0].content) for sent, _ in model.calls]
    assert systems == ["You serve Ada."] * 2 + ["You serve Bo.", "You serve Cy."]
    assert not many.is_error
    assert lacking.is_error
    assert "the system message uses {{ context.customer }}, but the run's context has no " in (
        str(lacking.content[0].model_dump())
    )
    assert bad.is_error
    assert "invalid arguments for agent 'helper': context: " in str(bad.content[0].model_dump())
    assert len(model.calls) == 4  # neither of the last two reached the model


async def test_a_run_that_hits_max_iterations_is_an_error_result(era: str) -> None:
    loop = [call("calculator", expression="1")] * 3
    gateway = calculator_gateway(calculator_agent(loop, max_iterations=2))
    async with Client(serve(gateway), mode=era) as client:
        result = await client.call_tool("assistant", {"prompt": "loop"})
    assert result.is_error
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text.startswith("agent 'assistant' failed: Max iterations (2) reached")
    assert result.content[0].text.endswith(
        "within the allowed number of iterations. The run has ended and cannot be continued: "
        "calling again with the same prompt would likely fail the same way."
    )  # one period after the error's own sentence, not two


async def test_a_model_failure_is_an_error_result_and_the_server_lives_on(era: str) -> None:
    gateway = calculator_gateway(calculator_agent([call("calculator", expression="1")]))
    async with Client(serve(gateway), mode=era) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
        assert result.is_error
        assert isinstance(result.content[0], types.TextContent)
        assert "agent 'assistant' stopped" in result.content[0].text  # a model error
        assert "has 1 answers and was asked for answer 2" in result.content[0].text
        assert len((await client.list_tools()).tools) == 1


async def test_bad_arguments_and_unknown_tools_are_error_results(era: str) -> None:
    gateway = calculator_gateway(calculator_agent([]))
    async with Client(serve(gateway), mode=era) as client:
        missing = await client.call_tool("assistant", {})
        wrong_type = await client.call_tool("assistant", {"prompt": 42})
        blank = await client.call_tool("assistant", {"prompt": "  "})
        blank_item = await client.call_tool("assistant", {"items": [{"prompt": ""}]})
        unknown = await client.call_tool("nobody", {"prompt": "?"})
    assert missing.is_error
    assert unknown.is_error
    assert missing.content == [
        types.TextContent(
            text="invalid arguments for agent 'assistant': no question: give `prompt` (text) "
            'or `items` (a list of {"prompt": ...})'
        )
    ]
    assert wrong_type.content == [
        types.TextContent(
            text="invalid arguments for agent 'assistant': prompt: Input should be a valid string"
        )
    ]
    for refused in (blank, blank_item):
        assert refused.is_error
        assert isinstance(refused.content[0], types.TextContent)
        assert "a prompt must not be empty" in refused.content[0].text
    assert isinstance(unknown.content[0], types.TextContent)
    assert unknown.content[0].text == "no tool named 'nobody' (tools: assistant)"


async def test_each_model_and_tool_call_is_reported_as_progress(era: str) -> None:
    gateway = calculator_gateway(calculator_agent(times_42()))
    progress = ProgressLog()
    async with Client(serve(gateway), mode=era) as client:
        await client.call_tool("assistant", {"prompt": "6 * 7?"}, progress_callback=progress)
    messages = [re.sub(r" in \d+ ms", "", m) for m in progress.messages]
    assert re.fullmatch(r"agent assistant: started \(run [0-9a-f]{12}\)", messages[0])
    assert messages[1:] == [
        "model scripted: thinking",
        "model scripted: answered, calling calculator",
        "tool calculator: running",
        "tool calculator: done",
        "model scripted: thinking",
        "model scripted: answered",
        "agent assistant: finished",  # the last word: the call is done
    ]
    assert [p for p, _, _ in progress.updates] == [1, 2, 3, 4, 5, 6, 7, 8]


async def test_an_empty_answer_is_an_error_and_the_last_progress_says_the_run_failed(
    era: str,
) -> None:
    gateway = calculator_gateway(calculator_agent(["  "]))
    progress = ProgressLog()
    async with Client(serve(gateway), mode=era) as client:
        result = await client.call_tool("assistant", {"prompt": "?"}, progress_callback=progress)
    assert result.is_error
    [said] = result.content
    assert isinstance(said, types.TextContent)
    assert said.text.startswith("agent 'assistant' failed: the model's final answer was empty. ")
    last = re.sub(r" in \d+ ms", "", progress.messages[-1])
    assert last == "agent assistant: failed: the model's final answer was empty"


async def test_a_called_agents_progress_names_it(era: str) -> None:
    outer = AgentSpec(
        name="outer",
        model=ScriptedModel([call("inner", prompt="6 * 7?"), "Inner says 42."]),
        tools=["inner"],
    )
    inner = calculator_agent(times_42(), name="inner")
    progress = ProgressLog()
    async with Client(serve(calculator_gateway(outer, inner)), mode=era) as client:
        await client.call_tool("outer", {"prompt": "ask inner"}, progress_callback=progress)
    messages = [re.sub(r" in \d+ ms", "", m) for m in progress.messages]
    assert messages[1:] == [
        "model scripted: thinking",
        "model scripted: answered, calling inner",
        "tool inner: running",  # the outer agent's call of the inner one
        "inner: model scripted: thinking",
        "inner: model scripted: answered, calling calculator",
        "inner: tool calculator: running",
        "inner: tool calculator: done",
        "inner: model scripted: thinking",
        "inner: model scripted: answered",
        "tool inner: done",
        "model scripted: thinking",
        "model scripted: answered",
        "agent outer: finished",
    ]


async def test_two_calls_of_one_agent_at_once_read_apart_in_progress(era: str) -> None:
    """Both said `inner: model scripted: thinking`: a client could not tell them apart."""
    arrived: list[str] = []
    both_here = anyio.Event()

    async def meet(who: str) -> str:
        """Waits until both calls of the inner agent are at work."""
        arrived.append(who)
        if len(arrived) == 2:
            both_here.set()
        await both_here.wait()
        return "met"

    asked = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="inner", arguments={"prompt": "first?"}),
            ScriptedCall(name="inner", arguments={"prompt": "second?"}),
        ]
    )
    outer = AgentSpec(name="outer", model=ScriptedModel([asked, "Both answered."]), tools=["inner"])
    meets = [call("meet", who=who) for who in ("a", "b")]
    inner = AgentSpec(name="inner", model=ScriptedModel([*meets, "One.", "Two."]), tools=["meet"])
    gateway = calculator_gateway(outer, inner, nodes=[FunctionToolkit("meet", [meet])])
    progress = ProgressLog()
    async with Client(serve(gateway), mode=era) as client:
        with anyio.fail_after(30):
            await client.call_tool("outer", {"prompt": "ask twice"}, progress_callback=progress)
    messages = [re.sub(r" in \d+ ms", "", m) for m in progress.messages]
    for label in ("inner", "inner#2"):
        said = [m.removeprefix(f"{label}: ") for m in messages if m.startswith(f"{label}: ")]
        assert said == [
            "model scripted: thinking",
            "model scripted: answered, calling meet",
            "tool meet: running",
            "tool meet: done",
            "model scripted: thinking",
            "model scripted: answered",
        ], "\n".join(messages)
    assert messages[-1] == "agent outer: finished"


async def test_a_deeper_agents_progress_names_the_agents_that_led_to_it(era: str) -> None:
    outer = AgentSpec(
        name="outer",
        model=ScriptedModel([call("mid", prompt="ask inner"), "Mid says 42."]),
        tools=["mid"],
    )
    mid = AgentSpec(
        name="mid",
        model=ScriptedModel([call("inner", prompt="6 * 7?"), "Inner says 42."]),
        tools=["inner"],
    )
    inner = calculator_agent(times_42(), name="inner")
    progress = ProgressLog()
    async with Client(serve(calculator_gateway(outer, mid, inner)), mode=era) as client:
        await client.call_tool("outer", {"prompt": "ask mid"}, progress_callback=progress)
    messages = [re.sub(r" in \d+ ms", "", m) for m in progress.messages]
    assert messages[1:] == [
        "model scripted: thinking",
        "model scripted: answered, calling mid",
        "tool mid: running",
        "mid: model scripted: thinking",
        "mid: model scripted: answered, calling inner",
        "mid: tool inner: running",
        "mid > inner: model scripted: thinking",
        "mid > inner: model scripted: answered, calling calculator",
        "mid > inner: tool calculator: running",
        "mid > inner: tool calculator: done",
        "mid > inner: model scripted: thinking",
        "mid > inner: model scripted: answered",
        "mid: tool inner: done",
        "mid: model scripted: thinking",
        "mid: model scripted: answered",
        "tool mid: done",
        "model scripted: thinking",
        "model scripted: answered",
        "agent outer: finished",
    ]


async def test_run_milestones_arrive_as_log_messages() -> None:
    gateway = calculator_gateway(calculator_agent(times_42() + times_42() + times_42()))
    legacy_log, opted_in, silent = LogLog(), LogLog(), LogLog()
    server = serve(gateway)
    async with Client(server, mode="legacy", logging_callback=legacy_log) as client:
        await client.call_tool("assistant", {"prompt": "6 * 7?"})
        await set_log_level(client, "info")
        await client.call_tool("assistant", {"prompt": "6 * 7?"})
    async with Client(server, logging_callback=opted_in, log_level="debug") as client:
        await client.call_tool("assistant", {"prompt": "6 * 7?"})
    async with Client(server, logging_callback=silent) as client:
        result = await client.call_tool("assistant", {"prompt": "6 * 7?"})
    assert result.is_error  # the script ran out: the call still completes
    # Handshake era: every level until the client sets one, then what it set; 2026-07-28:
    # what the request opted in to, nothing without.
    ends = [i for i, line in enumerate(legacy_log.lines) if ": agent assistant: finished" in line]
    first_run = ends[0] + 1
    unset, at_info = legacy_log.lines[:first_run], legacy_log.lines[first_run:]
    assert unset[0].startswith("info: agent assistant: started (run ")
    assert 'debug: tool calculator: running in={"expression":"6 * 7"}' in unset
    assert at_info[0].startswith("info: agent assistant: started (run ")
    assert any(line.startswith("info: tool calculator: done") for line in at_info)
    assert not any(line.startswith("debug: ") for line in at_info)
    assert 'debug: tool calculator: running in={"expression":"6 * 7"}' in opted_in.lines
    assert all(e.logger == "agent-gateway" for e in opted_in.entries)
    assert silent.entries == []


async def test_cancelling_the_call_cancels_the_tool_under_it(era: str) -> None:
    blocker = Blocker()
    agent = AgentSpec(
        name="assistant", model=ScriptedModel([call("wait_here")]), tools=["wait_here"]
    )
    gateway = Gateway([blocker.node], [agent])
    async with Client(serve(gateway), mode=era) as client:
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                await client.call_tool("assistant", {"prompt": "wait"})

            tg.start_soon(ask)
            with anyio.fail_after(10):
                await blocker.started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            await blocker.cancelled.wait()
        # The connection is still good for the next call.
        assert [t.name for t in (await client.list_tools(cache_mode="refresh")).tools] == [
            "assistant"
        ]


async def test_agent_options_reach_the_run() -> None:
    spec = AgentSpec(
        name="terse",
        model=ScriptedModel(["ok"]),
        options=AgentOptions(system_message="Be terse."),
    )
    server, router = build_server(Gateway([], [spec]), GatewaySettings())
    await router.check()
    async with Client(server) as client:
        await client.call_tool("terse", {"prompt": "hi"})
    assert isinstance(spec.model, ScriptedModel)
    assert spec.model.calls[0][0][0].content == "Be terse."


async def test_served_calls_are_traced_by_the_gateways_hooks() -> None:
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    spec = calculator_agent(times_42())
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec], hooks=[record])
    async with Client(serve(gateway, expose_tools=True)) as client:
        await client.call_tool("assistant", {"prompt": "6 * 7?"})
        await client.call_tool("calculator", {"expression": "1 + 1"})
    finished = [(e.kind, e.name) for e in events if e.phase == "end"]
    assert finished == [
        ("model", "scripted"),
        ("tool", "calculator"),
        ("model", "scripted"),
        ("agent", "assistant"),
        ("run", "assistant"),
        ("tool", "calculator"),  # the proxied call
    ]
    assert events[-1].input == {"expression": "1 + 1"}
    assert events[-1].output == {"response": "2"}


async def test_a_session_id_for_an_agent_without_memory_is_refused(era: str) -> None:
    """Once the run went on and the conversation was kept nowhere, without a word."""
    model = ScriptedModel(["never asked"])
    gateway = Gateway([], [AgentSpec(name="a", model=model)])
    async with Client(serve(gateway), mode=era) as client:
        one = await client.call_tool("a", {"prompt": "I'm Dana", "session_id": "u1"})
        items = [{"prompt": "first"}, {"prompt": "second", "session_id": "u1"}]
        many = await client.call_tool("a", {"items": items})
    refusal = (
        "invalid arguments for agent 'a': session_id: this gateway keeps no conversations "
        "for it (no chat memory); call it without session_id"
    )
    for result in (one, many):
        assert result.is_error
        assert result.content == [types.TextContent(text=refusal)]
    assert model.calls == []


async def test_a_session_id_that_can_name_no_session_is_bad_arguments(era: str) -> None:
    """Not a stopped run "that may work once the cause is gone": no call would cure it."""
    model = ScriptedModel(["never asked"])
    gateway = Gateway(
        [], [AgentSpec(name="a", model=model)], memory=SessionMemory(InProcessStore())
    )
    async with Client(serve(gateway), mode=era) as client:
        empty = await client.call_tool("a", {"prompt": "p", "session_id": ""})
        items = [{"prompt": "first"}, {"prompt": "second", "session_id": "a\nb"}]
        many = await client.call_tool("a", {"items": items})
    assert [(r.is_error, r.content) for r in (empty, many)] == [
        (
            True,
            [
                types.TextContent(
                    text="invalid arguments for agent 'a': session_id '': a session id has 1 "
                    "to 256 characters"
                )
            ],
        ),
        (
            True,
            [
                types.TextContent(
                    text="invalid arguments for agent 'a': session_id 'a\\nb': a session id "
                    "has no control characters"
                )
            ],
        ),
    ]
    assert model.calls == []


async def test_items_are_answered_each_on_its_own(era: str) -> None:
    model = ScriptedModel(["one", "two"])
    options = AgentOptions(batch_size=1)
    spec = AgentSpec(name="batch", model=model, options=options)
    gateway = Gateway([], [spec], memory=SessionMemory(InProcessStore()))
    async with Client(serve(gateway), mode=era) as client:
        items = [{"prompt": "first"}, {"prompt": "second", "session_id": "s2"}]
        result = await client.call_tool("batch", {"items": items})
        both = await client.call_tool("batch", {"prompt": "x", "items": items})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["items"] == [
        {"output": "one", "error": None},
        {"output": "two", "error": None},
    ]
    assert result.content == [
        types.TextContent(text='{"output": "one", "error": null}\n{"output": "two", "error": null}')
    ]
    assert both.content == [
        types.TextContent(
            text="invalid arguments for agent 'batch': give `prompt` or `items`, not both"
        )
    ]
    assert both.is_error


async def test_a_served_agent_answers_with_the_agent_it_handed_off_to(era: str) -> None:
    triage = ScriptedModel([call("billing"), call("billing")])
    billing = ScriptedModel(["42 EUR", "43 EUR"])
    specs = [
        AgentSpec(name="triage", model=triage, handoffs=["billing"]),
        AgentSpec(name="billing", model=billing),
    ]
    async with Client(serve(Gateway([], specs)), mode=era) as client:
        result = await client.call_tool("triage", {"prompt": "my bill?"})
        items = await client.call_tool("triage", {"items": [{"prompt": "and now?"}]})
    assert result.content == [types.TextContent(text="42 EUR")]
    assert result.structured_content is not None
    assert result.structured_content["handoff"] == "billing"
    assert result.structured_content["usage"]["requests"] == 2
    assert items.structured_content is not None
    assert items.structured_content["items"] == [
        {"output": "43 EUR", "error": None, "handoff": "billing"}
    ]
    assert len(triage.calls) == 2  # one a question: no call after the handoff's answer


async def test_a_served_agent_names_the_last_agent_of_a_chain_of_handoffs(era: str) -> None:
    specs = [
        AgentSpec(name="triage", model=ScriptedModel([call("billing")]), handoffs=["billing"]),
        AgentSpec(name="billing", model=ScriptedModel([call("refunds")]), handoffs=["refunds"]),
        AgentSpec(name="refunds", model=ScriptedModel(["Refunded."])),
    ]
    async with Client(serve(Gateway([], specs)), mode=era) as client:
        result = await client.call_tool("triage", {"prompt": "money back"})
    assert result.content == [types.TextContent(text="Refunded.")]
    assert result.structured_content is not None
    assert result.structured_content["handoff"] == "refunds"


async def test_a_handoff_is_said_in_progress_and_the_specialist_reads_the_session(
    era: str,
) -> None:
    triage = ScriptedModel(["Hello Ada.", call("billing")])
    billing = ScriptedModel(["42 EUR"])
    specs = [
        AgentSpec(name="triage", model=triage, handoffs=["billing"]),
        AgentSpec(name="billing", model=billing),
    ]
    gateway = Gateway([], specs, memory=SessionMemory(InProcessStore()))
    progress = ProgressLog()
    async with Client(serve(gateway), mode=era) as client:
        await client.call_tool("triage", {"prompt": "I am Ada", "session_id": "s"})
        result = await client.call_tool(
            "triage", {"prompt": "my bill?", "session_id": "s"}, progress_callback=progress
        )
    assert result.content == [types.TextContent(text="42 EUR")]
    asked = [(m.role, m.content) for m in billing.calls[0][0][1:]]
    assert asked == [("user", "I am Ada"), ("assistant", "Hello Ada."), ("user", "my bill?")]
    messages = [re.sub(r" in \d+ ms", "", m) for m in progress.messages]
    assert messages[-3:] == [
        "tool billing: done",
        "agent triage: handed off to billing",
        "agent triage: finished",
    ]


async def test_a_lone_surrogate_in_a_prompt_is_the_replacement_character(era: str) -> None:
    """JSON's `"\\ud83d"` (half an emoji) failed the call as a crash (`UnicodeEncodeError`,
    logged with a traceback): no run can digest, store or send it."""
    model = ScriptedModel(["one", "two", "three"])
    memory = SessionMemory(InProcessStore())
    gateway = Gateway([], [AgentSpec(name="chat", model=model)], memory=memory)
    async with Client(serve(gateway), mode=era) as client:
        alone = await client.call_tool("chat", {"prompt": "smile \ud83d", "session_id": "s\ud800"})
        items = [{"prompt": "half \udc00"}, {"prompt": "fine"}]
        both = await client.call_tool("chat", {"items": items})
    assert not alone.is_error, alone.content
    assert not both.is_error, both.content
    asked = [m.content for messages, _ in model.calls for m in messages if m.role == "user"]
    assert asked == ["smile \ufffd", "half \ufffd", "fine"]
    assert await memory.store.turns("s\ufffd")
