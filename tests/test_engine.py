"""The gateway engine driving the agent over real local tool nodes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult
from pydantic import JsonValue

from agent import (
    ROUTING_KEY,
    ActionResponse,
    AgentItem,
    AgentOptions,
    AssistantMessage,
    ChatMessage,
    EngineRequest,
    EngineResponse,
    ModelError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    ToolCall,
    ToolMessage,
    ToolsAgent,
)
from gateway import (
    AgentSpec,
    ConfigError,
    Gateway,
    RunCancelled,
    RunPaused,
    RunState,
    TraceEvent,
    tool_definition,
)
from tests.servers.inprocess import Context, ToyServer
from toolkits import (
    CallContext,
    FunctionToolkit,
    NodeStopped,
    ServerUnavailable,
    Tool,
    calculator,
    function_tool,
    result_data,
)
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

QUESTION = "A shirt costs 25 dollars. How much do 17 shirts cost?"


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def calculator_gateway(model: ScriptedModel, max_iterations: int = 10) -> Gateway:
    options = AgentOptions(max_iterations=max_iterations)
    spec = AgentSpec(name="assistant", model=model, tools=["calculator"], options=options)
    return Gateway([FunctionToolkit("calculator", [calculator])], [spec])


class Recorder:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    async def __call__(self, event: TraceEvent) -> None:
        self.events.append(event)

    def timeline(self) -> list[str]:
        marks = {"start": "▶", "end": "✓", "error": "✗"}
        return [
            f"{e.name if e.kind == 'tool' else e.kind} {marks[e.phase]}"
            for e in self.events
            if e.phase in marks
        ]


async def test_engine_runs_the_tool_node_and_resumes_the_agent_with_its_result() -> None:
    model = ScriptedModel([call("calculator", expression="17 * 25"), "17 shirts cost 425 dollars."])
    recorder = Recorder()
    result = await calculator_gateway(model).run("assistant", QUESTION, hooks=[recorder])

    assert result.output == "17 shirts cost 425 dollars."
    assert recorder.timeline() == [
        "run ▶", "agent ▶", "model ▶", "model ✓", "calculator ▶", "calculator ✓",
        "model ▶", "model ✓", "agent ✓", "run ✓",
    ]  # fmt: skip
    tool_end = recorder.events[5]
    assert tool_end.input == {"expression": "17 * 25"}
    assert tool_end.output == {"response": "425"}
    observed = [m for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert [m.content for m in observed] == ["425"]
    assert result.usage.requests == 2


async def test_several_tools_requested_in_one_step_run_concurrently() -> None:
    started = 0
    all_started = anyio.Event()

    @function_tool
    async def rendezvous(n: int) -> int:
        """Returns once all five calls are in flight."""
        nonlocal started
        started += 1
        if started == 5:
            all_started.set()
        await all_started.wait()
        return n

    five = ScriptedAnswer(
        tool_calls=[ScriptedCall(name="rendezvous", arguments={"n": n}) for n in range(5)]
    )
    model = ScriptedModel([five, "all five returned"])
    spec = AgentSpec(name="a", model=model, tools=["meet"])
    gateway = Gateway([FunctionToolkit("meet", [rendezvous])], [spec], max_concurrency=5)
    with anyio.fail_after(5):
        result = await gateway.run("a", "go")
    assert result.output == "all five returned"
    observed = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed == ["0", "1", "2", "3", "4"]


async def test_a_tool_error_goes_back_to_the_model_instead_of_failing_the_run() -> None:
    model = ScriptedModel([call("calculator", expression="1 / 0"), "cannot divide by zero"])
    recorder = Recorder()
    result = await calculator_gateway(model).run("assistant", "1/0?", hooks=[recorder])
    assert result.output == "cannot divide by zero"
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert observed.content == "Error: CalculatorError: division by zero"
    assert "calculator ✗" in recorder.timeline()


async def test_a_tool_that_raises_becomes_an_error_observation() -> None:
    @function_tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    model = ScriptedModel([call("explode"), "it failed"])
    spec = AgentSpec(name="a", model=model, tools=["x"])
    result = await Gateway([FunctionToolkit("x", [explode])], [spec]).run("a", "go")
    assert result.output == "it failed"
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert observed.content == "Error: RuntimeError: disk on fire"


class BrokenNode:
    """A node whose calls raise `error`: one of the node errors we define, or a bug."""

    name = "broken"

    def __init__(self, error: Exception) -> None:
        self._error = error
        self.calls = 0

    async def list_tools(self) -> Sequence[Tool]:
        return [Tool("probe", "Probes.", {"type": "object"}, self.name, is_from_toolkit=False)]

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, context: CallContext | None = None
    ) -> CallToolResult:
        self.calls += 1
        raise self._error


async def test_a_node_that_cannot_serve_the_call_is_an_observation_for_the_model() -> None:
    model = ScriptedModel([call("probe"), "the server is down"])
    spec = AgentSpec(name="a", model=model, tools=["broken"])
    down = ServerUnavailable("MCP server 'broken' is not connected", node="broken")
    result = await Gateway([BrokenNode(down)], [spec]).run("a", "go")
    assert result.output == "the server is down"
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert observed.content == "Error: MCP server 'broken' is not connected"


async def test_a_bug_in_a_node_fails_its_call_alone_logged_and_not_called_again_on_resume(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once it stopped the run: every resume called the node again (a side effect each time),
    and no run of it could end."""
    both = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="probe"),
            ScriptedCall(name="calculator", arguments={"expression": "6 * 7"}),
        ]
    )
    script = [both, "the probe is broken"]
    broken = BrokenNode(KeyError("oops"))
    spec = AgentSpec(name="a", model=ScriptedModel(script), tools=["broken", "calculator"])
    nodes = [broken, FunctionToolkit("calculator", [calculator])]
    stored: list[RunState] = []

    class Stop(Exception):
        pass

    async def stop_after_the_calls(state: RunState) -> None:
        stored.append(state)
        if state.response is not None:
            raise Stop  # this process stops here

    with pytest.raises(Stop):
        await Gateway(nodes, [spec]).run("a", "go", checkpoint=stop_after_the_calls)
    [logged] = [r for r in caplog.records if r.name == "gateway.step_loop"]
    assert logged.getMessage() == "node 'broken' failed calling 'probe'"
    assert logged.exc_info is not None  # the traceback, for whoever fixes the node

    model = ScriptedModel(script[1:])
    spec = AgentSpec(name="a", model=model, tools=["broken", "calculator"])
    resumed = await Gateway(nodes, [spec]).resume(stored[-1])
    assert resumed.output == "the probe is broken"
    told = [m.content for m in model.calls[0][0] if isinstance(m, ToolMessage)]
    assert told == ["Error: node 'broken' failed: KeyError: 'oops'", "42"]
    assert broken.calls == 1


@pytest.mark.parametrize(
    "stop",
    [
        RunCancelled("run 'r1' was cancelled"),
        ModelError("cannot use the client's model: it is gone"),
        ExceptionGroup("both", [KeyError("oops"), RunPaused("waits", reason="sampling")]),
    ],
)
async def test_what_stops_a_run_out_of_a_node_still_stops_it(stop: Exception) -> None:
    model = ScriptedModel([call("probe"), "never reached"])
    spec = AgentSpec(name="a", model=model, tools=["broken"])
    with pytest.raises(type(stop)):
        await Gateway([BrokenNode(stop)], [spec]).run("a", "go")
    assert len(model.calls) == 1


class OddSchemaNode(BrokenNode):
    """A node whose one tool takes a string, or an object: no model can be told the string."""

    name = "odd"
    schema: Mapping[str, Any] = {
        "oneOf": [{"type": "object", "properties": {"q": {}}}, {"type": "string"}]
    }
    tools = (Tool("lookup", "Looks up.", schema, "odd", is_from_toolkit=False),)

    async def list_tools(self) -> Sequence[Tool]:
        return self.tools  # listed once, as an MCP server's tools are until they change


async def test_a_schema_no_model_can_be_told_whole_is_named_before_the_model_is_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(["first", "second"])
    gateway = Gateway([OddSchemaNode(KeyError("unused"))], [AgentSpec("a", model, tools=["odd"])])
    await gateway.run("a", "go")
    await gateway.run("a", "again")
    warned = [r.getMessage() for r in caplog.records if r.name == "gateway.tool_definitions"]
    assert warned == [
        "agent 'a': tool 'lookup': its input schema cannot be told to a model whole: the "
        "`oneOf` alternatives that are not objects; the model is offered the tool without it"
    ]  # once: the definition is made once for the tool as listed
    [offered] = model.calls[0][1]
    assert offered.input_schema == OddSchemaNode.schema  # as listed: each provider translates it


async def test_bad_arguments_from_the_model_are_reported_to_it() -> None:
    model = ScriptedModel([call("calculator", expr="1"), "oops"])
    await calculator_gateway(model).run("assistant", "?")
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert observed.content.startswith("Error: invalid arguments for calculator: expression:")


async def test_the_run_stops_after_max_iterations_with_the_partial_steps() -> None:
    model = ScriptedModel([call("calculator", expression=f"{n} + 1") for n in range(10)])
    result = await calculator_gateway(model, max_iterations=3).run("assistant", "loop")
    item = result.items[0]
    assert item.error is not None
    assert item.error.startswith("Max iterations (3) reached")
    assert item.steps is not None
    assert [s.observation for s in item.steps] == ["1", "2", "3"]
    assert len(model.calls) == 3
    assert result.iterations == 3  # the step that found it out of iterations called no model


async def test_an_unknown_tool_name_yields_an_observation_listing_the_real_tools() -> None:
    model = ScriptedModel([call("calc", expression="1"), call("calculator", expression="2"), "2"])
    result = await calculator_gateway(model).run("assistant", "?")
    assert result.output == "2"
    first = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert first.content == "Error: there is no tool named 'calc'. Available tools: calculator."
    assert result.iterations == 3


async def test_the_steps_of_one_answer_are_in_the_order_the_model_made_its_calls() -> None:
    """Also the calls the agent answered itself (an unknown tool), recorded first."""
    both = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="calculator", arguments={"expression": "1 + 1"}),
            ScriptedCall(name="calc", arguments={}),
            ScriptedCall(name="calculator", arguments={"expression": "2 + 2"}),
        ]
    )
    options = AgentOptions(return_intermediate_steps=True)
    spec = AgentSpec("assistant", ScriptedModel([both, "done"]), ["calculator"], options=options)
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    [item] = (await gateway.run("assistant", "go")).items
    assert [(s.tool, s.observation) for s in item.steps or ()] == [
        ("calculator", "2"),
        ("calc", "Error: there is no tool named 'calc'. Available tools: calculator."),
        ("calculator", "4"),
    ]


async def test_an_item_finished_in_the_first_step_is_not_sent_to_the_model_again() -> None:
    model = ScriptedModel(
        ["four", call("calculator", expression="6 * 7"), "forty-two"]  # item 0, item 1, item 1
    )
    items = [AgentItem(prompt="2 + 2?"), AgentItem(prompt="6 * 7?")]
    result = await calculator_gateway(model).run("assistant", items)
    assert [i.output for i in result.items] == ["four", "forty-two"]
    assert len(model.calls) == 3
    assert all(messages[1].content == "6 * 7?" for messages, _ in model.calls[1:])


async def test_no_items_is_a_clear_error_not_a_crash_in_the_step() -> None:
    model = ScriptedModel(["unused"])
    with pytest.raises(ValueError, match="no items to run"):
        await calculator_gateway(model).run("assistant", [])
    with pytest.raises(ValueError, match="a step needs one item or more"):
        await ToolsAgent(model=model, tools=[]).step([])
    assert model.calls == []


async def test_state_round_tripped_through_json_mid_run_resumes_in_a_fresh_gateway() -> None:
    script = [
        call("calculator", expression="17 * 25"),
        call("calculator", expression="425 + 1"),
        "426",
    ]
    whole = await calculator_gateway(ScriptedModel(script)).run("assistant", QUESTION)

    class Stop(Exception):
        pass

    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        if state.response is not None:  # the first tool ran: stop this process here
            raise Stop

    with pytest.raises(Stop):
        await calculator_gateway(ScriptedModel(script)).run(
            "assistant", QUESTION, checkpoint=checkpoint
        )
    state = RunState.model_validate_json(stored[-1])
    fresh_model = ScriptedModel(script[1:])  # the first answer was already consumed
    resumed = await calculator_gateway(fresh_model).resume(state)

    assert resumed.items == whole.items
    assert resumed.output == "426"
    assert resumed.run_id == state.run_id
    assert resumed.usage.requests == 3
    first_observation = next(m for m in fresh_model.calls[0][0] if isinstance(m, ToolMessage))
    assert first_observation.content == "425"


async def test_the_last_checkpoint_is_the_finished_run_and_resuming_it_calls_nothing() -> None:
    """The checkpoint's last state was the one before the final answer, nothing marking the
    run finished: a store built on it showed every finished run unfinished, and resuming it
    asked (and billed) the model again. The finished state holds the result, as JSON too."""
    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())

    script = [call("calculator", expression="17 * 25"), "It is 425."]
    result = await calculator_gateway(ScriptedModel(script)).run(
        "assistant", QUESTION, checkpoint=checkpoint
    )
    unfinished = [RunState.model_validate_json(text) for text in stored[:-1]]
    assert all(state.result is None for state in unfinished)
    assert "result" not in stored[0]  # written only when set: older readers read the others
    last = RunState.model_validate_json(stored[-1])
    assert last.request is None
    assert last.result is not None
    assert last.result.items[0].output == "It is 425."
    fresh = ScriptedModel([])
    resumed = await calculator_gateway(fresh).resume(last)
    assert fresh.calls == []
    assert (resumed.run_id, resumed.output) == (result.run_id, "It is 425.")
    assert (resumed.usage, resumed.iterations) == (result.usage, result.iterations)


async def test_every_call_the_model_made_is_a_tool_span_with_what_the_model_was_told() -> None:
    class GarbledSecondCall(ScriptedModel):
        """Its second answer's call carries arguments that are not JSON, as weak models write."""

        async def invoke(self, messages, tools, *, on_token=None):  # type: ignore[override]
            answer = await super().invoke(messages, tools, on_token=on_token)
            if len(self.calls) != 2:
                return answer
            bad = ToolCall(id="bad", name="calculator", invalid_arguments='{"expression": 1+')
            return answer.model_copy(update={"tool_calls": (bad,)})

    same = call("calculator", expression="6 * 7")
    model = GarbledSecondCall([call("calc", expression="1"), same, same, same, same, "42"])
    recorder = Recorder()
    result = await calculator_gateway(model).run("assistant", "6 * 7?", hooks=[recorder])
    assert result.output == "42"

    told = [m.content for m in model.calls[-1][0] if isinstance(m, ToolMessage)]
    ends = [e for e in recorder.events if e.kind == "tool" and e.phase in ("end", "error")]
    assert [(e.name, e.phase) for e in ends] == [
        ("calc", "error"), ("calculator", "error"), ("calculator", "end"),
        ("calculator", "end"), ("calculator", "end"),
    ]  # fmt: skip
    assert [f"Error: {e.error}" if e.error else e.output for e in ends[:2]] == told[:2]
    assert ends[1].input == '{"expression": 1+'
    assert ends[4].output == told[4]
    assert told[4].startswith("Not run again:")
    calls_made = [c.id for messages, _ in model.calls[1:] for c in _assistant_calls(messages)]
    assert [e.call_id for e in ends] == list(dict.fromkeys(calls_made))


def _assistant_calls(messages: list[ChatMessage]) -> list[ToolCall]:
    return [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


async def test_a_run_whose_mcp_node_stops_under_a_call_stops_too_and_tells_the_model_nothing() -> (
    None
):
    """The call had no outcome (the gateway is going away): it is not an observation."""
    toy = ToyServer()
    started = anyio.Event()

    async def held(_ctx: Context, _args: dict[str, Any]) -> CallToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("never")

    toy.add("held", held)
    node = McpToolkit("toy", McpServerConfig(command="in-process"), target=toy.server)
    model = ScriptedModel([call("toy__held"), "the tool said nothing"])
    gateway = Gateway([node], [AgentSpec("a", model, tools=["toy"])])
    failed: list[BaseException] = []
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            owner = anyio.CancelScope()

            async def own_the_node() -> None:
                with owner:
                    await node.run()

            async def run() -> None:
                try:
                    await gateway.run("a", "go")
                except NodeStopped as exc:
                    failed.append(exc)

            tg.start_soon(own_the_node)
            tg.start_soon(run)
            await started.wait()
            owner.cancel()  # the node's owner stops it, as a gateway that shuts down does
    [error] = failed
    assert "shutting down" in str(error)
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    ("nodes", "agents", "said"),
    [
        (["math", "math"], [], "node 'math': the name is already used by another node"),
        (["search"], ["search"], "agent 'search': the name is already used by a node"),
        ([], ["lead", "lead"], "agent 'lead': the name is already used by another agent"),
    ],
    ids=["two-nodes", "agent-and-node", "two-agents"],
)
def test_a_name_given_to_two_nodes_or_agents_is_refused_as_a_config_would_be(
    nodes: list[str], agents: list[str], said: str
) -> None:
    """Once the last of a name silently took it: a node's tools vanished (its calls "unknown
    tool"), or an agent answered the calls meant for a node of its name."""
    toolkits = [FunctionToolkit(name, [calculator]) for name in nodes]
    specs = [AgentSpec(name, ScriptedModel([]), tools=nodes[:1]) for name in agents]
    with pytest.raises(ConfigError) as caught:
        Gateway(toolkits, specs)
    assert str(caught.value) == said


async def test_a_session_id_beside_items_is_refused_not_dropped() -> None:
    gateway = calculator_gateway(ScriptedModel(["never asked"]))
    with pytest.raises(ValueError, match="items carry their own session_id"):
        await gateway.run("assistant", [AgentItem(prompt=QUESTION)], session_id="s1")


async def test_an_engine_of_ones_own_runs_the_agent_on_toolkit_nodes() -> None:
    """The step by hand, as the README's protocol says: the agent asks, the engine calls."""
    nodes = {"calculator": FunctionToolkit("calculator", [calculator])}
    tools = {t.name: t for node in nodes.values() for t in await node.list_tools()}
    model = ScriptedModel([call("calculator", expression="17 * 25"), "It is 425."])
    agent = ToolsAgent(model=model, tools=[tool_definition(t) for t in tools.values()])
    items = [AgentItem(prompt=QUESTION)]
    step = await agent.step(items)
    while isinstance(step, EngineRequest):
        answers: list[ActionResponse] = []
        for action in step.actions:
            arguments = {k: v for k, v in action.input.items() if k != ROUTING_KEY}
            result = await nodes[action.node].call_tool(action.tool, arguments)
            answers.append(ActionResponse(action=action, data=result_data(result)))
        step = await agent.step(
            items, EngineResponse(action_responses=answers, metadata=step.metadata)
        )
    assert step.items[0].output == "It is 425."
    told = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert told == ["425"]


def recording_gateway(model: ScriptedModel, budget: int, ran: list[str]) -> Gateway:
    """An agent whose one tool notes every call it gets in `ran`."""

    @function_tool
    def order(item: str) -> str:
        """Orders an item (a side effect: it must not happen twice, or unasked)."""
        ran.append(item)
        return f"ordered {item}"

    spec = AgentSpec("a", model, tools=["shop"], token_budget=budget)
    return Gateway([FunctionToolkit("shop", [order])], [spec])


async def test_tools_asked_for_by_the_answer_that_spends_the_budget_do_not_run() -> None:
    """They ran (their side effects too), and only then the run stopped over budget."""
    ran: list[str] = []
    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(RunState.model_validate_json(state.model_dump_json()))

    model = ScriptedModel([call("order", item="shirt"), "never asked"])
    question = " ".join(["word"] * 40)  # the scripted model counts words as tokens
    result = await recording_gateway(model, 10, ran).run("a", question, checkpoint=keep)

    assert ran == []
    used = result.usage.total_tokens  # that one model call's
    assert used > 40
    said = f"Token budget (10) exceeded: the run used {used} tokens and was stopped."
    assert result.error == said
    assert len(model.calls) == 1
    steps = result.items[0].steps
    assert steps is not None
    assert [(s.tool, s.observation) for s in steps] == [("order", f"Error: {said}")]
    # What is stored: the calls still to make, none made.
    last = stored[-1]
    assert last.request is not None
    assert last.response is None
    assert [a.tool for a in last.request.actions] == ["order"]

    # Resumed on the same budget: still nothing runs. On a larger one: each call runs once.
    again = await recording_gateway(ScriptedModel([]), 10, ran).resume(last)
    assert (again.error or "").startswith("Token budget (10) exceeded")
    assert ran == []
    fresh = ScriptedModel(["Ordered."])
    resumed = await recording_gateway(fresh, 1000, ran).resume(last)
    assert resumed.output == "Ordered."
    assert ran == ["shirt"]
    told = [m.content for m in fresh.calls[0][0] if isinstance(m, ToolMessage)]
    assert told == ["ordered shirt"]
