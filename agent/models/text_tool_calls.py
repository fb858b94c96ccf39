"""Tool calls written as text, recovered as real calls.

Local models behind OpenAI-compatible servers started without their tool parser answer a tool
request in `content` rather than `tool_calls`, in one of these forms:

- Hermes/Qwen tags: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeatable;
- Qwen3-Coder's XML: `<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function>
  </tool_call>`, and Llama 3.1's `<function=NAME>{...}</function>`;
- Mistral's `[TOOL_CALLS]NAME[ARGS]{...}` (newer models) and `[TOOL_CALLS] [{...}]` (older);
- DeepSeek's `<|tool▁call▁begin|>function<|tool▁sep|>NAME` and its JSON arguments (its
  bars are U+FF5C, full-width);
- Llama 3.2/4's pythonic list, `[NAME(key="value", ...)]` (Gemma's ```` ```tool_code ````
  block too): only keyword arguments whose values are literals, read with `ast.literal_eval`,
  never run;
- a fenced block: ```` ```json {"name": ..., "arguments": {...}} ``` ```` (or a list of them);
- a bare JSON object (or list) with `name` and `arguments` (or `parameters`), Llama 3.1's
  `<|python_tag|>` form among them.

A candidate becomes a call only if its name is one of the offered tools, so ordinary JSON in
an answer stays text. The recognised text, and the format's marker tokens around it, are
removed from the content. `looks_like_tool_call` tells text that has a format's marker yet
yielded no call, which is not an answer either.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from ..messages import ToolCall
from ._json import is_arr, is_obj, new_call_id, obj, tool_call

__all__ = ["CallSignFilter", "looks_like_tool_call", "parse_text_tool_calls"]

Schemas = Mapping[str, Mapping[str, Any]]
"""Tools' input schemas by name: a `<parameter=...>` value is read as the type declared."""

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json|tool_call|tool_code)?[ \t]*\n?(.*?)```", re.DOTALL)
_CODE_FENCE = re.compile(r"```(?:tool_code|python)[ \t]*\n(.*?)```", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>\s*(.*?)\s*(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(
    r"<parameter=([^>\s]+)>\n?(.*?)\n?(?:</parameter>|(?=<parameter=)|$)", re.DOTALL
)
_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.:-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]\s*")
_BAR = "\uff5c"  # DeepSeek's tokens are written with full-width bars
_DEEPSEEK_BEGIN = f"<{_BAR}tool\u2581call\u2581begin{_BAR}>"
_DEEPSEEK_SEP = f"<{_BAR}tool\u2581sep{_BAR}>"
_DEEPSEEK_END = f"<{_BAR}tool\u2581call\u2581end{_BAR}>"
_DEEPSEEK_CALL = re.compile(
    f"{_DEEPSEEK_BEGIN}(?:function)?{_DEEPSEEK_SEP}"
    r"\s*([\w.:-]+)\s*(?:```(?:json)?\s*(.*?)\s*```|(.*?))\s*"
    f"{_DEEPSEEK_END}",
    re.DOTALL,
)
_MARKERS = (
    "<tool_call>",
    "</tool_call>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "[TOOL_CALLS]",
    f"<{_BAR}tool\u2581calls\u2581begin{_BAR}>",
    f"<{_BAR}tool\u2581calls\u2581end{_BAR}>",
)
"""Tokens that only frame a call: left over once it is taken out, they are not an answer."""
_CALL_SIGNS = ("<tool_call>", "<function=", "[TOOL_CALLS]", _DEEPSEEK_BEGIN, "<|python_tag|>")


def parse_text_tool_calls(
    content: str, tool_names: Collection[str], *, schemas: Schemas | None = None
) -> tuple[str, tuple[ToolCall, ...]]:
    """Split `content` into remaining text and the tool calls written in it.

    Returns `(content, ())` unchanged when no form yields a call to an offered tool.
    """
    if not tool_names or not content.strip():
        return content, ()
    for parse in (_function_tags, _mistral_args, _deepseek_calls, _json_blocks, _pythonic_text):
        remaining, calls = parse(content, tool_names, schemas or {})
        if calls:
            return _leftover(remaining), tuple(calls)
    return _bare_json(content, tool_names)


def looks_like_tool_call(content: str, tool_names: Collection[str]) -> bool:
    """Whether `content` has a tool-call format's marker (or starts as a pythonic call to an
    offered tool): text `parse_text_tool_calls` could not read, but no answer either."""
    if any(sign in content for sign in _CALL_SIGNS):
        return True
    head = content.strip().removeprefix("<|python_start|>").lstrip("[ \n")
    return any(head.startswith(f"{name}(") for name in tool_names)


@dataclass(slots=True)
class CallSignFilter:
    """Passes on streamed text up to the first sign of a call written as text
    (`<tool_call>`, `[TOOL_CALLS]`, ...): what follows is a call, read once the answer is
    whole, not words for the reader. A sign split across deltas is held until it is known;
    `last` (the answer's last delta) lets go of what was held."""

    _held: str = ""
    _calling: bool = False

    def feed(self, delta: str, *, last: bool = False) -> str:
        if self._calling:
            return ""
        seen = self._held + delta
        found = [at for at in (seen.find(sign) for sign in _CALL_SIGNS) if at >= 0]
        if found:
            self._calling, self._held = True, ""
            return seen[: min(found)]
        keep = 0 if last else _sign_begun(seen)
        self._held = seen[len(seen) - keep :] if keep else ""
        return seen[: len(seen) - keep]


def _sign_begun(text: str) -> int:
    """How many of `text`'s last characters may begin a call sign."""
    for size in range(min(len(text), max(map(len, _CALL_SIGNS)) - 1), 0, -1):
        tail = text[-size:]
        if any(sign.startswith(tail) for sign in _CALL_SIGNS):
            return size
    return 0


Found = tuple[str, list[ToolCall]]


def _function_tags(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """`<function=NAME>` with a JSON object or `<parameter=KEY>` blocks inside."""
    if "<function=" not in content:
        return content, []
    calls: list[ToolCall] = []
    remaining = content
    for match in _FUNCTION_TAG.finditer(content):
        name, body = match.group(1), match.group(2)
        if name not in names:
            continue
        parameters = _PARAMETER.findall(body)
        if parameters:
            properties = obj(obj(schemas.get(name)).get("properties"))
            arguments: Any = {
                key: _parameter_value(value, obj(properties.get(key))) for key, value in parameters
            }
        else:
            arguments = body if body else None
        calls.append(tool_call(new_call_id(), name, arguments))
        remaining = remaining.replace(match.group(0), "", 1)
    return remaining, calls


def _parameter_value(value: str, schema: Mapping[str, Any]) -> Any:
    """A `<parameter>` value: text, unless its schema declares another type and the text is
    JSON of it (`42`, `true`, `[1, 2]`)."""
    declared = schema.get("type")
    kinds = set(declared) if is_arr(declared) else {declared}
    if "string" in kinds or not kinds - {None}:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _mistral_args(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """`[TOOL_CALLS]NAME[ARGS]{...}`, once per call."""
    if "[ARGS]" not in content:
        return content, []
    decoder = json.JSONDecoder()
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    for match in _MISTRAL_ARGS.finditer(content):
        try:
            arguments, end = decoder.raw_decode(content, match.end())
        except ValueError:
            continue
        if match.group(1) in names:
            calls.append(tool_call(new_call_id(), match.group(1), arguments))
            spans.append((match.start(), end))
    return _cut(content, spans), calls


def _deepseek_calls(content: str, names: Collection[str], schemas: Schemas) -> Found:
    if _DEEPSEEK_BEGIN not in content:
        return content, []
    calls: list[ToolCall] = []
    remaining = content
    for match in _DEEPSEEK_CALL.finditer(content):
        name, arguments = match.group(1), match.group(2) or match.group(3) or ""
        if name in names:
            calls.append(tool_call(new_call_id(), name, arguments.strip()))
            remaining = remaining.replace(match.group(0), "", 1)
    return remaining, calls


def _json_blocks(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """Hermes tags, then fenced blocks, holding JSON calls."""
    if '"name"' not in content:
        return content, []
    for pattern in (_TAGGED, _FENCED):
        calls: list[ToolCall] = []
        remaining = content
        for match in pattern.finditer(content):
            found = _calls_in(match.group(1), names)
            if found:
                calls.extend(found)
                remaining = remaining.replace(match.group(0), "", 1)
        if calls:
            return remaining, calls
    return content, []


def _pythonic_text(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """The whole content as a pythonic call list, or a ```tool_code``` block holding one."""
    whole = content.strip().removeprefix("<|python_start|>").removesuffix("<|python_end|>")
    calls = _pythonic(whole, names)
    if calls:
        return "", calls
    for match in _CODE_FENCE.finditer(content):
        calls = _pythonic(match.group(1), names)
        if calls:
            return content.replace(match.group(0), "", 1), calls
    return content, []


def _pythonic(source: str, names: Collection[str]) -> list[ToolCall]:
    """`[f(a="x"), g(b=1)]` or `f(a="x")` as calls, if every call names an offered tool with
    keyword arguments whose values are literals; else none. Nothing is evaluated."""
    source = source.strip()
    if "(" not in source or not any(name in source for name in names):
        return []
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    nodes = tree.body.elts if isinstance(tree.body, ast.List) else [tree.body]
    calls: list[ToolCall] = []
    for node in nodes:
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in names
            and not node.args
        ):
            return []
        arguments: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:  # **spread: not a literal
                return []
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                return []
        try:  # tuples become lists; sets, bytes and complex numbers are no JSON
            as_json = json.loads(json.dumps(arguments))
        except (TypeError, ValueError):
            return []
        calls.append(tool_call(new_call_id(), node.func.id, as_json))
    return calls


def _bare_json(content: str, tool_names: Collection[str]) -> tuple[str, tuple[ToolCall, ...]]:
    """JSON objects (or a list of them) anywhere in the text, e.g. after a short preamble."""
    if '"name"' not in content:
        return content, ()
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
    return _leftover(_cut(content, spans)), tuple(calls)


def _cut(content: str, spans: list[tuple[int, int]]) -> str:
    for start, end in reversed(spans):
        content = content[:start] + content[end:]
    return content


def _leftover(text: str) -> str:
    """What is left around the calls: the formats' marker tokens and stray brackets and fences
    (a small model once wrote `{{"name": ...}}`) are not an answer."""
    for marker in _MARKERS:
        text = text.replace(marker, "")
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
