"""What a local function returns becomes one JSON value: the result's text and its structured
content agree, bytes become an image or base64, and a value that cannot be JSON is the tool's
error result, never a failed run."""

from __future__ import annotations

import base64
import datetime
import decimal
import enum
import json
import uuid
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, JsonValue

from agent import (
    AgentItem,
    AgentOptions,
    MediaPart,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    ToolMessage,
)
from gateway import AgentSpec, Gateway
from tests.prompt_model import PromptModel
from tests.test_engine import Recorder
from toolkits import FunctionToolkit, function_tool, result_text

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


class Point(BaseModel):
    x: int
    y: int = 0


@dataclass
class Span:
    start: datetime.date
    days: int


class Color(enum.Enum):
    RED = "red"


async def returned(value: object) -> CallToolResult:
    """The result of a local tool that returns `value`."""

    @function_tool
    def give() -> Any:
        return value

    return await give({})


@pytest.mark.parametrize(
    ("value", "data"),
    [
        ({"when": datetime.datetime(2024, 1, 1, 9, 30)}, {"when": "2024-01-01T09:30:00"}),
        (Point(x=1), {"x": 1, "y": 0}),
        (Span(datetime.date(2024, 2, 29), 3), {"start": "2024-02-29", "days": 3}),
        ({1: "a", 2: ("b", {3})}, {"1": "a", "2": ["b", [3]]}),
        ({"raw": b"\xff\xfe\x00"}, {"raw": base64.urlsafe_b64encode(b"\xff\xfe\x00").decode()}),
        ({"ratio": float("nan"), "top": float("inf")}, {"ratio": None, "top": None}),
        ({"city": "Zürich"}, {"city": "Zürich"}),
    ],
)
async def test_an_object_is_structured_content_and_its_text_is_the_same_json(
    value: object, data: dict[str, JsonValue]
) -> None:
    result = await returned(value)
    assert not result.is_error
    assert result.structured_content == data
    [block] = result.content
    assert isinstance(block, TextContent)
    assert block.text == json.dumps(data, ensure_ascii=False)  # "Zürich", not "Z\\u00fcrich"
    result.model_dump_json()  # the result goes on the wire as it is


@pytest.mark.parametrize(
    ("value", "data", "text"),
    [
        (decimal.Decimal("1.50"), "1.50", "1.50"),
        ((1, 2), [1, 2], "[1, 2]"),
        ({3}, [3], "[3]"),
        (frozenset[int](), [], "[]"),
        (Color.RED, "red", "red"),
        (uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001", None),
        (datetime.timedelta(minutes=90), "PT1H30M", None),
        ([Point(x=2)], [{"x": 2, "y": 0}], '[{"x": 2, "y": 0}]'),
        (None, None, "null"),
    ],
)
async def test_any_other_value_is_a_response_whose_text_is_the_same_json(
    value: object, data: JsonValue, text: str | None
) -> None:
    result = await returned(value)
    assert not result.is_error
    assert result.structured_content == {"response": data}
    # A string is its own text; anything else is its JSON.
    assert result_text(result) == (text or data)


@pytest.mark.parametrize(
    ("header", "mime_type"),
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
    ],
)
async def test_bytes_of_an_image_are_an_image(header: bytes, mime_type: str) -> None:
    picture = header + bytes(range(256))
    result = await returned(picture)
    [block] = result.content
    assert isinstance(block, ImageContent)
    assert block.mime_type == mime_type
    assert base64.b64decode(block.data, validate=True) == picture
    assert result.structured_content is None
    assert result_text(result) == f"[image: {mime_type}, {len(picture)} bytes]"


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
async def test_other_bytes_are_base64url_and_say_so(kind: type[Any]) -> None:
    raw = b"\x00\xffhello\xfb\xef"
    result = await returned(kind(raw))
    assert result.structured_content is not None
    assert base64.urlsafe_b64decode(result.structured_content["base64url"]) == raw
    assert json.loads(result_text(result)) == result.structured_content
    result.model_dump_json()


async def test_mcp_content_is_the_results_content() -> None:
    image = ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    assert (await returned(image)).content == [image]
    blocks = [TextContent(text="a chart"), image]
    result = await returned(blocks)
    assert (result.content, result.structured_content) == (blocks, None)
    whole = CallToolResult(content=[TextContent(text="as is")], is_error=True)
    assert await returned(whole) is whole


async def test_a_value_that_cannot_be_json_is_the_tools_error_naming_its_type() -> None:
    result = await returned(object())
    assert result.is_error
    assert result_text(result).startswith(
        "local tool 'give' returned a object, which cannot be made JSON (Unable to serialize "
        "unknown type: <class 'object'>); a tool returns JSON-like data"
    )
    loop: dict[str, object] = {}
    loop["self"] = loop
    result = await returned(loop)
    assert result.is_error
    assert "returned a dict, which cannot be made JSON (Circular reference" in result_text(result)


async def test_an_int_too_long_to_write_is_the_tools_error() -> None:
    """Python writes no int past 4,300 digits: once, the value passed and its text raised."""
    for value in (10**5000, {"n": [10**5000]}):
        result = await returned(value)
        assert result.is_error
        assert "which cannot be made JSON (Exceeds the limit (4300 digits)" in result_text(result)


@function_tool
def add(a: int, b: int) -> int:
    """Adds."""
    return a + b


async def test_a_sum_too_long_to_write_fails_its_call_and_no_other_item() -> None:
    nines = int("9" * 4300)  # the longest int Python reads: a model's arguments may hold it

    def add_call(a: int) -> ScriptedAnswer:
        return ScriptedAnswer(tool_calls=[ScriptedCall(name="add", arguments={"a": a, "b": 1})])

    model = PromptModel({"A": [add_call(1), "a"], "X": [add_call(nines), "x"], "Y": ["y"]})
    options = AgentOptions(return_intermediate_steps=True)
    spec = AgentSpec("a", model, tools=["local"], options=options)
    gateway = Gateway([FunctionToolkit("local", [add])], [spec])
    with anyio.fail_after(10):
        result = await gateway.run("a", [AgentItem(prompt=p) for p in ("A", "X", "Y")])
    assert [(item.output, item.error) for item in result.items] == [
        ("a", None),
        ("x", None),
        ("y", None),
    ]
    [a], [x] = [[step.observation for step in item.steps or ()] for item in result.items[:2]]
    assert a == "2"
    assert x.startswith(
        "Error: local tool 'add' returned a int, which cannot be made JSON (Exceeds the limit"
    )


class Opaque:
    pass


@function_tool
def picture() -> bytes:
    """A PNG."""
    return PNG


@function_tool
def point() -> Point:
    return Point(x=3)


@function_tool
def meeting() -> dict[str, object]:
    return {"when": datetime.datetime(2024, 1, 1), "who": {"ann", "bob"} - {"bob"}}


@function_tool
def price() -> decimal.Decimal:
    return decimal.Decimal("9.99")


@function_tool
def opaque() -> Opaque:
    return Opaque()


async def test_a_run_whose_tools_return_python_values_completes() -> None:
    """Once, any of these failed the whole run (the trace could not hold the raw value)."""
    tools = [picture, point, meeting, price, opaque]
    every_tool = ScriptedAnswer(tool_calls=[ScriptedCall(name=tool.name) for tool in tools])
    model = ScriptedModel([every_tool, "done"])
    spec = AgentSpec(
        name="a",
        model=model,
        tools=["local"],
        options=AgentOptions(return_intermediate_steps=True),
    )
    recorder = Recorder()
    gateway = Gateway([FunctionToolkit("local", tools)], [spec], max_concurrency=5)
    with anyio.fail_after(10):
        result = await gateway.run("a", "go", hooks=[recorder])
    assert result.output == "done"
    observed = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed == [
        f"[image: image/png, {len(PNG)} bytes]",
        '{"x":3,"y":0}',
        '{"when":"2024-01-01T00:00:00","who":["ann"]}',
        "9.99",
        "Error: local tool 'opaque' returned a tests.test_local_tool_returns.Opaque, which "
        "cannot be made JSON (Unable to serialize unknown type: <class "
        "'tests.test_local_tool_returns.Opaque'>); a tool returns JSON-like data, a pydantic "
        "model or dataclass, bytes, MCP content, or a CallToolResult",
    ]
    ended = {e.name: e.output for e in recorder.events if e.kind == "tool" and e.phase == "end"}
    assert ended["point"] == {"x": 3, "y": 0}
    assert ended["price"] == {"response": "9.99"}
    steps = result.items[0].steps
    assert steps is not None
    assert [(step.tool, step.observation) for step in steps] == [
        (tool.name, text) for tool, text in zip(tools, observed, strict=True)
    ]


@function_tool
def chart() -> CallToolResult:
    """A caption, an image and structured content, as an MCP server may answer."""
    image = ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
    return CallToolResult(
        content=[TextContent(text="here is a chart"), image], structured_content={"chart": "bars"}
    )


@function_tool
def failing() -> CallToolResult:
    return CallToolResult(content=[], structured_content={"code": "E42"}, is_error=True)


async def test_a_tools_image_reaches_the_model_beside_all_its_text() -> None:
    """Once the model read only `{"chart":"bars"}`, and an image only as its description; an
    error with structured content only read "the tool reported an error"."""
    tools = [picture, chart, failing]
    every_tool = ScriptedAnswer(tool_calls=[ScriptedCall(name=tool.name) for tool in tools])
    model = ScriptedModel([every_tool, "done"])
    spec = AgentSpec(name="a", model=model, tools=["local"])
    recorder = Recorder()
    gateway = Gateway([FunctionToolkit("local", tools)], [spec])
    with anyio.fail_after(10):
        result = await gateway.run("a", "go", hooks=[recorder])
    assert result.output == "done"
    sent = [m for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    described = f"[image: image/png, {len(PNG)} bytes]"
    assert [m.content for m in sent] == [
        described,
        f'here is a chart\n{described}\n{{"chart":"bars"}}',
        'Error: {"code":"E42"}',
    ]
    image = MediaPart(type="image", media_type="image/png", data=base64.b64encode(PNG).decode())
    assert [m.media for m in sent] == [(image,), (image,), ()]
    # The trace holds the text; the bytes went to the model only.
    outputs = [e.output for e in recorder.events if e.kind == "tool" and e.phase == "end"]
    assert base64.b64encode(PNG).decode() not in json.dumps(outputs)
