"""Agents as tools of other agents, resolved in place inside the outer run."""

from __future__ import annotations

import anyio
import pytest
from pydantic import JsonValue

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage, Usage
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.assembly import open_gateway
from gateway.config import parse_config
from toolkits import FunctionToolkit, calculator, function_tool

pytestmark = pytest.mark.anyio


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


class Recorder:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    async def __call__(self, event: TraceEvent) -> None:
        self.events.append(event)

    def starts(self) -> list[TraceEvent]:
        return [e for e in self.events if e.phase == "start"]

    def path_to(self, event: TraceEvent) -> list[str]:
        by_id = {e.id: e for e in self.starts()}
        path: list[str] = []
        current: TraceEvent | None = event
        while current is not None:
            path.append(f"{current.kind}:{current.name}")
            current = by_id.get(current.parent_id or "")
        return path[::-1]


def three_levels() -> tuple[Gateway, list[ScriptedModel]]:
    top = ScriptedModel([call("research", prompt="How much are 17 shirts at 25?"), "425 dollars."])
    middle = ScriptedModel([call("math", prompt="17 * 25"), "They cost 425."])
    bottom = ScriptedModel([call("calculator", expression="17 * 25"), "425"])
    agents = [
        AgentSpec(name="assistant", model=top, tools=["research"]),
        AgentSpec(name="research", model=middle, tools=["math"], description="Researches."),
        AgentSpec(name="math", model=bottom, tools=["calculator"]),
    ]
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], agents)
    return gateway, [top, middle, bottom]


async def test_three_levels_of_agents_answer_and_trace_as_a_tree() -> None:
    gateway, (top, middle, _) = three_levels()
    recorder = Recorder()
    result = await gateway.run("assistant", "shirts?", hooks=[recorder])

    assert result.output == "425 dollars."
    assert [m.content for m in middle.calls[1][0] if isinstance(m, ToolMessage)] == ["425"]
    assert [m.content for m in top.calls[1][0] if isinstance(m, ToolMessage)] == ["They cost 425."]
    calculator_start = next(e for e in recorder.starts() if e.name == "calculator")
    assert recorder.path_to(calculator_start) == [
        "run:assistant", "agent:assistant", "tool:research", "agent:research",
        "tool:math", "agent:math", "tool:calculator",
    ]  # fmt: skip
    outer_agent = [e for e in recorder.events if e.kind == "agent" and e.name == "assistant"]
    assert [e.phase for e in outer_agent] == ["start", "end"]
    assert {e.run_id for e in recorder.events} == {result.run_id}


async def test_usage_of_every_inner_model_call_rolls_up_into_the_outer_run() -> None:
    gateway, _ = three_levels()
    recorder = Recorder()
    result = await gateway.run("assistant", "shirts?", hooks=[recorder])
    model_ends = [e for e in recorder.events if e.kind == "model" and e.phase == "end"]
    assert len(model_ends) == 6
    total = Usage()
    for event in model_ends:
        assert isinstance(event.output, dict)
        usage = event.output["usage"]
        assert isinstance(usage, dict)
        total += Usage.model_validate(usage)
    assert result.usage == total
    assert result.usage.requests == 6


async def test_an_agent_cycle_is_refused_with_a_clear_observation() -> None:
    a = ScriptedModel([call("b", prompt="ask a"), "a gave up"])
    b = ScriptedModel([call("a", prompt="back to a"), "b gave up"])
    gateway = Gateway([], [AgentSpec("a", a, tools=["b"]), AgentSpec("b", b, tools=["a"])])
    result = await gateway.run("a", "loop?")
    assert result.output == "a gave up"
    refused = next(m for m in b.calls[1][0] if isinstance(m, ToolMessage))
    assert refused.content == "Error: agent cycle refused: a -> b -> a"


async def test_the_depth_limit_is_enforced() -> None:
    gateway, (_, middle, bottom) = three_levels()
    gateway.max_depth = 2
    result = await gateway.run("assistant", "shirts?")
    assert result.error is None
    refused = next(m for m in middle.calls[1][0] if isinstance(m, ToolMessage))
    assert refused.content == "Error: agent depth limit (2) reached: assistant -> research -> math"
    assert bottom.calls == []


async def test_cancelling_the_outer_run_cancels_the_inner_tool_call() -> None:
    started, cancelled = anyio.Event(), anyio.Event()

    @function_tool
    async def wait_forever() -> str:
        """Never returns on its own."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        return "unreachable"

    outer = ScriptedModel([call("inner", prompt="wait")])
    inner = ScriptedModel([call("wait_forever")])
    gateway = Gateway(
        [FunctionToolkit("waiter", [wait_forever])],
        [AgentSpec("outer", outer, tools=["inner"]), AgentSpec("inner", inner, tools=["waiter"])],
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gateway.run, "outer", "go")
            await started.wait()
            tg.cancel_scope.cancel()
        await cancelled.wait()
    assert cancelled.is_set()


async def test_a_token_budget_stops_the_whole_tree_cleanly() -> None:
    outer = ScriptedModel([call("inner", prompt="count " * 20), "never reached"])
    inner = ScriptedModel([call("calculator", expression="1 + 1"), "two"])
    agents = [
        AgentSpec("outer", outer, tools=["inner"], token_budget=30),
        AgentSpec("inner", inner, tools=["calculator"]),
    ]
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], agents)
    result = await gateway.run("outer", "go")
    assert result.output is None
    assert result.error is not None
    assert result.error.startswith("Token budget (30) exceeded")
    assert len(inner.calls) == 1  # the inner agent stopped before its second model call
    assert len(outer.calls) == 1
    assert result.usage.total_tokens >= 30
    assert result.items[0].steps is not None
    assert result.items[0].steps[0].observation.startswith("Error: Token budget (30) exceeded")


async def test_a_sub_agent_over_the_budget_makes_none_of_the_calls_it_asked_for() -> None:
    """The inner agent's tool ran after its model call had spent the whole tree's budget."""
    ran: list[str] = []

    @function_tool
    def order(item: str) -> str:
        """Orders an item."""
        ran.append(item)
        return f"ordered {item}"

    outer = ScriptedModel([call("buyer", prompt="buy " * 40), "never reached"])
    inner = ScriptedModel([call("order", item="shirt"), "bought"])
    agents = [
        AgentSpec("outer", outer, tools=["buyer"], token_budget=30),
        AgentSpec("buyer", inner, tools=["shop"]),
    ]
    result = await Gateway([FunctionToolkit("shop", [order])], agents).run("outer", "go")
    assert ran == []
    assert (len(outer.calls), len(inner.calls)) == (1, 1)
    assert (result.error or "").startswith("Token budget (30) exceeded")
    assert result.items[0].steps is not None
    assert result.items[0].steps[0].observation.startswith("Error: Token budget (30) exceeded")


async def test_config_agents_listed_as_tools_become_agent_tools() -> None:
    config = parse_config(
        {
            "tools": {"calculator": {"builtin": "calculator"}},
            "agents": {
                "researcher": {"tools": ["math"]},
                "math": {"tools": ["calculator"], "description": "Does arithmetic."},
            },
        }
    )
    async with open_gateway(config) as gateway:
        tools = await gateway.tools_for(gateway.agents["researcher"])
    assert list(tools) == ["math"]
    assert tools["math"].description == "Does arithmetic."
    assert tools["math"].input_schema["required"] == ["prompt"]


async def test_agents_on_the_client_model_share_the_run_model_at_every_level() -> None:
    from gateway.model_specs import ClientSampling

    client_model = ScriptedModel([call("inner", prompt="2 + 2?"), "4", "inner said 4"])
    own = ScriptedModel(["unused"])
    gateway = Gateway(
        [],
        [
            AgentSpec("outer", ClientSampling("outer"), tools=["inner"]),
            AgentSpec("inner", ClientSampling("inner")),
            AgentSpec("mine", own),
        ],
    )
    result = await gateway.run("outer", "go", model=client_model)
    assert result.output == "inner said 4"
    assert len(client_model.calls) == 3
    assert own.calls == []


async def test_a_resumed_run_keeps_counting_against_its_budget() -> None:
    from gateway import RunState

    def gateway(model: ScriptedModel) -> Gateway:
        spec = AgentSpec("a", model, tools=["calculator"], token_budget=10)
        return Gateway([FunctionToolkit("calculator", [calculator])], [spec])

    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(state)

    first = ScriptedModel([call("calculator", expression="1 + 1")])
    stopped = await gateway(first).run("a", "one two three four five six", checkpoint=keep)
    assert (stopped.error or "").startswith("Token budget (10)")
    resumed_model = ScriptedModel(["should not be asked"])
    state = RunState.model_validate_json(stored[-1].model_dump_json())
    resumed = await gateway(resumed_model).resume(state)
    assert (resumed.error or "").startswith("Token budget (10)")
    assert resumed_model.calls == []


async def test_nested_agents_run_with_a_single_tool_slot() -> None:
    gateway, _ = three_levels()
    single = Gateway(gateway.nodes.values(), gateway.agents.values(), max_concurrency=1)
    with anyio.fail_after(5):  # an agent tool holding the only slot would deadlock here
        result = await single.run("assistant", "shirts?")
    assert result.output == "425 dollars."


async def test_a_run_stopped_inside_a_sub_agent_resumes_it_where_it_was() -> None:
    from gateway import RunState

    class Stop(Exception):
        pass

    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        research = state.children.get("call_1")
        math = research.children.get("call_1") if research else None
        if math is not None and math.response is not None:  # the calculator ran: stop here
            raise Stop

    gateway, _ = three_levels()
    with pytest.raises(Stop):
        await gateway.run("assistant", "shirts?", checkpoint=checkpoint)

    # Another process: fresh models that only know what is left to say.
    state = RunState.model_validate_json(stored[-1])
    top = ScriptedModel(["425 dollars."])
    middle = ScriptedModel(["They cost 425."])
    bottom = ScriptedModel(["425"])
    ran: list[str] = []

    @function_tool(name="calculator")
    def counting_calculator(expression: str) -> str:
        ran.append(expression)
        return "wrong: the calculator already ran"

    fresh = Gateway(
        [FunctionToolkit("calculator", [counting_calculator])],
        [
            AgentSpec(name="assistant", model=top, tools=["research"]),
            AgentSpec(name="research", model=middle, tools=["math"]),
            AgentSpec(name="math", model=bottom, tools=["calculator"]),
        ],
    )
    result = await fresh.resume(state)
    assert result.output == "425 dollars."
    assert ran == []
    assert (len(top.calls), len(middle.calls), len(bottom.calls)) == (1, 1, 1)
    assert [m.content for m in bottom.calls[0][0] if isinstance(m, ToolMessage)] == ["425"]
    assert [m.content for m in top.calls[0][0] if isinstance(m, ToolMessage)] == ["They cost 425."]


async def test_an_inner_agent_whose_model_fails_is_a_failed_tool() -> None:
    outer = ScriptedModel([call("inner", prompt="go"), "the inner agent failed"])
    inner = ScriptedModel([])  # fails at its first call
    gateway = Gateway([], [AgentSpec("outer", outer, tools=["inner"]), AgentSpec("inner", inner)])
    result = await gateway.run("outer", "go")
    assert result.output == "the inner agent failed"
    observed = next(m for m in outer.calls[1][0] if isinstance(m, ToolMessage))
    assert observed.content == "Error: scripted has 0 answers and was asked for answer 1"
