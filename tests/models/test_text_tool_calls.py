"""Tool calls written as text by small local models, recovered as calls."""

from __future__ import annotations

import pytest

from agent.models import parse_text_tool_calls

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
