"""Tool calls written as text by small local models, recovered as calls."""

from __future__ import annotations

import pytest

from agent.models import parse_text_tool_calls
from agent.models.text_tool_calls import looks_like_tool_call

NAMES = {"get-sum", "echo"}


@pytest.mark.parametrize(
    ("content", "rest", "calls"),
    [
        pytest.param(
            '<tool_call>\n{"name": "get-sum", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
            "",
            [("get-sum", {"a": 1, "b": 2})],
            id="hermes-tag",
        ),
        pytest.param(
            'Both:\n<tool_call>{"name": "get-sum", "arguments": {"a": 1, "b": 2}}</tool_call>\n'
            '<tool_call>{"name": "echo", "arguments": {"message": "hi"}}</tool_call>',
            "Both:",
            [("get-sum", {"a": 1, "b": 2}), ("echo", {"message": "hi"})],
            id="two-tags",
        ),
        pytest.param(
            '<tool_call>{"name": "echo", "arguments": {"message": "unclosed"}}',
            "",
            [("echo", {"message": "unclosed"})],
            id="unclosed-tag",
        ),
        pytest.param(
            '```json\n{\n  "name": "get-sum",\n  "arguments": {\n    "a": 17,\n    "b": 25\n  }\n}\n```',
            "",
            [("get-sum", {"a": 17, "b": 25})],
            id="fenced-json-llamacpp-qwen",
        ),
        pytest.param(
            'I will call it.\n```\n[{"name": "echo", "arguments": {"message": "a"}},'
            ' {"name": "echo", "arguments": {"message": "b"}}]\n```',
            "I will call it.",
            [("echo", {"message": "a"}), ("echo", {"message": "b"})],
            id="fenced-list",
        ),
        pytest.param(
            '{"name": "get-sum", "arguments": {"a": 2, "b": 3}}',
            "",
            [("get-sum", {"a": 2, "b": 3})],
            id="bare-object",
        ),
        pytest.param(
            'Sure! {"name": "echo", "parameters": {"message": "x"}} Done.',
            "Sure!  Done.",
            [("echo", {"message": "x"})],
            id="bare-with-prose-and-parameters-key",
        ),
        pytest.param(
            '{"type": "function", "function": {"name": "echo", "arguments": "{\\"message\\": \\"s\\"}"}}',
            "",
            [("echo", {"message": "s"})],
            id="openai-shaped-with-string-arguments",
        ),
        pytest.param(
            '{{"name": "echo", "arguments": {"message": "doubled brace"}}',
            "",
            [("echo", {"message": "doubled brace"})],
            id="stray-brace-seen-from-qwen-1.5b",
        ),
        pytest.param(
            'Here: {"tool": {"name": "echo", "arguments": {"message": "m"}} oops',
            'Here: {"tool":  oops',
            [("echo", {"message": "m"})],
            id="inside-a-value-that-is-not-json",
        ),
    ],
)
def test_text_forms_become_calls(
    content: str, rest: str, calls: list[tuple[str, dict[str, object]]]
) -> None:
    remaining, found = parse_text_tool_calls(content, NAMES)
    assert remaining == rest
    assert [(call.name, call.arguments) for call in found] == calls
    assert all(call.id.startswith("call_") for call in found)
    assert len({call.id for call in found}) == len(found)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param('{"name": "rm_rf", "arguments": {"path": "/"}}', id="unknown-tool"),
        pytest.param('The config is {"name": "get-sum", "value": 3}.', id="no-arguments-key"),
        pytest.param("The answer is 42.", id="plain-text"),
        pytest.param('```json\n{"name": "get-sum", "arguments": {"a": 1\n```', id="broken-json"),
    ],
)
def test_other_text_stays_text(content: str) -> None:
    assert parse_text_tool_calls(content, NAMES) == (content, ())


def test_no_offered_tools_means_no_calls() -> None:
    content = '{"name": "get-sum", "arguments": {"a": 1, "b": 2}}'
    assert parse_text_tool_calls(content, set()) == (content, ())


def test_arguments_that_are_not_an_object_are_flagged() -> None:
    _, (call,) = parse_text_tool_calls('{"name": "echo", "arguments": "not json"}', NAMES)
    assert call.arguments == {}
    assert call.invalid_arguments == "not json"


TOOLS = {"calculator", "get_weather", "get-sum"}
SUM_SCHEMA = {
    "get-sum": {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "b": {"type": "number"},
            "note": {"type": "string"},
        },
    }
}
DEEPSEEK = (
    "<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>function"
    '<\uff5ctool\u2581sep\uff5c>calculator\n```json\n{"expression": "2+2"}\n```'
    "<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>"
)


@pytest.mark.parametrize(
    ("content", "rest", "calls"),
    [
        pytest.param(
            "<tool_call>\n<function=calculator>\n<parameter=expression>\n2+2\n</parameter>\n"
            "</function>\n</tool_call>",
            "",
            [("calculator", {"expression": "2+2"})],
            id="qwen3-coder-xml",
        ),
        pytest.param(
            "<tool_call>\n<function=get-sum>\n<parameter=a>\n17\n</parameter>\n<parameter=b>\n"
            "25.5\n</parameter>\n<parameter=note>\n42\n</parameter>\n</function>\n</tool_call>",
            "",
            [("get-sum", {"a": 17, "b": 25.5, "note": "42"})],
            id="qwen3-coder-xml-read-as-the-schema-says",
        ),
        pytest.param(
            '[TOOL_CALLS]calculator[ARGS]{"expression": "2+2"}',
            "",
            [("calculator", {"expression": "2+2"})],
            id="mistral-args",
        ),
        pytest.param(
            '[TOOL_CALLS]calculator[ARGS]{"expression": "2+2"}'
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
            "",
            [("calculator", {"expression": "2+2"}), ("get_weather", {"city": "Paris"})],
            id="mistral-args-two",
        ),
        pytest.param(
            '[calculator(expression="2+2")]',
            "",
            [("calculator", {"expression": "2+2"})],
            id="llama-pythonic",
        ),
        pytest.param(
            '<|python_start|>[get_weather(city="Paris", days=[1, 2]), calculator(expression='
            "'1+1')]<|python_end|>",
            "",
            [
                ("get_weather", {"city": "Paris", "days": [1, 2]}),
                ("calculator", {"expression": "1+1"}),
            ],
            id="llama4-pythonic-two",
        ),
        pytest.param(
            '```tool_code\ncalculator(expression="2+2")\n```',
            "",
            [("calculator", {"expression": "2+2"})],
            id="gemma-tool-code",
        ),
        pytest.param(
            '<function=calculator>{"expression": "2+2"}</function>',
            "",
            [("calculator", {"expression": "2+2"})],
            id="llama31-function-tag",
        ),
        pytest.param(DEEPSEEK, "", [("calculator", {"expression": "2+2"})], id="deepseek-tokens"),
        pytest.param(
            '<|python_tag|>{"name": "calculator", "parameters": {"expression": "2+2"}}<|eom_id|>',
            "",
            [("calculator", {"expression": "2+2"})],
            id="llama31-python-tag-leaves-no-markers",
        ),
        pytest.param(
            '[TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "2+2"}}]',
            "",
            [("calculator", {"expression": "2+2"})],
            id="old-mistral-leaves-no-marker",
        ),
    ],
)
def test_local_model_formats_become_calls(
    content: str, rest: str, calls: list[tuple[str, dict[str, object]]]
) -> None:
    remaining, found = parse_text_tool_calls(content, TOOLS, schemas=SUM_SCHEMA)
    assert remaining == rest
    assert [(call.name, call.arguments) for call in found] == calls
    assert all(call.invalid_arguments is None for call in found)
    assert len({call.id for call in found}) == len(found)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param('[calculator(expression=__import__("os").getcwd())]', id="not-a-literal"),
        pytest.param('[calculator(**{"expression": "2+2"})]', id="spread"),
        pytest.param("[calculator(2 + 2)]", id="positional"),
        pytest.param('[rm(path="/")]', id="unknown-tool"),
        pytest.param('[TOOL_CALLS]rm[ARGS]{"path": "/"}', id="unknown-tool-mistral"),
    ],
)
def test_pythonic_calls_are_read_never_run(content: str) -> None:
    assert parse_text_tool_calls(content, TOOLS) == (content, ())


@pytest.mark.parametrize(
    ("content", "looks"),
    [
        ('<tool_call>\n{"name": "calculator", "arguments": {\n</tool_call>', True),
        ("[TOOL_CALLS]calculator[ARGS]{oops", True),
        ("[calculator(2 + 2)]", True),
        ('<function=calculator>{"expression": ', True),
        ("The answer is 4.", False),
        ("Use calculator(x) for sums.", False),
        ("[1, 2, 3]", False),
    ],
)
def test_what_looks_like_a_tool_call(content: str, looks: bool) -> None:
    assert looks_like_tool_call(content, TOOLS) is looks


DS_BEGIN, DS_SEP, DS_END = (
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
)
LONG = 200_000
"""Characters of a degenerate answer: a reading that backtracks takes many minutes over it."""


@pytest.mark.parametrize(
    ("content", "calls"),
    [
        pytest.param(
            '<tool_call>{"name": "calculator",' + " " * LONG + "oops", [], id="tag-then-spaces"
        ),
        pytest.param('"name" ```json' + " " * LONG + "x", [], id="fence-then-spaces"),
        pytest.param("<function=" * (LONG // 10), [], id="function-tags-never-closed"),
        pytest.param(
            "<function=calculator>" + "<parameter=" * (LONG // 11),
            [("calculator", True)],
            id="parameter-tags-never-closed",
        ),
        pytest.param(
            DS_BEGIN + "function" + DS_SEP + "calculator" + " " * LONG + "x",
            [],
            id="deepseek-spaces-and-no-end",
        ),
        pytest.param(
            DS_BEGIN + "function" + DS_SEP + "calculator```json" + " " * LONG + "x" + DS_END,
            [("calculator", True)],
            id="deepseek-fence-never-closed",
        ),
        pytest.param(DS_BEGIN + "function" + DS_SEP + "a" * LONG, [], id="deepseek-long-name"),
    ],
)
def test_a_long_degenerate_answer_is_read_in_one_pass(
    content: str, calls: list[tuple[str, bool]]
) -> None:
    """Each of these took a backtracking pattern minutes to hours (the per-test timeout ends
    it): the reading is linear now, and what it finds is what it found before."""
    remaining, found = parse_text_tool_calls(content, TOOLS)
    assert [(call.name, call.invalid_arguments is not None) for call in found] == calls
    if not calls:
        assert remaining == content


DEEP = "[" * 3_000


@pytest.mark.parametrize(
    ("content", "looks"),
    [
        pytest.param('I will compute it: "name" ' + DEEP, False, id="bare-json"),
        pytest.param(
            '<tool_call>{"name": "calculator", "arguments": ' + DEEP + "</tool_call>",
            True,
            id="hermes-tag",
        ),
        pytest.param("[TOOL_CALLS]calculator[ARGS]" + DEEP, True, id="mistral-args"),
        pytest.param('"name" ' + "[" * LONG, False, id="bare-json-200-kB"),
        pytest.param('"name" ' + '{"a": ' * (LONG // 6), False, id="bare-objects-200-kB"),
    ],
)
def test_json_nested_deeper_than_python_reads_is_no_call(content: str, looks: bool) -> None:
    """Not a call: bare, it stays the answer; behind a call's marker it is a call the provider
    could not read (`looks_like_tool_call`), as any unreadable call is."""
    assert parse_text_tool_calls(content, TOOLS) == (content, ())
    assert looks_like_tool_call(content, TOOLS) is looks


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("<function=calculator>" + DEEP + "</function>", id="function-tag"),
        pytest.param(DS_BEGIN + "function" + DS_SEP + "calculator" + DEEP + DS_END, id="deepseek"),
        pytest.param(
            '{"name": "calculator", "arguments": {"a": ' + "[" * 300 + "]" * 300 + "}}",
            id="deeper-than-a-call-holds",
        ),
    ],
)
def test_arguments_nested_too_deep_are_flagged_as_invalid(content: str) -> None:
    remaining, (call,) = parse_text_tool_calls(content, TOOLS)
    assert remaining == ""
    assert call.name == "calculator"
    assert call.arguments == {}
    assert call.invalid_arguments is not None
    assert call.invalid_arguments.startswith(("[[[", '{"a": [[['))


def test_calls_held_in_a_json_value_are_taken_out_with_it() -> None:
    content = '{"tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}]} Done.'
    remaining, found = parse_text_tool_calls(content, TOOLS)
    assert [(call.name, call.arguments) for call in found] == [("calculator", {"expression": "1"})]
    assert remaining == "Done."
