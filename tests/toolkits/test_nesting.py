"""How deep a result may nest: measured whole at any depth, without a recursion, and read from
JSON text no reader takes (its depth, and the id of the request it answers)."""

from __future__ import annotations

import json

import mcp_types as types
import pytest

from toolkits import read_json
from toolkits.nesting import MAX_DEPTH, TooDeep, nesting, text_too_deep, too_deep
from toolkits.well_formed import well_formed, well_formed_result


def arrays(levels: int) -> str:
    return "[" * levels + "1" + "]" * levels


def result(levels: int) -> types.CallToolResult:
    """A tool result nested `levels` deep: itself, its structured content, then arrays."""
    value: object = 1
    for _ in range(levels - 2):
        value = [value]
    return types.CallToolResult(content=[], structured_content={"a": value})


def test_levels_are_counted_as_json_nests_them() -> None:
    assert nesting("text") == 0
    assert nesting({}) == 1
    value: dict[str, object] = {"a": [1, {"b": []}], "c": 2}
    assert nesting(value) == 4
    assert nesting(result(7)) == 7  # a pydantic model is an object
    assert nesting(read_json(arrays(150))) == 150


def test_too_deep_says_how_deep_and_the_limit() -> None:
    assert too_deep(result(MAX_DEPTH).model_dump(mode="json")) is None
    found = too_deep(result(MAX_DEPTH + 1).model_dump(mode="json"))
    assert found is not None
    assert str(found) == f"nested too deeply ({MAX_DEPTH + 1} levels; at most {MAX_DEPTH})"
    assert found.depth == MAX_DEPTH + 1


def test_the_walk_for_lone_surrogates_is_bounded_by_the_limit() -> None:
    assert well_formed_result(result(MAX_DEPTH)).structured_content is not None
    with pytest.raises(TooDeep) as raised:  # no RecursionError, whatever the depth
        well_formed_result(result(5000))
    assert raised.value.depth == 5000
    with pytest.raises(TooDeep):
        well_formed(json.loads(arrays(MAX_DEPTH + 1)))


@pytest.mark.parametrize("levels", [201, 995, 100_000])
def test_json_no_reader_takes_is_too_deep_not_a_recursion_error(levels: int) -> None:
    # jiter reads 200 levels, `json` about 1,000; the text says which request it answers.
    line = f'{{"jsonrpc":"2.0","result":{{"a":{arrays(levels)}}},"id":"agent-gateway-7"}}'
    for data in (line, line.encode()):
        with pytest.raises(TooDeep) as raised:
            read_json(data)
        assert raised.value.depth == levels + 2
        assert raised.value.answers() == "agent-gateway-7"
        assert raised.value.in_message().depth == levels + 1


def test_what_jiter_refuses_for_a_lone_surrogate_first_is_too_deep_all_the_same() -> None:
    line = '{"text":"bad\\ud800","a":' + arrays(5000) + "}"
    with pytest.raises(TooDeep) as raised:
        read_json(line)
    assert raised.value.depth == 5001
    assert raised.value.answers() is None  # no id: answers nothing


def test_the_top_level_of_text_too_deep_is_read_with_its_members_left_out() -> None:
    text = b'{"id":3,"method":"notifications/x","params":{"a":' + arrays(300).encode() + b"}}"
    found = text_too_deep(text)
    assert found.top == {"id": 3, "method": "notifications/x", "params": None}
    assert found.answers() is None  # a request or notification: no answer of ours
    brackets_in_a_string = b'{"id":true,"s":"]]]}}}[[[","r":' + arrays(250).encode() + b"}"
    found = text_too_deep(brackets_in_a_string)
    assert (found.depth, found.top) == (251, {"id": True, "s": "]]]}}}[[[", "r": None})
    assert found.answers() is None  # an id that is no JSON-RPC id
    assert text_too_deep(b"[[[[[ not json").top is None
