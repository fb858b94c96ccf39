"""Output validators: a Python check of each answer beyond its schema (PydanticAI's
`@agent.output_validator`), refusing it with `ModelRetry` (the message goes back to the
model, against `output_retries`) or returning it, changed or not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import JsonValue

from agent import (
    FINAL_RESULT_TOOL,
    AgentItem,
    AgentOptions,
    AnswerInfo,
    InProcessStore,
    ModelRetry,
    OutputSchema,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    ToolMessage,
    UserMessage,
)
from agent.errors import ModelConnectionError
from gateway import AgentSpec, ConfigError, Gateway, RunState, open_gateway
from gateway.cli import main
from gateway.config import parse_config
from tests.prompt_model import PromptModel
from tests.server.support import serve
from tests.test_structured_output import TOTAL, call

pytestmark = pytest.mark.anyio


def no_refunds(answer: Any) -> Any:
    """Refuses a negative total; rounds the others to cents."""
    if answer["total"] < 0:
        raise ModelRetry("a total cannot be negative: refunds are not sold")
    return {**answer, "total": round(answer["total"], 2)}


def shop(model: Any, validator: Any, *, output: OutputSchema | None = TOTAL, retries: int = 1):
    options = AgentOptions(output=output, output_retries=retries, output_validator=validator)
    spec = AgentSpec("shop", model, options=options, memory=SessionMemory(InProcessStore()))
    return Gateway([], [spec])


async def test_a_refused_answer_goes_back_with_the_validators_message_and_is_fixed() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, total=-5), call(FINAL_RESULT_TOOL, total=4.567)])
    result = await shop(model, no_refunds).run("shop", "How much?")
    assert result.error is None
    assert result.structured == {"total": 4.57}  # as the validator returned it
    assert result.output == '{"total": 4.57}'
    told = model.calls[1][0][-1]
    assert isinstance(told, ToolMessage)
    assert told.content == (
        "Error: the answer was not accepted: a total cannot be negative: refunds are not sold. "
        f"Call {FINAL_RESULT_TOOL} again with a corrected answer."
    )


async def test_of_several_final_results_the_first_the_validator_takes_is_the_answer() -> None:
    """Once only the first that fit the schema went to the validator: its refusal failed the
    item (no retries left) though a later call of the same answer was a good one."""
    seen: list[JsonValue] = []

    def check(answer: JsonValue) -> JsonValue:
        seen.append(answer)
        return no_refunds(answer)

    several = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name=FINAL_RESULT_TOOL, arguments={"total": total})
            for total in ("x", -3, 5.004, 7)
        ]
    )
    model = ScriptedModel([several])
    result = await shop(model, check, retries=0).run("shop", "How much?")
    assert (result.error, result.structured) == (None, {"total": 5.0})
    assert seen == [{"total": -3}, {"total": 5.004}]  # the schema's misfit never asked
    assert len(model.calls) == 1


async def test_refusals_and_schema_errors_share_one_retry_budget() -> None:
    """One schema error, then one refusal, with output_retries = 1: the item fails, naming
    the validator's message."""
    seen: list[JsonValue] = []

    def check(answer: JsonValue) -> JsonValue:
        seen.append(answer)
        return no_refunds(answer)

    model = ScriptedModel([call(FINAL_RESULT_TOOL, total="x"), call(FINAL_RESULT_TOOL, total=-1)])
    result = await shop(model, check, retries=1).run("shop", "How much?")
    assert result.error == (
        "the model's answer was refused by the output validator after 1 retry: "
        "a total cannot be negative: refunds are not sold"
    )
    assert seen == [{"total": -1}]  # never given what the schema refused
    assert (len(model.calls), result.iterations) == (2, 2)


async def test_without_a_schema_the_validator_gets_and_may_change_the_text() -> None:
    async def polite(answer: str, info: AnswerInfo) -> str:
        if "please" not in answer:
            raise ModelRetry(f"say please (this was answer {info.retry + 1} to {info.prompt!r})")
        return answer.upper()

    model = ScriptedModel(["Give me a coin.", "Give me a coin, please."])
    gateway = shop(model, polite, output=None)
    result = await gateway.run("shop", "Ask for a coin", session_id="s")
    assert result.output == "GIVE ME A COIN, PLEASE."
    assert result.structured is None
    told = model.calls[1][0]
    assert isinstance(told[-1], UserMessage)  # a text answer is corrected as the user's turn
    assert told[-1].content == (
        "Error: the answer was not accepted: say please (this was answer 1 to 'Ask for a "
        "coin'). Answer again, corrected."
    )
    assert told[-2].content == "Give me a coin."
    memory = gateway.agents["shop"].memory
    assert isinstance(memory, SessionMemory)
    assert (await memory.load("s")).messages[-1].content == "GIVE ME A COIN, PLEASE."


async def test_the_validator_reads_the_items_context_and_cannot_change_it() -> None:
    seen: list[AnswerInfo] = []

    def per_customer(answer: str, info: AnswerInfo) -> str:
        seen.append(info)
        assert isinstance(info.context, dict)
        limit = info.context["limit"]
        assert isinstance(limit, int)
        info.context["limit"] = 0  # its own copy: the item keeps its context
        return answer[:limit]

    model = ScriptedModel(["A long answer."])
    item = AgentItem(prompt="Hi", context={"limit": 6})
    result = await shop(model, per_customer, output=None).run("shop", [item])
    assert result.items[0].output == "A long"
    assert [(i.prompt, i.item_index, i.retry) for i in seen] == [("Hi", 0, 0)]
    assert item.context == {"limit": 6}


def broken(answer: JsonValue) -> JsonValue:
    raise KeyError("currency")


def free(answer: JsonValue) -> JsonValue:
    return {"total": "free"}


def forgets_to_return(answer: str) -> None:
    assert answer


@pytest.mark.parametrize(
    ("validator", "output", "answer", "error"),
    [
        (
            broken,
            TOTAL,
            call(FINAL_RESULT_TOOL, total=1),
            "the output validator tests.test_output_validators:broken raised KeyError: 'currency'",
        ),
        (
            free,
            TOTAL,
            call(FINAL_RESULT_TOOL, total=1),
            "the output validator tests.test_output_validators:free returned an answer "
            "that does not fit the output schema: at total: 'free' is not of type 'number'",
        ),
        (
            forgets_to_return,
            None,
            ScriptedAnswer(content="hello"),
            "the output validator tests.test_output_validators:forgets_to_return returned "
            "NoneType, "
            "not the answer's text (a str)",
        ),
    ],
    ids=["raises", "returns-what-the-schema-refuses", "returns-no-text"],
)
async def test_a_validator_that_fails_fails_its_item_saying_why(
    validator: Any, output: OutputSchema | None, answer: ScriptedAnswer, error: str
) -> None:
    model = ScriptedModel([answer, answer])
    result = await shop(model, validator, output=output, retries=3).run("shop", "How much?")
    assert result.error == error
    assert result.output is None
    assert len(model.calls) == 1  # its bug, not the model's: nothing is sent back


def test_a_validator_that_cannot_take_the_answer_is_refused_when_the_agent_is_made() -> None:
    def three(a: object, b: object, c: object) -> None: ...

    with pytest.raises(
        ValueError, match=r"takes the answer .*three\(a: 'object', b: 'object', c: 'object'\)"
    ):
        AgentOptions(output_validator=three)
    with pytest.raises(ValueError, match="must be a function"):
        AgentOptions(output_validator="module:function")  # pyright: ignore[reportArgumentType]


async def test_over_mcp_a_served_agents_answer_is_the_validated_one() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, total=-2), call(FINAL_RESULT_TOOL, total=1.234)])
    async with Client(serve(shop(model, no_refunds))) as client:
        result = await client.call_tool("shop", {"prompt": "How much?"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["output"] == {"total": 1.23}
    assert len(model.calls) == 2


async def test_a_resumed_run_validates_no_answer_it_already_accepted() -> None:
    """Item `first` was accepted and item `second` refused once before the model went down:
    the resumed run neither asks the validator about `first` again nor forgets that `second`
    used its retry."""
    validated: list[JsonValue] = []

    def check(answer: JsonValue) -> JsonValue:
        validated.append(answer)
        return no_refunds(answer)

    model = PromptModel(
        {
            "first": [call(FINAL_RESULT_TOOL, total=1)],
            "second": [call(FINAL_RESULT_TOOL, total=-1), call(FINAL_RESULT_TOOL, total=-3)],
        },
        failures={"second": ModelConnectionError("the provider is down")},
    )
    options = AgentOptions(output=TOTAL, batch_size=2, output_validator=check)
    gateway = Gateway([], [AgentSpec("shop", model, options=options)])
    stored: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(RunState.model_validate_json(state.model_dump_json()))

    items = [AgentItem(prompt="first"), AgentItem(prompt="second")]
    # Step 1: `first` accepted; `second`'s model is down.
    with pytest.raises(ModelConnectionError):
        await gateway.run("shop", items, checkpoint=checkpoint)
    assert validated == [{"total": 1}]
    result = await gateway.resume(stored[-1], checkpoint=checkpoint)
    assert [item.structured for item in result.items] == [{"total": 1}, None]
    assert result.items[1].error == (
        "the model's answer was refused by the output validator after 1 retry: "
        "a total cannot be negative: refunds are not sold"
    )
    assert validated == [{"total": 1}, {"total": -1}, {"total": -3}]
    assert (model.asked("first"), model.asked("second")) == (1, 3)  # 1 of them failed


def test_config_names_the_validator_beside_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shop_checks_beside.py").write_text(
        "from agent import ModelRetry\n\n\n"
        "async def whole(answer):\n"
        "    if answer['total'] != int(answer['total']):\n"
        "        raise ModelRetry('whole euros only')\n"
        "    return answer\n"
    )
    script = tmp_path / "answers.json"
    answers = [{"total": 2.5}, {"total": 3}]
    script.write_text(
        json.dumps([{"tool_calls": [{"name": FINAL_RESULT_TOOL, "arguments": a}]} for a in answers])
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[agents.shop]\nmodel = "scripted:{script}"\n'
        'output_validator = "shop_checks_beside:whole"\n'
        '[agents.shop.output_schema]\ntype = "object"\nrequired = ["total"]\n'
        '[agents.shop.output_schema.properties.total]\ntype = "number"\n'
    )
    assert main(["run", "How much?", "--config", str(config)]) == 0
    assert capsys.readouterr().out == '{"total": 3}\n'


async def test_config_refuses_a_validator_it_cannot_use() -> None:
    with pytest.raises(ConfigError, match=r"agents\.a\.output_validator: must look like"):
        parse_config({"agents": {"a": {"output_validator": "no colon"}}})
    config = parse_config({"agents": {"a": {"output_validator": "tests.sample_tools:missing"}}})
    with pytest.raises(ConfigError, match=r"agents\.a\.output_validator: cannot import"):
        async with open_gateway(config):
            pass
    config = parse_config({"agents": {"a": {"output_validator": "json:JSONDecoder"}}})
    with pytest.raises(ConfigError, match=r"agents\.a\.output_validator: .* cannot be called so"):
        async with open_gateway(config):
            pass
