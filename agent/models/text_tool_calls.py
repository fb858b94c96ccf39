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
an answer stays text, and so does JSON nested deeper than Python reads. The recognised text,
and the format's marker tokens around it, are removed from the content. `looks_like_tool_call`
tells text that has a format's marker yet yielded no call, which is not an answer either.

This runs on the event loop over whatever the model wrote, so every step is linear in the
text: no pattern lets a run (of spaces, of a name) backtrack against a lazy `.*?` (bodies are
stripped in code instead), and JSON is read once per stretch of text (see `_bare_json`).
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

_TAGGED = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json|tool_call|tool_code)?[ \t]*+\n?(.*?)```", re.DOTALL)
_CODE_FENCE = re.compile(r"```(?:tool_code|python)[ \t]*\n(.*?)```", re.DOTALL)
# A name stops at `<`, so it cannot run on through the next tag when no `>` comes.
_FUNCTION_TAG = re.compile(r"<function=([^<>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAMETER = re.compile(
    r"<parameter=([^<>\s]+)>\n?(.*?)\n?(?:</parameter>|(?=<parameter=)|$)", re.DOTALL
)
_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.:-]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]\s*")
_BAR = "\uff5c"  # DeepSeek's tokens are written with full-width bars
_DEEPSEEK_BEGIN = f"<{_BAR}tool\u2581call\u2581begin{_BAR}>"
_DEEPSEEK_SEP = f"<{_BAR}tool\u2581sep{_BAR}>"
_DEEPSEEK_END = f"<{_BAR}tool\u2581call\u2581end{_BAR}>"
_DEEPSEEK_HEAD = re.compile(f"(?:function)?{_DEEPSEEK_SEP}" + r"\s*([\w.:-]+)")
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
    spans: list[tuple[int, int]] = []
    for match in _FUNCTION_TAG.finditer(content):
        name, body = match.group(1), match.group(2).strip()
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
        spans.append(match.span())
    return _cut(content, spans), calls


def _parameter_value(value: str, schema: Mapping[str, Any]) -> Any:
    """A `<parameter>` value: text, unless its schema declares another type and the text is
    JSON of it (`42`, `true`, `[1, 2]`)."""
    declared = schema.get("type")
    kinds = set(declared) if is_arr(declared) else {declared}
    if "string" in kinds or not kinds - {None}:
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python reads
        return value


def _mistral_args(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """`[TOOL_CALLS]NAME[ARGS]{...}`, once per call."""
    if "[ARGS]" not in content:
        return content, []
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    at = 0
    while match := _MISTRAL_ARGS.search(content, at):
        read = _read_json(content, match.end())
        if not isinstance(read, tuple):
            at = match.end()
            continue
        arguments, at = read
        if match.group(1) in names:
            calls.append(tool_call(new_call_id(), match.group(1), arguments))
            spans.append((match.start(), at))
    return _cut(content, spans), calls


def _deepseek_calls(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """DeepSeek's call-begin token, `function`, its separator token, the name and the
    arguments (fenced as ```json or not), then its call-end token. A call runs to the first end
    token, and not past the next begin token (an unfinished call); each is found once."""
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    begin = content.find(_DEEPSEEK_BEGIN)
    end = -1
    while begin >= 0:
        after = begin + len(_DEEPSEEK_BEGIN)
        if end < after:
            end = content.find(_DEEPSEEK_END, after)
            if end < 0:
                break
        following = content.find(_DEEPSEEK_BEGIN, after)
        if 0 <= following < end:
            begin = following
            continue
        head = _DEEPSEEK_HEAD.match(content, after, end)
        if head and head.group(1) in names:
            arguments = _unfenced(content[head.end() : end])
            calls.append(tool_call(new_call_id(), head.group(1), arguments))
            spans.append((begin, end + len(_DEEPSEEK_END)))
        begin = following
    return _cut(content, spans), calls


def _unfenced(text: str) -> str:
    """`text` stripped, and out of a ```json fence if it is in one."""
    text = text.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        return text[3:-3].removeprefix("json").strip()
    return text


def _json_blocks(content: str, names: Collection[str], schemas: Schemas) -> Found:
    """Hermes tags, then fenced blocks, holding JSON calls."""
    if '"name"' not in content:
        return content, []
    for pattern in (_TAGGED, _FENCED):
        calls: list[ToolCall] = []
        spans: list[tuple[int, int]] = []
        for match in pattern.finditer(content):
            found = _calls_in(match.group(1), names)
            if found:
                calls.extend(found)
                spans.append(match.span())
        if calls:
            return _cut(content, spans), calls
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
    """JSON values anywhere in the text (e.g. after a short preamble) that are calls or hold
    them (a list of calls, `{"tool_calls": [...]}`), each taken out whole.

    Each stretch of text is read once: after a JSON value, reading goes on past its end; where
    the text stops being JSON, from that point, once the values that closed before it (a call
    inside a stray `{`) are looked at.
    """
    if '"name"' not in content:
        return content, ()
    calls: list[ToolCall] = []
    spans: list[tuple[int, int]] = []
    index = 0
    while opening := _OPENING.search(content, index):
        start = opening.start()
        read = _read_json(content, start)
        if isinstance(read, tuple):
            found = _calls_within(read[0], tool_names)
            if found:
                calls.extend(found)
                spans.append((start, read[1]))
            index = read[1]
            continue
        closed, index = _closed_before(content, start, read)
        for inner_start in closed:
            inner = _read_json(content, inner_start)
            if isinstance(inner, tuple) and (found := _calls_within(inner[0], tool_names)):
                calls.extend(found)
                spans.append((inner_start, inner[1]))
        index = max(index, start + 1)
    if not calls:
        return content, ()
    return _leftover(_cut(content, spans)), tuple(calls)


_OPENING = re.compile(r'\{(?=\s*")|\[(?=\s*\{)')
"""Where a call, or a list of them, can begin: `{` before a key, `[` before an object."""
_STRUCTURE = re.compile(r'[{}\[\]"\\]')
_TOO_DEEP = -1
"""What `_read_json` returns for JSON nested deeper than Python reads."""
_DEEPEST = 200
"""How deep `_closed_before` follows JSON Python could not read before it gives up on it."""
_WINDOW = 256


def _read_json(content: str, start: int) -> tuple[Any, int] | int:
    """The JSON value at `start` and where it ends; else where reading it failed, or
    `_TOO_DEEP`.

    The value is read from a window of the text that grows only while the value runs on past
    it: a failure costs what was read, where reading all of `content` would cost its length
    up to `start` too (`JSONDecodeError` counts the lines before the failure).
    """
    size = _WINDOW
    while True:
        window = content[start : start + size]
        try:
            value, end = _DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            cut = start + size < len(content)
            if cut and (exc.pos >= len(window) - 16 or exc.msg.startswith("Unterminated string")):
                size *= 2  # it failed where the window ends (a cut number or string): read on
                continue
            return start + exc.pos
        except RecursionError:
            return _TOO_DEEP
        if end == len(window) and start + size < len(content):
            size *= 2  # a number may go on past the window (`[ARGS]12` of `[ARGS]123`)
            continue
        return value, start + end


_DECODER = json.JSONDecoder()


def _closed_before(content: str, start: int, stop: int) -> tuple[list[int], int]:
    """Where the outermost JSON containers that open and close between `start` and `stop`
    begin (the text from `start` read as JSON as far as `stop`, so brackets in its strings are
    not containers), and where to read on: `stop`; for `_TOO_DEEP`, where the nesting passes
    `_DEEPEST`, else the end of the text."""
    end = len(content) if stop == _TOO_DEEP else stop
    closed: list[int] = []
    opened: list[int] = []
    in_string = False
    escaped_at = -1
    for mark in _STRUCTURE.finditer(content, start, end):
        at, char = mark.start(), mark.group()
        if in_string:
            if char == "\\" and at != escaped_at:
                escaped_at = at + 1
            elif char == '"' and at != escaped_at:
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            opened.append(at)
            if stop == _TOO_DEEP and len(opened) > _DEEPEST:
                return closed, at
        elif char in "}]" and opened:
            begin = opened.pop()
            while closed and closed[-1] > begin:
                closed.pop()  # inside the container that just closed
            closed.append(begin)
    return closed, end


def _cut(content: str, spans: list[tuple[int, int]]) -> str:
    """`content` without `spans` (in order, apart), in one pass."""
    pieces: list[str] = []
    at = 0
    for start, end in spans:
        pieces.append(content[at:start])
        at = end
    pieces.append(content[at:])
    return "".join(pieces)


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
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python reads
        return []
    candidates = value if is_arr(value) else [value]
    calls = (_call_of(item, tool_names) for item in candidates)
    return [call for call in calls if call is not None]


def _calls_within(value: Any, tool_names: Collection[str]) -> list[ToolCall]:
    """The calls `value` is or holds, at any depth, in the order written (not walked
    recursively: the value may nest as deep as Python reads)."""
    calls: list[ToolCall] = []
    pending = [value]
    while pending:
        item = pending.pop()
        call = _call_of(item, tool_names)
        if call is not None:
            calls.append(call)
        elif is_obj(item):
            pending.extend(reversed(item.values()))
        elif is_arr(item):
            pending.extend(reversed(item))
    return calls


def _call_of(value: Any, tool_names: Collection[str]) -> ToolCall | None:
    item = obj(value)
    if is_obj(item.get("function")):
        item = obj(item["function"])  # {"type": "function", "function": {...}}
    name = item.get("name")
    if not isinstance(name, str) or name not in tool_names:
        return None
    if "arguments" in item:
        return tool_call(new_call_id(), name, item["arguments"])
    if "parameters" in item:
        return tool_call(new_call_id(), name, item["parameters"])
    return None
