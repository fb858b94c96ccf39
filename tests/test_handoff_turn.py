"""A handoff carries the first agent's work of this turn: the specialist's model is sent the
lead's calls made before the handing answer, each with its result, in the handed message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from agent import (
    AgentOptions,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    ToolMessage,
    UserMessage,
)
from agent.memory import InProcessStore
from gateway import AgentSpec, Gateway, RunState
from gateway.handed_item import TURN_MAX_CHARS
from tests.durable.cli_runs import cli
from tests.servers.openai_stub import Answer, Refusal, openai_stub
from toolkits import FunctionToolkit, calculator, function_tool

pytestmark = pytest.mark.anyio

QUESTION = "Why was I charged twice in March?"
ANSWER = "The second charge was a pre-authorisation; it is released within 3 days."
HEADER = (
    "Tool calls the agent 'triage' made for this message before handing it over, oldest "
    "first, one JSON object a line (tool, arguments, result):"
)
CHARGE: JsonValue = {"day": "03-02", "eur": 42}
ACCOUNT: JsonValue = {"email": "ana@example.com", "plan": "Pro", "charges": [CHARGE, CHARGE]}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def calls(*pairs: tuple[str, dict[str, JsonValue]]) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=n, arguments=a) for n, a in pairs])


def line(tool: str, arguments: dict[str, Any], result: JsonValue) -> str:
    said = {"tool": tool, "arguments": arguments, "result": result}
    return json.dumps(said, separators=(",", ":"), ensure_ascii=False)


@function_tool
def lookup_account(email: str) -> dict[str, Any]:
    """The customer's account."""
    return {"email": email, "plan": "Pro", "charges": [CHARGE, CHARGE]}


@function_tool
def page(n: int, size: int) -> str:
    """Page `n` of a long document."""
    return f"page {n}: " + "x" * size


@function_tool
def nested(depth: int) -> str:
    """Text that looks like JSON nested `depth` levels deep."""
    return "[" * depth + "]" * depth


@function_tool
def screenshot() -> bytes:
    """The customer's screen."""
    return PNG


TOOLKITS = [
    FunctionToolkit("crm", [lookup_account, page, nested, screenshot]),
    FunctionToolkit("calculator", [calculator]),
]


def support(lead: ScriptedModel, billing: ScriptedModel, **lead_options: Any) -> Gateway:
    specs = [
        AgentSpec(
            "triage", lead, tools=["crm", "calculator"], handoffs=["billing"], **lead_options
        ),
        AgentSpec("billing", billing, tools=["calculator"]),
    ]
    return Gateway(TOOLKITS, specs)


def asked(model: ScriptedModel, call: int = 0) -> str:
    """The one user message of the model's `call`th request."""
    [message] = [m for m in model.calls[call][0] if isinstance(m, UserMessage)]
    return message.content


async def test_the_specialist_reads_the_leads_calls_and_results_of_this_turn() -> None:
    lead = ScriptedModel(
        [
            call("lookup_account", email="ana@example.com"),
            call("calculator", expression="42 * 2"),
            call("billing", context="Two charges of 42 EUR."),
        ]
    )
    billing = ScriptedModel([ANSWER])
    result = await support(lead, billing).run("triage", QUESTION)
    assert (result.output, result.items[0].handoff) == (ANSWER, "billing")

    assert asked(billing) == "\n".join(
        [
            f"{QUESTION}\n\n(Context from the agent 'triage', which handed this over: "
            "Two charges of 42 EUR.)\n",
            HEADER,
            line("lookup_account", {"email": "ana@example.com"}, ACCOUNT),
            line("calculator", {"expression": "42 * 2"}, "84"),
        ]
    )
    # As text in the message: no call of a tool the specialist lacks, no result of one.
    sent = billing.calls[0][0]
    assert [m.role for m in sent] == ["system", "user"]
    assert [tool.name for tool in billing.calls[0][1]] == ["calculator"]


@pytest.mark.parametrize("history", [True, False])
async def test_the_leads_model_is_told_what_goes_along_with_a_handoff(history: bool) -> None:
    """So that it does not spend tokens copying its calls' results into `context` (they go
    along), nor leave out what the specialist will not get otherwise (they do not)."""
    lead = ScriptedModel([call("billing")])
    await support(lead, ScriptedModel([ANSWER]), handoff_history=history).run("triage", QUESTION)
    offered = {tool.name: tool for tool in lead.calls[0][1]}["billing"]
    context: Any = offered.input_schema["properties"]
    said = f"{offered.description} {context['context']['description']}"
    goes_along = "your tool calls of this turn with their results"
    assert (goes_along in said) is history
    assert ("alone" in offered.description) is not history


async def test_with_handoff_history_off_the_specialist_reads_the_message_alone() -> None:
    lead = ScriptedModel(
        [call("lookup_account", email="ana@example.com"), call("billing", context="Pro.")]
    )
    billing = ScriptedModel([ANSWER])
    await support(lead, billing, handoff_history=False).run("triage", QUESTION)
    assert asked(billing) == (
        f"{QUESTION}\n\n(Context from the agent 'triage', which handed this over: Pro.)"
    )


async def test_the_handing_answers_own_calls_run_beside_it_and_are_not_handed_over() -> None:
    """The calls of the answers before the handing one, a failed one as the lead's model read
    it; not the handing answer's others (a calculator's, a second handoff it refuses): they
    run or are answered beside the handoff, their results not there when it is made."""
    lead = ScriptedModel(
        [
            call("lookup_account", email="ana@example.com"),
            call("calculator", expression="1 / 0"),
            calls(("calculator", {"expression": "2 * 3"}), ("billing", {}), ("billing", {})),
        ]
    )
    billing = ScriptedModel([ANSWER])
    result = await support(lead, billing, options=AgentOptions(return_intermediate_steps=True)).run(
        "triage", QUESTION
    )
    assert result.output == ANSWER
    failed = next(s.observation for s in result.items[0].steps or [] if s.tool == "calculator")
    assert failed.startswith("Error: ")
    assert asked(billing) == "\n".join(
        [
            f"{QUESTION}\n",
            HEADER,
            line("lookup_account", {"email": "ana@example.com"}, ACCOUNT),
            line("calculator", {"expression": "1 / 0"}, failed),
        ]
    )
    steps = [(s.tool, s.tool_input) for s in result.items[0].steps or []]
    assert ("calculator", {"expression": "2 * 3"}) in steps  # it ran, beside the handoff


async def test_a_media_result_is_described_not_sent() -> None:
    lead = ScriptedModel([call("screenshot"), call("billing")])
    billing = ScriptedModel([ANSWER])
    await support(lead, billing).run("triage", QUESTION)
    assert asked(billing).endswith(
        "\n" + line("screenshot", {}, f"[image: image/png, {len(PNG)} bytes]")
    )
    assert not [m for m in billing.calls[0][0] if isinstance(m, ToolMessage)]
    assert "iVBOR" not in asked(billing)  # no base64 of the bytes


async def test_huge_results_keep_the_newest_calls_within_the_limit() -> None:
    size = TURN_MAX_CHARS // 3
    lead = ScriptedModel(
        [
            *(call("page", n=n, size=size) for n in (1, 2, 3, 4)),
            call("billing"),
        ]
    )
    billing = ScriptedModel([ANSWER])
    await support(lead, billing).run("triage", QUESTION)
    question, block = asked(billing).split("\n\n", 1)
    assert question == QUESTION
    header, note, *lines = block.split("\n")
    assert header == HEADER
    assert note == f"(2 older calls left out: the list holds at most {TURN_MAX_CHARS} characters)"
    expected = [line("page", {"n": n, "size": size}, f"page {n}: " + "x" * size) for n in (3, 4)]
    assert lines == expected
    assert len("\n".join(lines)) <= TURN_MAX_CHARS


async def test_a_result_nested_past_what_python_reads_goes_as_its_text() -> None:
    lead = ScriptedModel([call("nested", depth=5000), call("billing")])
    billing = ScriptedModel([ANSWER])
    result = await support(lead, billing).run("triage", QUESTION)
    assert result.output == ANSWER
    assert asked(billing).endswith(line("nested", {"depth": 5000}, "[" * 5000 + "]" * 5000))


async def test_a_newest_result_longer_than_the_limit_alone_is_cut() -> None:
    size = TURN_MAX_CHARS * 2
    lead = ScriptedModel(
        [call("calculator", expression="1 + 1"), call("page", n=1, size=size), call("billing")]
    )
    billing = ScriptedModel([ANSWER])
    await support(lead, billing).run("triage", QUESTION)
    _, block = asked(billing).split("\n\n", 1)
    header, note, only = block.split("\n")
    assert (header, note) == (
        HEADER,
        f"(1 older call left out: the list holds at most {TURN_MAX_CHARS} characters)",
    )
    assert TURN_MAX_CHARS - 50 <= len(only) <= TURN_MAX_CHARS
    read = json.loads(only)
    assert (read["tool"], read["arguments"]) == ("page", {"n": 1, "size": size})
    kept, _, said = read["result"].partition(" [... ")
    assert kept == ("page 1: " + "x" * size)[: len(kept)]
    assert said == f"{len('page 1: ') + size - len(kept)} more characters cut]"


async def test_a_run_resumed_inside_the_specialist_keeps_the_calls_it_was_handed() -> None:
    class Stop(Exception):
        pass

    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        billing = state.children.get("call_2")
        if billing is not None and billing.response is not None:  # its calculator ran
            raise Stop

    memory = SessionMemory(InProcessStore())
    lead = ScriptedModel([call("lookup_account", email="ana@example.com"), call("billing")])
    billing = ScriptedModel([call("calculator", expression="2 * 21"), "unused"])
    gateway = support(lead, billing)
    gateway.memory = memory
    with pytest.raises(Stop):
        await gateway.run("triage", QUESTION, session_id="s1", checkpoint=checkpoint)
    handed = asked(billing)
    assert "lookup_account" in handed

    # Resumed by another gateway, whose lead is not asked again: the item is the stored one.
    fresh_lead, fresh_billing = ScriptedModel([]), ScriptedModel(["It is 42."])
    fresh = support(fresh_lead, fresh_billing)
    fresh.memory = memory
    state = RunState.model_validate_json(stored[-1])
    assert state.children["call_2"].items[0].prompt == handed
    result = await fresh.resume(state)
    assert (result.output, result.items[0].handoff) == ("It is 42.", "billing")
    assert fresh_lead.calls == []
    assert asked(fresh_billing) == handed
    assert [m.content for m in fresh_billing.calls[0][0] if isinstance(m, ToolMessage)] == ["42"]
    # The session keeps the turn as the lead's, the handed calls no part of it.
    history = (await memory.load("s1")).messages
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[0].content == QUESTION


@pytest.mark.integration
def test_a_stored_run_stopped_inside_the_specialist_resumes_with_the_calls_in_another_process(
    tmp_path: Path,
) -> None:
    """Over HTTP to an OpenAI-compatible server, run and resume each a process of its own: the
    specialist's request holds the lead's call and result as text, before and after."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.triage]\ntools = ["calculator"]\nhandoffs = ["billing"]\n'
        '[agents.billing]\ntools = ["calculator"]\n'
    )
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    answers: list[Answer] = [
        {"name": "calculator", "arguments": {"expression": "6 * 7"}},  # the lead's
        {"name": "billing", "arguments": {}},
        {"name": "calculator", "arguments": {"expression": "2 + 2"}},  # the specialist's
        Refusal(401, "Incorrect API key provided"),  # the run stops inside the specialist
        "It is 42.",
    ]
    with openai_stub(answers) as model:
        run = cli(
            "run", QUESTION, "--config", str(config), "--agent", "triage",
            "--model", model.spec, "--store", store, "--json",
        )  # fmt: skip
        assert run.returncode == 1, run.stderr
        stopped = json.loads(run.stdout)
        assert (stopped["status"], stopped["stopped_in"]) == ("stopped", ["triage", "billing"])
        resumed = cli("resume", stopped["run_id"], "--store", store)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout == "It is 42.\n"

    handed = "\n".join([f"{QUESTION}\n", HEADER, line("calculator", {"expression": "6 * 7"}, "42")])
    for request in (2, 3, 4):  # the specialist's three requests, the resumed one last
        sent = model.messages(request)
        assert [m["content"] for m in sent if m["role"] == "user"] == [handed]
        assert not any("6 * 7" in json.dumps(m.get("tool_calls")) for m in sent)
    assert [m["content"] for m in model.messages(4) if m["role"] == "tool"] == ["4"]
