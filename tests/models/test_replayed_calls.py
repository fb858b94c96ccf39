"""A model's calls go back to it as its API takes them: under the ids the agent gave them (it
renames an id the model repeated), with a name and arguments the API accepts, and otherwise
(thinking blocks, signatures) exactly as the model wrote them. The Tools Agent runs on each
real provider against real-format answers; every request it sends is checked against the rules
the real APIs answer 400 to (`wire_rules`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent import (
    ActionResponse,
    AgentItem,
    AgentResult,
    ChatModel,
    EngineRequest,
    EngineResponse,
    ToolDefinition,
    ToolsAgent,
)
from agent.models import AnthropicModel, GeminiModel, OpenAIModel, OpenAIResponsesModel

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .wire_rules import anthropic_problems, gemini_problems, openai_problems, responses_problems

pytestmark = pytest.mark.anyio

CALC = ToolDefinition(
    name="calculator",
    input_schema={"type": "object", "properties": {"expression": {"type": "string"}}},
    source_node="calculator",
)
THINKING = {
    "type": "thinking",
    "thinking": "Two sums: the calculator, twice.",
    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
}
THOUGHT_SIGNATURE = "CiQB0e2Kb2mZ1lWq8Tj3r8hk4uL2f5dYV0eXw=="
REASONING: dict[str, Any] = {
    "id": "rs_68af4030baa48193b0b43b4c2a176a1a",
    "type": "reasoning",
    "encrypted_content": "gAAAAABor0AyJZ7bBqP1x0kT3mVn2Qe8Rr5Yh1Lw6SdA9cF4gU0iO7pK3jH2tZ5x==",
    "summary": [],
}
TEXT_ARGUMENTS = frozenset({"openai", "openai-responses"})
"""The providers whose calls carry their arguments as JSON text."""

Call = tuple[str, str, Any]
"""A call as a test writes it: id ("" for none), name, arguments (as the wire has them)."""


def anthropic_answer(calls: list[Call], text: str = "") -> dict[str, Any]:
    content: list[dict[str, Any]] = [THINKING] if calls else [{"type": "text", "text": text}]
    content += [
        {"type": "tool_use", "id": i, "name": name, "input": args} for i, name, args in calls
    ]
    return {
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 40, "output_tokens": 12},
    }


def gemini_answer(calls: list[Call], text: str = "") -> dict[str, Any]:
    parts: list[dict[str, Any]] = [] if calls else [{"text": text}]
    for n, (i, name, args) in enumerate(calls):
        called: dict[str, Any] = {"name": name, "args": args}
        if i:
            called = {"id": i, **called}
        part: dict[str, Any] = {"functionCall": called}
        if n == 0:
            part["thoughtSignature"] = THOUGHT_SIGNATURE
        parts.append(part)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 12},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1",
    }


def openai_answer(calls: list[Call], text: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
            for i, name, args in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767268800,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }


_ANSWERS = itertools.count()


def responses_answer(calls: list[Call], text: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "text": text}],
        "role": "assistant",
    }
    # Every item of every response has an id of its own.
    answer = next(_ANSWERS)
    output: list[dict[str, Any]] = [{**REASONING, "id": f"rs_{answer}"}] if calls else [message]
    output += [
        {"id": f"fc_{answer}_{n}", "type": "function_call", "status": "completed", "arguments": args,
         "call_id": i, "name": name}
        for n, (i, name, args) in enumerate(calls)
    ]  # fmt: skip
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767268800,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "usage": {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52},
    }


@dataclass(frozen=True)
class Provider:
    name: str
    answer: Callable[..., dict[str, Any]]
    problems: Callable[[dict[str, Any]], list[str]]
    model: Callable[[FakeProvider, Sleeps], ChatModel]


PROVIDERS = [
    Provider(
        "anthropic",
        anthropic_answer,
        anthropic_problems,
        lambda fake, sleeps: AnthropicModel(
            "claude-sonnet-4-5", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
        ),
    ),
    Provider(
        "gemini",
        gemini_answer,
        gemini_problems,
        lambda fake, sleeps: GeminiModel(
            "gemini-2.5-flash", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
        ),
    ),
    Provider(
        "openai",
        openai_answer,
        openai_problems,
        lambda fake, sleeps: OpenAIModel(
            "gpt-4.1-mini", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
        ),
    ),
    Provider(
        "openai-responses",
        responses_answer,
        responses_problems,
        lambda fake, sleeps: OpenAIResponsesModel(
            "gpt-5-mini", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
        ),
    ),
]


def args(provider: Provider, expression: str) -> Any:
    """The arguments `{"expression": ...}` as the provider's wire has them."""
    value = {"expression": expression}
    return f'{{"expression": "{expression}"}}' if provider.name in TEXT_ARGUMENTS else value


async def run_agent(provider: Provider, turns: list[list[Call]], sleeps: Sleeps) -> FakeProvider:
    """The agent asked once, the model answering with `turns` (its calls, each answered
    `ran`) and then with a text; the fake provider that recorded its requests."""
    answers = [provider.answer(calls) for calls in turns] + [provider.answer([], "Done.")]
    fake = FakeProvider(*(json_response(200, answer) for answer in answers))
    agent = ToolsAgent(model=provider.model(fake, sleeps), tools=[CALC])
    outcome = await agent.step([AgentItem(prompt="Add.")])
    while isinstance(outcome, EngineRequest):
        done = [ActionResponse(action=a, data="ran") for a in outcome.actions]
        response = EngineResponse(action_responses=done, metadata=outcome.metadata)
        outcome = await agent.step([AgentItem(prompt="Add.")], response)
    assert isinstance(outcome, AgentResult)
    assert outcome.items[0].output == "Done."
    assert len(fake.requests) == len(answers)
    return fake


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
@pytest.mark.parametrize("when", ["in one answer", "in a later answer"])
async def test_calls_the_model_gave_one_id_go_back_paired_with_their_results(
    provider: Provider, when: str, sleeps: Sleeps
) -> None:
    first: Call = ("dup_1", "calculator", args(provider, "1+1"))
    second: Call = ("dup_1", "calculator", args(provider, "2+2"))
    turns: list[list[Call]] = [[first, second]] if when == "in one answer" else [[first], [second]]
    fake = await run_agent(provider, turns, sleeps)
    for n in range(len(fake.requests)):
        assert provider.problems(fake.body(n)) == [], f"request {n}"
    last = fake.body()
    if provider.name == "anthropic":
        replayed = [m["content"] for m in last["messages"] if m["role"] == "assistant"]
        # Only the repeated id changed: the thinking block and its signature went back as sent.
        assert all(blocks[0] == THINKING for blocks in replayed)
        ids = [b["id"] for blocks in replayed for b in blocks if b["type"] == "tool_use"]
        assert ids[0] == "dup_1"
        assert ids[1] != "dup_1"
    if provider.name == "gemini":
        model_turns = [c["parts"] for c in last["contents"] if c["role"] == "model"]
        assert all(parts[0]["thoughtSignature"] == THOUGHT_SIGNATURE for parts in model_turns)
    if provider.name == "openai-responses":
        items: list[dict[str, Any]] = last["input"]
        # Each answer's reasoning item went back as sent, before its calls.
        firsts = [items[n + 1] for n, item in enumerate(items) if item.get("type") == "reasoning"]
        assert all(
            item == {**REASONING, "id": item["id"]}
            for item in items
            if item.get("type") == "reasoning"
        )
        assert len(firsts) == len(turns)
        assert all(item["type"] == "function_call" for item in firsts)
        ids = [item["call_id"] for item in items if item.get("type") == "function_call"]
        assert ids[0] == "dup_1"
        assert ids[1] != "dup_1"


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_a_call_with_no_name_goes_back_under_a_placeholder_its_result_shares(
    provider: Provider, sleeps: Sleeps
) -> None:
    fake = await run_agent(provider, [[("call_e", "", args(provider, "1"))]], sleeps)
    body = fake.body()
    assert provider.problems(body) == []
    if provider.name == "anthropic":
        sent = [b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use"]
        assert [b["name"] for b in sent] == ["_"]
    if provider.name == "openai":
        calls: list[list[dict[str, Any]]] = [m.get("tool_calls") or [] for m in body["messages"]]
        assert [c["function"]["name"] for turn in calls for c in turn] == ["_"]
    if provider.name == "openai-responses":
        named = [i["name"] for i in body["input"] if i.get("type") == "function_call"]
        assert named == ["_"]
    if provider.name == "gemini":
        parts = [p for c in body["contents"] for p in c["parts"]]
        names = [
            p[k]["name"] for p in parts for k in ("functionCall", "functionResponse") if k in p
        ]
        assert names == ["_", "_"]
    # The model is still told what it called: a tool of no name.
    assert "there is no tool named ''" in fake.requests[-1].content.decode()


async def test_gemini_args_that_are_not_an_object_go_back_as_an_empty_one(sleeps: Sleeps) -> None:
    gemini = PROVIDERS[1]
    fake = await run_agent(gemini, [[("", "calculator", "6*7")]], sleeps)
    body = fake.body()
    assert gemini_problems(body) == []
    model_turn = next(c for c in body["contents"] if c["role"] == "model")
    assert model_turn["parts"] == [
        {"functionCall": {"name": "calculator", "args": {}}, "thoughtSignature": THOUGHT_SIGNATURE}
    ]
    response = next(p for c in body["contents"] for p in c["parts"] if "functionResponse" in p)
    # The model is still told what it wrote, as a failed call's error.
    said = response["functionResponse"]["response"]["error"]
    assert said.startswith("Error: the arguments for 'calculator' were not a JSON object: '6*7'")
