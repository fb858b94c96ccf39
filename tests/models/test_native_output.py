"""Native structured output (`output_mode = "native"`): OpenAI's `response_format` json_schema
(strict) and Gemini's `responseJsonSchema` carry the answer's schema, no `final_result` tool is
offered, and the answer is read from the text, against real-format provider payloads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from pydantic import BaseModel, JsonValue

from agent import (
    AgentOptions,
    AssistantMessage,
    ChatMessage,
    ChatModel,
    HoldsOutputSchema,
    ModelConfigError,
    ModelRetry,
    OutputSchema,
    ScriptedModel,
    TokenCallback,
    ToolDefinition,
)
from agent.models import AnthropicModel, FallbackModel, GeminiModel, OpenAIModel
from agent.native_output import native_output_schema
from gateway import AgentSpec, ConfigError, Gateway, open_gateway
from gateway.config import parse_config
from toolkits import FunctionToolkit, calculator

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_gemini import generated
from .test_openai import completion

pytestmark = pytest.mark.anyio

TOTAL: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"total": {"type": "number"}, "currency": {"type": "string"}},
    "required": ["total"],
}
STRICT_TOTAL: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "total": {"type": "number"},
        "currency": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["total", "currency"],
    "additionalProperties": False,
}


def native(model: Any, output: OutputSchema | None = None, **options: Any) -> Gateway:
    schema = output or OutputSchema.from_json_schema(TOTAL)
    spec = AgentSpec(
        "shop",
        model,
        tools=["calculator"],
        options=AgentOptions(output=schema, output_mode="native", **options),
    )
    return Gateway([FunctionToolkit("calculator", [calculator])], [spec])


def openai(fake: FakeProvider, sleeps: Sleeps) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4.1-mini", api_key="sk-test-1", http_client=fake.client(), retry=retry_policy(sleeps)
    )


def said(text: str) -> dict[str, Any]:
    return completion({"role": "assistant", "content": text, "refusal": None})


async def test_openai_gets_a_strict_response_format_and_the_answer_is_read_from_its_text(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider(json_response(200, said('{"total": 425, "currency": null}')))
    result = await native(openai(fake, sleeps)).run("shop", "What do 17 shirts at 25 cost?")
    assert result.error is None
    assert result.structured == {"total": 425}  # the null strict mode needed is left out
    body = fake.body()
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_result", "schema": STRICT_TOTAL, "strict": True},
    }
    assert [t["function"]["name"] for t in body["tools"]] == ["calculator"]  # no final_result


async def test_a_native_answer_refused_goes_back_and_the_next_is_taken(sleeps: Sleeps) -> None:
    def whole(answer: Any) -> Any:
        if answer["total"] != int(answer["total"]):
            raise ModelRetry("whole euros only")
        return answer

    fake = FakeProvider(
        json_response(200, said("About 425 euros.")),  # a server that ignored the format
        json_response(200, said('{"total": 424.5, "currency": "EUR"}')),
        json_response(200, said('{"total": 425, "currency": "EUR"}')),
    )
    gateway = native(openai(fake, sleeps), output_retries=2, output_validator=whole)
    result = await gateway.run("shop", "How much?")
    assert result.structured == {"total": 425, "currency": "EUR"}
    second, third = fake.body(1)["messages"], fake.body(2)["messages"]
    assert second[-1] == {
        "role": "user",
        "content": "Error: the answer does not fit the output schema: answer with JSON that "
        "fits the schema, and nothing else. Answer again with corrected JSON.",
    }
    assert third[-1]["content"] == (
        "Error: the answer was not accepted: whole euros only. Answer again with corrected JSON."
    )
    assert all("response_format" in fake.body(n) for n in range(3))


class Line(BaseModel):
    name: str
    qty: int = 1


class Basket(BaseModel):
    lines: list[Line]
    note: str | None = None


async def test_a_pydantic_models_optional_fields_are_made_strict_and_defaults_apply(
    sleeps: Sleeps,
) -> None:
    answer = '{"lines": [{"name": "shirt", "qty": null}], "note": null}'
    fake = FakeProvider(json_response(200, said(answer)))
    result = await native(openai(fake, sleeps), OutputSchema.from_model(Basket)).run("shop", "?")
    assert result.structured == {"lines": [{"name": "shirt", "qty": 1}], "note": None}
    schema = fake.body()["response_format"]["json_schema"]["schema"]
    line = schema["$defs"]["Line"]
    assert (line["required"], line["additionalProperties"]) == (["name", "qty"], False)
    assert line["properties"]["qty"] == {
        "anyOf": [{"title": "Qty", "type": "integer"}, {"type": "null"}]
    }
    assert "default" not in schema["properties"]["note"]


PAYMENTS: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "payments": {
            "type": "array",
            "items": {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"card": {"type": "string"}, "holder": {"type": "string"}},
                        "required": ["card"],
                    },
                    {
                        "type": "object",
                        "properties": {"iban": {"type": "string"}, "bic": {"type": "string"}},
                        "required": ["iban"],
                    },
                ]
            },
        },
        "refund": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"amount": {"type": "number"}, "reason": {"type": "string"}},
                    "required": ["amount"],
                },
                {"enum": ["none"]},
            ]
        },
    },
    "required": ["payments", "refund"],
}


async def test_the_nulls_added_inside_anyof_and_oneof_branches_are_taken_out_again(
    sleeps: Sleeps,
) -> None:
    answer = (
        '{"payments": [{"card": "4242", "holder": null}, {"iban": "DE89", "bic": null}],'
        ' "refund": {"amount": 5, "reason": null}}'
    )
    fake = FakeProvider(json_response(200, said(answer)))
    output = OutputSchema.from_json_schema(PAYMENTS)
    result = await native(openai(fake, sleeps), output).run("shop", "How was it paid?")
    assert result.error is None
    assert result.structured == {
        "payments": [{"card": "4242"}, {"iban": "DE89"}],
        "refund": {"amount": 5},
    }
    schema = fake.body()["response_format"]["json_schema"]["schema"]
    transfer = schema["properties"]["payments"]["items"]["anyOf"][1]
    assert transfer["properties"]["bic"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}


class Card(BaseModel):
    last4: str
    holder: str = "?"


class Transfer(BaseModel):
    iban: str
    bic: str | None = None


class Paid(BaseModel):
    payments: list[Card | Transfer]
    tip: tuple[int, Card | None] | None = None


async def test_a_union_of_models_in_a_list_gets_its_defaults_and_keeps_its_own_nulls(
    sleeps: Sleeps,
) -> None:
    answer = (
        '{"payments": [{"last4": "4242", "holder": null}, {"iban": "DE89", "bic": null}],'
        ' "tip": [2, {"last4": "1111", "holder": null}]}'
    )
    fake = FakeProvider(json_response(200, said(answer)))
    result = await native(openai(fake, sleeps), OutputSchema.from_model(Paid)).run("shop", "?")
    assert result.error is None
    assert result.structured == {
        "payments": [{"last4": "4242", "holder": "?"}, {"iban": "DE89", "bic": None}],
        "tip": [2, {"last4": "1111", "holder": "?"}],
    }


async def test_an_answer_that_is_no_object_is_wrapped_for_strict_mode(sleeps: Sleeps) -> None:
    numbers = OutputSchema.from_json_schema({"type": "array", "items": {"type": "integer"}})
    fake = FakeProvider(json_response(200, said('{"response": [1, 2, 3]}')))
    result = await native(openai(fake, sleeps), numbers).run("shop", "Three numbers?")
    assert result.structured == [1, 2, 3]
    schema = fake.body()["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["response"]


async def test_gemini_gets_a_response_json_schema_and_the_answer_is_read_from_its_text(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider(
        json_response(200, {"name": "models/gemini-3-flash", "inputTokenLimit": 1048576}),
        json_response(200, generated([{"text": '{"total": 3, "currency": "EUR"}'}])),
    )
    model = GeminiModel(
        "gemini-3-flash", api_key="AIza-1", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    result = await native(model).run("shop", "How much?")
    assert result.structured == {"total": 3, "currency": "EUR"}
    config = fake.body()["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == STRICT_TOTAL
    assert "responseSchema" not in config
    declared = fake.body()["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declared] == ["calculator"]


class Part(BaseModel):
    name: str
    size: Literal[1, 2, 3]
    at: tuple[int, int]
    parts: list[Part] = []


async def test_gemini_gets_the_schema_as_json_schema_recursion_tuples_and_enums_kept(
    sleeps: Sleeps,
) -> None:
    """`responseSchema` (OpenAPI's subset) would cut the recursion after two levels into a
    field of JSON text, make the tuple one item type and drop the number enum."""
    answer = (
        '{"response": {"name": "box", "size": 3, "at": [0, 1], "parts": [{"name": "lid",'
        ' "size": 1, "at": [0, 0], "parts": [{"name": "hinge", "size": 2, "at": [1, 1],'
        ' "parts": [{"name": "pin", "size": 1, "at": [2, 2], "parts": []}]}]}]}}'
    )
    fake = FakeProvider(
        json_response(200, {"name": "models/gemini-3-flash", "inputTokenLimit": 1048576}),
        json_response(200, generated([{"text": answer}])),
    )
    model = GeminiModel(
        "gemini-3-flash", api_key="AIza-1", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    output = OutputSchema.from_model(Part)
    result = await native(model, output).run("shop", "What is it made of?")
    assert result.error is None
    assert result.structured == json.loads(answer)["response"]
    sent = fake.body(1)["generationConfig"]["responseJsonSchema"]
    assert sent == output.native_schema()
    assert sent["properties"]["response"] == {"$ref": "#/$defs/Part"}  # its $defs at the root
    part = sent["$defs"]["Part"]
    assert part["properties"]["parts"]["anyOf"][0]["items"] == {"$ref": "#/$defs/Part"}
    assert part["properties"]["size"]["enum"] == [1, 2, 3]
    assert part["properties"]["at"]["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]


async def test_a_model_known_without_native_output_refuses_the_call_unsent(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider()  # any request would fail the test
    model = AnthropicModel(
        "claude-3-5-haiku-20241022",
        api_key="sk-ant-1",
        http_client=fake.client(),
        retry=retry_policy(sleeps),
    )
    with pytest.raises(ModelConfigError, match="claude-3-5-haiku-20241022 has no structured out"):
        await native(model).run("shop", "How much?")
    assert fake.requests == []


class OwnModel:
    """A model of one's own (the `ChatModel` protocol alone, or `HoldsOutputSchema` too with
    `native`): answers `{"total": 3}`, noting the schema each call was held to."""

    def __init__(self, *, native: bool | None = None) -> None:
        if native is not None:
            self.native_output = native
        self.held_to: list[dict[str, JsonValue] | None] = []

    @property
    def name(self) -> str:
        return "own"

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        self.held_to.append(native_output_schema())
        return AssistantMessage(content='{"total": 3}')


@pytest.mark.parametrize("native", [None, False], ids=["undeclared", "declared-false"])
async def test_a_model_of_ones_own_that_does_not_declare_native_output_is_refused_uncalled(
    native: bool | None,
) -> None:
    """Once called with no schema and no `final_result` tool, its JSON taken as the answer:
    native mode reached a model only through a context variable its protocol never named."""
    model = OwnModel(native=native)
    assert isinstance(model, HoldsOutputSchema) is (native is not None)
    with pytest.raises(ModelConfigError, match="own has no native structured output"):
        await native_gateway_of(model).run("shop", "How much?")
    assert model.held_to == []


async def test_a_model_of_ones_own_that_declares_native_output_reads_the_schema() -> None:
    model = OwnModel(native=True)
    result = await native_gateway_of(model).run("shop", "How much?")
    assert result.structured == {"total": 3}
    assert model.held_to == [STRICT_TOTAL]


async def test_a_fallback_list_holds_native_output_only_if_every_model_does() -> None:
    declared, undeclared = OwnModel(native=True), OwnModel()
    with pytest.raises(ModelConfigError, match="has no native structured output"):
        await native_gateway_of(FallbackModel([declared, undeclared])).run("shop", "How much?")
    assert declared.held_to == undeclared.held_to == []
    both = native_gateway_of(FallbackModel([declared, ScriptedModel(['{"total": 5}'])]))
    assert (await both.run("shop", "How much?")).structured == {"total": 3}
    assert declared.held_to == [STRICT_TOTAL]


def native_gateway_of(model: ChatModel) -> Gateway:
    """`native` without tools: a model of one's own answers no tool calls."""
    schema = OutputSchema.from_json_schema(TOTAL)
    options = AgentOptions(output=schema, output_mode="native")
    return Gateway([], [AgentSpec("shop", model, options=options)])


async def test_gemini_before_3_refuses_a_schema_beside_tools_unsent(sleeps: Sleeps) -> None:
    """Gemini 2.5 answers such a request with 400 "Function calling with a response mime
    type: 'application/json' is unsupported"; said before it is sent."""
    fake = FakeProvider(
        json_response(200, {"name": "models/gemini-2.5-flash", "inputTokenLimit": 1048576})
    )
    model = GeminiModel(
        "gemini-2.5-flash", api_key="AIza-1", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelConfigError, match="takes no response schema beside function calling"):
        await native(model).run("shop", "How much?")
    assert [r.method for r in fake.requests] == ["GET"]  # its context window, no generateContent


def test_the_agent_refuses_native_mode_without_a_schema_it_can_hold() -> None:
    with pytest.raises(ValueError, match="needs an output schema"):
        AgentOptions(output_mode="native")
    free = OutputSchema.from_json_schema(
        {"type": "object", "additionalProperties": {"type": "number"}}
    )
    with pytest.raises(ValueError, match=r"a map with free keys \(additionalProperties\)"):
        AgentOptions(output=free, output_mode="native")
    assert AgentOptions(output=free).native_schema is None  # the tool takes it as it is


REFUSED: list[tuple[dict[str, Any], str]] = [
    (
        {"model": "anthropic:claude-sonnet-4-20250514", "output_schema": TOTAL},
        r"'anthropic:claude-sonnet-4-20250514' has no structured outputs \(Claude Haiku 4.5, "
        r"Sonnet 4.5, Opus 4.5 and later have\); use output_mode",
    ),
    ({"model": "openai:gpt-4.1-mini"}, "needs an output_schema"),
    (
        {
            "model": "openai:gpt-4.1-mini",
            "output_schema": {"type": "object", "properties": {"a": {"allOf": [{}]}}},
        },
        "output_schema cannot be held natively: the schema at 'a' uses 'allOf'",
    ),
    (
        {"model": ["gemini:gemini-3-flash", "sampling"], "output_schema": TOTAL},
        "'sampling' has no native structured output",
    ),
    (
        {"model": "gemini:gemini-2.5-flash", "output_schema": TOTAL, "tools": ["calc"]},
        "'gemini:gemini-2.5-flash' takes no response schema beside function calling",
    ),
]


@pytest.mark.parametrize(
    ("agent", "why"),
    REFUSED,
    ids=["anthropic-4", "no-schema", "allOf", "sampling-fallback", "gemini-2.5-with-tools"],
)
def test_config_refuses_native_mode_it_cannot_keep(agent: dict[str, Any], why: str) -> None:
    tools = {"calc": {"builtin": "calculator"}}
    with pytest.raises(ConfigError, match=f"agents.shop: .*{why}"):
        parse_config({"tools": tools, "agents": {"shop": {**agent, "output_mode": "native"}}})


async def test_a_model_given_on_the_command_line_is_checked_too() -> None:
    config = parse_config(
        {"agents": {"shop": {"output_mode": "native", "output_schema": TOTAL, "tools": []}}}
    )
    with pytest.raises(ConfigError, match="model anthropic:claude-3-7-sonnet-latest: 'anthropic"):
        async with open_gateway(config, model="anthropic:claude-3-7-sonnet-latest"):
            pass


async def test_in_tool_mode_the_request_carries_no_response_format(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, said('{"total": 1}')))
    spec = AgentSpec(
        "shop",
        openai(fake, sleeps),
        options=AgentOptions(output=OutputSchema.from_json_schema(TOTAL)),
    )
    result = await Gateway([], [spec]).run("shop", "How much?")
    assert result.structured == {"total": 1}
    assert "response_format" not in fake.body()
    assert [t["function"]["name"] for t in fake.body()["tools"]] == ["final_result"]
