"""Which callables become local tools, and how: any parameter name, partials, callable objects,
positional-only parameters, and clear errors for what cannot be a tool."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import anyio
import pytest
from pydantic import Field

from gateway.cli import main
from toolkits import ToolTimeout, function_tool, result_text

pytestmark = pytest.mark.anyio


async def test_any_parameter_name_is_an_argument_under_its_own_name() -> None:
    # Names pydantic keeps for itself (model_*), hides (_x) or warns about (schema, json, copy):
    # warnings are errors here, so the warnings this once gave would fail the test too.
    @function_tool
    def odd(
        _x: int,
        model_config: int,
        model_dump: int,
        schema: str,
        json: str = "j",
        copy: int = 0,
        model_fields: bool = False,
    ) -> list[object]:
        return [_x, model_config, model_dump, schema, json, copy, model_fields]

    names = ["_x", "model_config", "model_dump", "schema", "json", "copy", "model_fields"]
    assert list(odd.input_schema["properties"]) == names
    assert odd.input_schema["required"] == names[:4]
    assert odd.input_schema["properties"]["_x"] == {"title": "X", "type": "integer"}
    arguments = {"_x": 1, "model_config": 2, "model_dump": 3, "schema": "s", "model_fields": True}
    result = await odd(arguments)
    assert result.structured_content == {"response": [1, 2, 3, "s", "j", 0, True]}
    refused = await odd({"model_config": 2, "p0": 1})
    assert refused.is_error
    assert result_text(refused) == (
        "invalid arguments for odd: _x: Field required; model_dump: Field required; "
        "schema: Field required; p0: Extra inputs are not permitted"
    )


def search(query: str, index: str = "web", limit: int = 3) -> str:
    """Search an index."""
    return f"{index}:{query}:{limit}"


async def slow_search(query: str, index: str) -> str:
    await anyio.sleep_forever()
    return query


async def test_a_partial_offers_only_what_it_leaves_open() -> None:
    docs = function_tool(functools.partial(search, index="docs"))
    assert (docs.name, docs.description) == ("search", "Search an index.")
    assert list(docs.input_schema["properties"]) == ["query", "limit"]
    assert (await docs({"query": "q"})).structured_content == {"response": "docs:q:3"}
    assert (await docs({"query": "q", "index": "web"})).is_error  # fixed, not the model's
    first = function_tool(functools.partial(search, "fixed"), name="fixed_search")
    assert list(first.input_schema["properties"]) == ["index", "limit"]
    assert result_text(await first({"limit": 1})) == "web:fixed:1"
    nested = function_tool(functools.partial(functools.partial(search, limit=9), index="x"))
    assert list(nested.input_schema["properties"]) == ["query"]
    # A partial of a coroutine function is awaited, and cancelled at its timeout.
    hanging = function_tool(functools.partial(slow_search, index="x"), name="s", timeout=0.05)
    with anyio.fail_after(5), pytest.raises(ToolTimeout, match="the call was cancelled"):
        await hanging({"query": "q"})


class Adder:
    """Adds a fixed step."""

    def __init__(self, step: int) -> None:
        self.step = step

    async def __call__(self, value: int) -> int:
        await anyio.lowlevel.checkpoint()
        return value + self.step


async def test_a_callable_object_is_a_tool_of_its_call() -> None:
    tool = function_tool(Adder(2))
    assert (tool.name, tool.description) == ("Adder", "Adds a fixed step.")
    assert list(tool.input_schema["properties"]) == ["value"]
    assert (await tool({"value": 1})).structured_content == {"response": 3}
    assert function_tool(Adder(1), name="increment").name == "increment"


async def test_positional_only_parameters_and_annotated_fields() -> None:
    @function_tool
    def scale(
        value: Annotated[float, Field(description="what to scale")], /, by: float = 2
    ) -> float:
        return value * by

    assert scale.input_schema["properties"]["value"]["description"] == "what to scale"
    assert (await scale({"value": 1.5})).structured_content == {"response": 3.0}
    assert (await scale({"value": 1, "by": 3})).structured_content == {"response": 3.0}


def echo() -> Callable[[str], str]:
    return lambda text: text


def test_a_name_models_refuse_asks_for_name() -> None:
    with pytest.raises(ValueError, match=r"'<lambda>' is not a valid tool name .*pass name="):
        function_tool(echo())
    assert function_tool(echo(), name="echo").name == "echo"

    def météo(city: str) -> str:
        return city

    with pytest.raises(ValueError, match="'météo' is not a valid tool name"):
        function_tool(météo)
    with pytest.raises(ValueError, match="'look up' is not a valid tool name: tool names use"):
        function_tool(search, name="look up")
    with pytest.raises(ValueError, match="1-64 characters"):
        function_tool(search, name="x" * 65)


def test_parameters_that_cannot_be_arguments_are_a_type_error() -> None:
    def unresolved(a: int) -> int:
        return a

    unresolved.__annotations__["a"] = "Missing"  # a name its module does not define
    with pytest.raises(TypeError, match="unresolved: cannot read its parameters' types: name"):
        function_tool(unresolved)
    # Any error of the annotation's own code (a traceback through every command before).
    unresolved.__annotations__["a"] = "json.Missing"
    with pytest.raises(TypeError, match="types: module 'json' has no attribute 'Missing'"):
        function_tool(unresolved)

    def total(*numbers: int) -> int:
        return sum(numbers)

    with pytest.raises(TypeError, match=r"total: \*args and \*\*kwargs cannot become"):
        function_tool(total)


def test_a_configured_callable_is_named_by_its_config_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "shouting_tools.py").write_text("shout = lambda text: text.upper()  # noqa\n")
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[tools.shout]\npython = "shouting_tools:shout"\n')
    code = main(["call", "shout", "--args", json.dumps({"text": "hi"}), "--config", str(config)])
    assert (code, capsys.readouterr().out.strip()) == (0, "HI")
