"""Tool descriptions longer than an OpenAI-style server takes: cut to fit once it refuses one.

The fake server checks each request's descriptions as OpenAI's API does (and answers its own
400), or, like newer OpenAI models, takes them whole.
"""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from agent.errors import ModelHTTPError
from agent.messages import ToolDefinition
from agent.models import OpenAIModel, model_from_spec
from agent.models.openai_descriptions import CUT_MARK

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_openai import ASK, KEY, completion

pytestmark = pytest.mark.anyio

OPENAI_LIMIT = 1024
WORDS = " ".join(f"word{i}" for i in range(1_000))  # 8,890 characters
LONG = ToolDefinition(
    name="sch__huge_description", description="Finds issues. " + WORDS, source_node="sch"
)
EITHER = ToolDefinition(
    name="lookup",
    description="Looks a thing up. " + WORDS,
    input_schema={
        "type": "object",
        "oneOf": [
            {"properties": {"id": {"type": "string"}}, "required": ["id"]},
            {"properties": {"url": {"type": "string"}}, "required": ["url"]},
        ],
    },
    source_node="sch",
)
SHORT = ToolDefinition(name="echo", description="Says it back.", source_node="sch")
FORMS = "Arguments must match exactly one of these forms: (1) with `id`; (2) with `url`."


def as_openai(request: httpx.Request) -> httpx.Response:
    """OpenAI's answer: a 400 for the first description over 1,024 characters, else an answer."""
    tools: list[dict[str, Any]] = httpx.Response(200, content=request.content).json()["tools"]
    for index, tool in enumerate(tools):
        length = len(tool["function"].get("description", ""))
        if length > OPENAI_LIMIT:
            error = {
                "message": f"Invalid 'tools[{index}].function.description': string too long. "
                f"Expected a string with maximum length {OPENAI_LIMIT}, but got a string "
                f"with length {length} instead.",
                "type": "invalid_request_error",
                "param": f"tools[{index}].function.description",
                "code": "string_above_max_length",
            }
            return json_response(400, {"error": error})
    return json_response(200, completion({"role": "assistant", "content": "done"}))


def model(fake: FakeProvider, sleeps: Sleeps) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4.1-mini", api_key=KEY, http_client=fake.client(), retry=retry_policy(sleeps)
    )


def descriptions(fake: FakeProvider, index: int) -> dict[str, str]:
    tools: list[dict[str, Any]] = fake.body(index)["tools"]
    return {tool["function"]["name"]: tool["function"]["description"] for tool in tools}


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_a_refused_description_is_cut_to_the_length_named_from_then_on(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(*[as_openai] * 4)
    openai = model(fake, sleeps)
    first = await openai.invoke(ASK, [LONG, SHORT, EITHER])
    second = await openai.invoke(ASK, [LONG, SHORT, EITHER])
    assert (first.content, second.content) == ("done", "done")
    assert len(fake.requests) == 3  # refused once, then cut before sending
    whole, cut, again = (descriptions(fake, i) for i in range(3))
    assert len(whole["sch__huge_description"]) > OPENAI_LIMIT
    assert cut == again
    assert cut["echo"] == "Says it back."
    long, either = cut["sch__huge_description"], cut["lookup"]
    assert len(long) <= OPENAI_LIMIT
    assert len(either) <= OPENAI_LIMIT
    # The head of what the tool does, ending at a word, then the mark.
    assert long.endswith(CUT_MARK)
    assert whole["sch__huge_description"].startswith(long.removesuffix(CUT_MARK) + " ")
    # What the parameters cannot say of the arguments' forms is kept whole.
    assert either.startswith("Looks a thing up. word0 word1")
    assert either.endswith(f"{CUT_MARK}\n\n{FORMS}")
    assert warnings(caplog) == [
        "openai:gpt-4.1-mini takes tool descriptions of at most 1024 characters (it refused "
        "a longer one): each longer one is cut to fit, its end replaced by [...]: "
        f"'sch__huge_description' ({len(whole['sch__huge_description'])} characters), "
        f"'lookup' ({len(whole['lookup'])} characters)"
    ]


async def test_a_tool_first_offered_after_the_refusal_is_cut_and_warned_of_once(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(*[as_openai] * 4)
    openai = model(fake, sleeps)
    await openai.invoke(ASK, [LONG])
    await openai.invoke(ASK, [LONG, EITHER])
    await openai.invoke(ASK, [LONG, EITHER])
    assert len(fake.requests) == 4
    assert all(len(d) <= OPENAI_LIMIT for i in (2, 3) for d in descriptions(fake, i).values())
    said = warnings(caplog)
    assert len(said) == 2
    assert ("'sch__huge_description'" in said[0], "'lookup'" in said[0]) == (True, False)
    assert ("'sch__huge_description'" in said[1], "'lookup'" in said[1]) == (False, True)


async def test_a_server_that_takes_long_descriptions_gets_them_whole(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    await model(fake, sleeps).invoke(ASK, [LONG, EITHER])
    sent = descriptions(fake, 0)
    assert sent["sch__huge_description"] == LONG.description
    assert sent["lookup"] == f"{EITHER.description}\n\n{FORMS}"
    assert not warnings(caplog)


async def test_another_refusal_is_not_sent_again(sleeps: Sleeps) -> None:
    error = {
        "message": "Invalid 'tools[0].function.name': string does not match pattern.",
        "type": "invalid_request_error",
        "param": "tools[0].function.name",
        "code": "invalid_value",
    }
    fake = FakeProvider(json_response(400, {"error": error}))
    with pytest.raises(ModelHTTPError, match=r"function\.name"):
        await model(fake, sleeps).invoke(ASK, [LONG])
    assert len(fake.requests) == 1


def as_responses(request: httpx.Request) -> httpx.Response:
    """A Responses API that takes descriptions of 1,024 characters at most: its functions are
    flat, so its refusal names `tools[n].description` (as it names `input[n].call_id`)."""
    tools: list[dict[str, Any]] = httpx.Response(200, content=request.content).json()["tools"]
    for index, tool in enumerate(tools):
        length = len(tool.get("description", ""))
        if length > OPENAI_LIMIT:
            error = {
                "message": f"Invalid 'tools[{index}].description': string too long. Expected "
                f"a string with maximum length {OPENAI_LIMIT}, but got a string with length "
                f"{length} instead.",
                "type": "invalid_request_error",
                "param": f"tools[{index}].description",
                "code": "string_above_max_length",
            }
            return json_response(400, {"error": error})
    said: dict[str, Any] = {"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}]}  # fmt: skip
    return json_response(200, {"id": "resp_1", "status": "completed", "output": [said]})


@pytest.mark.parametrize(
    "spec", ["openai-responses:gpt-5-mini", "openai-responses:http://127.0.0.1:4000/v1#gpt-5"]
)
async def test_the_responses_apis_refusal_is_read_and_its_descriptions_cut(
    spec: str, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(*[as_responses] * 3)
    responses = model_from_spec(
        spec,
        http_client=fake.client(),
        api_keys={"OPENAI_API_KEY": KEY},
        retry=retry_policy(sleeps),
    )
    first = await responses.invoke(ASK, [LONG, SHORT, EITHER])
    second = await responses.invoke(ASK, [LONG, SHORT, EITHER])
    assert (first.content, second.content) == ("done", "done")
    assert len(fake.requests) == 3  # refused once, then cut before sending
    cut = {tool["name"]: tool["description"] for tool in fake.body(1)["tools"]}
    assert cut == {tool["name"]: tool["description"] for tool in fake.body(2)["tools"]}
    assert cut["echo"] == "Says it back."
    assert cut["sch__huge_description"].endswith(CUT_MARK)
    assert cut["lookup"].endswith(f"{CUT_MARK}\n\n{FORMS}")
    assert all(len(description) <= OPENAI_LIMIT for description in cut.values())
    [warned] = warnings(caplog)
    assert warned.startswith(f"{responses.name} takes tool descriptions of at most 1024 ")
