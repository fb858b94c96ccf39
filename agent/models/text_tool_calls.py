"""Tool calls written as text, recovered as real calls.

Small local models behind OpenAI-compatible servers often answer a tool request in `content`
rather than `tool_calls`, in one of three forms:

- Hermes/Qwen tags: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeatable;
- a fenced block: ```` ```json {"name": ..., "arguments": {...}} ``` ```` (or a list of them);
- a bare JSON object (or list) with `name` and `arguments` (or `parameters`).

A candidate becomes a call only if its name is one of the offered tools, so ordinary JSON in
an answer stays text. The recognised text is removed from the content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from ..messages import ToolCall
from ._json import is_arr, is_obj, new_call_id, obj, tool_call

__all__ = ["parse_text_tool_calls"]

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json|tool_call|tool_code)?[ \t]*\n?(.*?)```", re.DOTALL)


def parse_text_tool_calls(
    content: str, tool_names: Collection[str]
) -> tuple[str, tuple[ToolCall, ...]]:
    """Split `content` into remaining text and the tool calls written in it.

    Returns `(content, ())` unchanged when no form yields a call to an offered tool.
    """
    if not tool_names or '"name"' not in content:
        return content, ()
    for pattern in (_TAGGED, _FENCED):
        calls: list[ToolCall] = []
        remaining = content
        for match in pattern.finditer(content):
            found = _calls_in(match.group(1), tool_names)
            if found:
                calls.extend(found)
                remaining = remaining.replace(match.group(0), "", 1)
        if calls:
            return _leftover(remaining), tuple(calls)
    return _bare_json(content, tool_names)


def _bare_json(content: str, tool_names: Collection[str]) -> tuple[str, tuple[ToolCall, ...]]:
    """JSON objects (or a list of them) anywhere in the text, e.g. after a short preamble."""
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    index = 0
    while True:
        starts = [i for i in (content.find("{", index), content.find("[", index)) if i >= 0]
        if not starts:
            break
        start = min(starts)
        try:
            value, end = decoder.raw_decode(content, start)
        except ValueError:
            index = start + 1
            continue
        found = _calls_from_value(value, tool_names)
        if found:
            calls.extend(found)
            spans.append((start, end))
        index = end if found else start + 1
    if not calls:
        return content, ()
    remaining = content
    for start, end in reversed(spans):
        remaining = remaining[:start] + remaining[end:]
    return _leftover(remaining), tuple(calls)


def _leftover(text: str) -> str:
    """What is left around the calls; stray brackets and fences (a small model once wrote
    `{{"name": ...}}`) are not an answer."""
    text = text.strip()
    return "" if not text.strip("{}[]`\n\t ") else text


def _calls_in(body: str, tool_names: Collection[str]) -> list[ToolCall]:
    try:
        value: Any = json.loads(body)
    except ValueError:
        return []
    return _calls_from_value(value, tool_names)


def _calls_from_value(value: Any, tool_names: Collection[str]) -> list[ToolCall]:
    candidates = value if is_arr(value) else [value]
    calls: list[ToolCall] = []
    for candidate in candidates:
        item = obj(candidate)
        if is_obj(item.get("function")):
            item = obj(item["function"])  # {"type": "function", "function": {...}}
        name = item.get("name")
        if not isinstance(name, str) or name not in tool_names:
            continue
        if "arguments" in item:
            arguments = item["arguments"]
        elif "parameters" in item:
            arguments = item["parameters"]
        else:
            continue
        calls.append(tool_call(new_call_id(), name, arguments))
    return calls
