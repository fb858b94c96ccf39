"""Agents as tools of other agents, resolved in place inside the outer run."""

from __future__ import annotations

import anyio
import pytest
from pydantic import JsonValue

from agent import (
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    ScriptExhausted,
    ToolMessage,
    Usage,
)
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


@pytest.mark.parametrize("arguments", [{"prompt": ""}, {"prompt": "  \n"}, {}])
async def test_a_sub_agent_called_without_a_prompt_is_not_run_and_the_model_is_told(
    arguments: dict[str, JsonValue],
) -> None:
    outer = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="inner", arguments=arguments)]), "done"]
    )
    inner = ScriptedModel(["never asked"])
    gateway = Gateway([], [AgentSpec("outer", outer, tools=["inner"]), AgentSpec("inner", inner)])
    result = await gateway.run("outer", "go")
    assert result.output == "done"
    told = [m.content for m in outer.calls[1][0] if isinstance(m, ToolMessage)]
    assert told == ["Error: `prompt` must be a non-empty string"]
    assert inner.calls == []


async def test_the_depth_limit_is_enforced() -> None:
    gateway, (_, middle, bottom) = three_levels()
    gateway.max_depth = 2
    result = await gateway.run("assistant", "shirts?")
    assert result.error is None
    refused = next(m for m in middle.calls[1][0] if isinstance(m, ToolMessage))
    assert refused.content == (
        "Error: agent depth limit (2, max_depth) reached: assistant -> research -> math would "
        "be 3 agents deep"
    )
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


async def test_a_sub_agent_whose_model_fails_stops_the_run_and_its_calls_are_counted() -> None:
    from gateway import RunState
    from gateway.run_state import spent

    outer = ScriptedModel([call("inner", prompt="go"), "never asked"])
    inner = ScriptedModel(
        [call("calculator", expression="1 + 1"), call("calculator", expression="2 + 2")]
    )
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [
            AgentSpec("outer", outer, tools=["inner"]),
            AgentSpec("inner", inner, tools=["calculator"]),
        ],
    )
    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(state)

    recorder = Recorder()
    with pytest.raises(ScriptExhausted) as stopped:
        await gateway.run("outer", "go", hooks=[recorder], checkpoint=keep)
    # As a top-level run stops: not a failed tool the outer model reads, but the run's failure.
    assert len(outer.calls) == 1
    assert stopped.value.__notes__ == ["stopped in the sub-agent 'inner' (outer -> inner)"]
    billed = Usage()
    for event in recorder.events:
        if event.kind == "model" and event.phase == "end" and isinstance(event.output, dict):
            billed += Usage.model_validate(event.output["usage"])
    assert billed.requests == 3  # the outer's call and the inner's two
    assert spent(stored[-1]) == billed  # what the stored run says it cost (`run --json`)
    assert stored[-1].children["call_1"].request is not None  # where it resumes


async def test_a_resumed_run_budgets_the_calls_of_the_sub_agent_it_stopped_in() -> None:
    from gateway import RunState
    from gateway.run_state import spent

    class Stop(Exception):
        pass

    stored: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state)
        research = state.children.get("call_1")
        math = research.children.get("call_1") if research else None
        if math is not None and math.response is not None:  # the calculator ran: stop here
            raise Stop

    gateway, _ = three_levels()
    with pytest.raises(Stop):
        await gateway.run("assistant", "shirts?", checkpoint=checkpoint)
    state = stored[-1]
    assert state.request is not None
    own = state.request.metadata.usage.total_tokens  # the outer agent's own call
    assert spent(state).total_tokens > own  # and the sub-agents' two calls

    top, middle, bottom = (ScriptedModel([f"{name} again"]) for name in ("top", "mid", "bottom"))
    spent_up = Gateway(
        gateway.nodes.values(),
        [
            AgentSpec("assistant", top, tools=["research"], token_budget=spent(state).total_tokens),
            AgentSpec("research", middle, tools=["math"]),
            AgentSpec("math", bottom, tools=["calculator"]),
        ],
    )
    result = await spent_up.resume(state)
    assert (result.error or "").startswith("Token budget (")
    assert (len(top.calls), len(middle.calls), len(bottom.calls)) == (0, 0, 0)
    assert result.usage == spent(state)


async def test_a_sub_agent_on_a_provider_that_is_down_stops_the_run_which_resumes_inside_it() -> (
    None
):
    from agent.models import OpenAICompatibleModel
    from gateway import RunState
    from tests.models.support import FakeProvider, Sleeps, json_response, retry_policy

    def completion(message: dict[str, JsonValue], finish: str) -> dict[str, JsonValue]:
        return {
            "id": "chatcmpl-BkDU2",
            "object": "chat.completion",
            "created": 1750000000,
            "model": "qwen3",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
        }

    def calls(*expressions: str) -> dict[str, JsonValue]:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{n}",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": f'{{"expression": "{e}"}}'},
                }
                for n, e in enumerate(expressions)
            ],
        }

    overloaded = {"error": {"message": "overloaded", "type": "server_error", "code": None}}
    down = FakeProvider(
        json_response(200, completion(calls("1 + 1", "2 * 3"), "tool_calls")),
        *(json_response(500, overloaded) for _ in range(4)),  # every attempt of the next call
    )
    ran: list[str] = []

    @function_tool(name="calculator")
    def counting_calculator(expression: str) -> str:
        ran.append(expression)
        return str(eval(expression))  # the two expressions above

    def gateway(outer: ScriptedModel, provider: FakeProvider) -> Gateway:
        model = OpenAICompatibleModel(
            "http://models.internal/v1",
            "qwen3",
            http_client=provider.client(),
            retry=retry_policy(Sleeps()),
        )
        return Gateway(
            [FunctionToolkit("calculator", [counting_calculator])],
            [
                AgentSpec("outer", outer, tools=["inner"]),
                # A window of its own: the provider is not asked for it (GET /models).
                AgentSpec("inner", model, tools=["calculator"], context_window=100_000),
            ],
        )

    stored: list[str] = []

    async def keep(state: RunState) -> None:
        stored.append(state.model_dump_json())

    from agent import ModelHTTPError

    outer = ScriptedModel([call("inner", prompt="1 + 1 and 2 * 3?"), "never asked"])
    with pytest.raises(ModelHTTPError, match="HTTP 500"):
        await gateway(outer, down).run("outer", "go", checkpoint=keep)
    assert len(outer.calls) == 1  # the outer model read no error: the run stopped
    assert sorted(ran) == ["1 + 1", "2 * 3"]

    healthy = FakeProvider(
        json_response(200, completion({"role": "assistant", "content": "2 and 6"}, "stop"))
    )
    resumed_outer = ScriptedModel(["The inner agent says 2 and 6."])
    state = RunState.model_validate_json(stored[-1])
    result = await gateway(resumed_outer, healthy).resume(state)
    assert result.output == "The inner agent says 2 and 6."
    assert sorted(ran) == ["1 + 1", "2 * 3"]  # each tool ran exactly once
    sent = healthy.body()["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["2", "6"]
    told = [m.content for m in resumed_outer.calls[0][0] if isinstance(m, ToolMessage)]
    assert told == ["2 and 6"]
    assert result.usage.requests == 4  # both runs: the outer's two calls, the inner's two answered


async def test_the_other_calls_of_the_step_end_before_a_failed_sub_agent_stops_the_run() -> None:
    from collections.abc import Sequence

    from agent import AssistantMessage, ChatMessage, ModelConnectionError, ToolDefinition

    failed = anyio.Event()
    finished: list[str] = []

    class Unreachable:
        name = "unreachable"

        async def invoke(
            self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], **_: object
        ) -> AssistantMessage:
            failed.set()
            raise ModelConnectionError("unreachable: connection refused")

    @function_tool
    async def slow() -> str:
        """Ends after the sub-agent failed."""
        await failed.wait()
        await anyio.lowlevel.checkpoint()
        finished.append("slow")
        return "done"

    outer = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[
                    ScriptedCall(name="inner", arguments={"prompt": "go"}),
                    ScriptedCall(name="slow"),
                ]
            )
        ]
    )
    gateway = Gateway(
        [FunctionToolkit("slow", [slow])],
        [AgentSpec("outer", outer, tools=["inner", "slow"]), AgentSpec("inner", Unreachable())],
    )
    with anyio.fail_after(5), pytest.raises(ModelConnectionError):
        await gateway.run("outer", "go")
    assert finished == ["slow"]  # not cancelled: its result is recorded, a resumed run has it


def budgeted(outer: int | None, middle: int | None) -> tuple[Gateway, list[ScriptedModel]]:
    """`three_levels` with token budgets on the outer and the middle agent."""
    gateway, models = three_levels()
    specs = [
        AgentSpec(s.name, s.model, tools=s.tools, token_budget=budget)
        for s, budget in zip(gateway.agents.values(), (outer, middle, None), strict=True)
    ]
    return Gateway(gateway.nodes.values(), specs), models


async def test_a_sub_agents_own_token_budget_caps_its_subtree() -> None:
    gateway, (top, middle, bottom) = budgeted(None, 20)
    result = await gateway.run("assistant", "shirts?")
    assert result.output == "425 dollars."  # the outer agent went on with what it was told
    # The middle agent's first call (13 tokens) and the bottom one's (9) spent its 20: the
    # bottom agent stopped before its second call, the middle one too.
    assert (len(middle.calls), len(bottom.calls)) == (1, 1)
    told = next(m for m in top.calls[1][0] if isinstance(m, ToolMessage))
    assert told.content == (
        "Error: Token budget (20) of agent 'research' exceeded: it used 22 tokens and was stopped."
    )

    gateway, (top, middle, bottom) = budgeted(1000, 20)  # the outer budget is not reached
    assert (await gateway.run("assistant", "shirts?")).output == "425 dollars."

    gateway, (top, middle, bottom) = budgeted(12, 1000)  # the outer budget still caps it all
    result = await gateway.run("assistant", "shirts?")
    assert result.error == "Token budget (12) exceeded: the run used 20 tokens and was stopped."
    assert (len(top.calls), len(middle.calls), len(bottom.calls)) == (1, 1, 0)


async def test_a_sub_agents_empty_answer_is_an_error_the_outer_model_reads() -> None:
    outer = ScriptedModel([call("inner", prompt="go"), "the inner agent said nothing"])
    inner = ScriptedModel(["  "])
    gateway = Gateway([], [AgentSpec("outer", outer, tools=["inner"]), AgentSpec("inner", inner)])
    result = await gateway.run("outer", "go")
    assert result.output == "the inner agent said nothing"
    told = next(m for m in outer.calls[1][0] if isinstance(m, ToolMessage))
    assert told.content == (
        "Error: agent 'inner' gave an empty answer (the model's final answer was empty)"
    )
