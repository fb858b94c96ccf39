"""A hand-written MCP server over stdio that answers what SDK servers would never send:
`python tests/servers/odd_stdio.py [EXTRA]` (2025-11-25 handshake, one JSON-RPC message a
line; `EXTRA`, a JSON array of further tool entries, listed after these).

Real servers written in other languages do send these. Its `tools/list` page holds:
- `echo`: a tool as it should be (answers `echo: {arguments as JSON}`);
- `either`: an `inputSchema` of `{"anyOf": [...]}` with no root `type`;
- `stringly`: an `inputSchema` of `{"type": "string"}`;
- an entry with no `name`;
- `weather`: an `outputSchema`, but it answers text alone (`21.5 degrees`);
- `weather_bad`: an `outputSchema` its structured content breaks (`{"temp": "warm"}`);
- `cut`: text with a lone UTF-16 surrogate (`bad\\ud800x`, what a JavaScript server sends
  when it cut a string in the middle of an emoji), written as JSON escapes;
- `plain`: text alone, no `isError` (nor any other key);
- `exclusive`: `a` or `b`, not both, said by a `not` at its schema's root (no model can be
  told that; the tool's own check answers a call with both);
- `deep`: a result nested `depth` levels (the result object one of them), by arrays in its
  structured content or, with `"in": "_meta"`, in the `_meta` of a text result; its answer's
  `id` comes last, as a TypeScript server writes it;
- `malformed`: a text block without its `text`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

_OBJECT = {"type": "object"}
_TEMP = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}
TOOLS: list[dict[str, Any]] = [
    {"name": "echo", "description": "echo the arguments", "inputSchema": _OBJECT},
    {
        "name": "either",
        "description": "an id or a url",
        "inputSchema": {
            "anyOf": [
                {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
                {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
            ]
        },
    },
    {"name": "stringly", "description": "not an object", "inputSchema": {"type": "string"}},
    {"description": "no name", "inputSchema": _OBJECT},
    {"name": "weather", "inputSchema": _OBJECT, "outputSchema": _TEMP},
    {"name": "weather_bad", "inputSchema": _OBJECT, "outputSchema": _TEMP},
    {"name": "cut", "inputSchema": _OBJECT},
    {"name": "plain", "inputSchema": _OBJECT},
    {"name": "deep", "inputSchema": _OBJECT},
    {"name": "malformed", "inputSchema": _OBJECT},
    {
        "name": "exclusive",
        "description": "a or b",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "not": {"required": ["a", "b"]},
        },
    },
]

_RESULTS: dict[str, dict[str, Any]] = {
    "weather": {"content": [{"type": "text", "text": "21.5 degrees"}]},
    "weather_bad": {
        "content": [{"type": "text", "text": "warm"}],
        "structuredContent": {"temp": "warm"},
    },
    "cut": {"content": [{"type": "text", "text": "bad\ud800x"}]},
    "plain": {"content": [{"type": "text", "text": "plain"}]},
    "malformed": {"content": [{"type": "text"}]},  # a text block without its text
}


_EXTRA: list[dict[str, Any]] = []


def _result(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name in _RESULTS:
        return _RESULTS[name]
    said = json.dumps(arguments, sort_keys=True)
    return {"content": [{"type": "text", "text": f"{name}: {said}"}], "isError": False}


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    method = message.get("method")
    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
    if method == "initialize":
        reply["result"] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "odd", "version": "1"},
        }
    elif method == "tools/list":
        reply["result"] = {"tools": TOOLS + _EXTRA}
    elif method == "tools/call":
        params = message["params"]
        reply["result"] = _result(params["name"], params.get("arguments") or {})
    elif method == "ping":
        reply["result"] = {}
    else:
        reply["error"] = {"code": -32601, "message": f"Method not found: {method}"}
    return reply


def _deep(message: dict[str, Any]) -> str | None:
    """The answer to a call of `deep`, as text (`json` cannot write it that deep)."""
    params: dict[str, Any] = message.get("params") or {}
    if message["method"] != "tools/call" or params["name"] != "deep":
        return None
    arguments: dict[str, Any] = params.get("arguments") or {}
    arrays = int(arguments["depth"]) - 2  # in the result, and in the object holding them
    nested = "[" * arrays + "1" + "]" * arrays
    text = '"content":[{"type":"text","text":"deep"}]'
    holder = "_meta" if arguments.get("in") == "_meta" else "structuredContent"
    result = f'{{{text},"{holder}":{{"a":{nested}}}}}'
    return f'{{"jsonrpc":"2.0","result":{result},"id":{json.dumps(message["id"])}}}'


def main() -> None:
    if len(sys.argv) > 1:
        _EXTRA.extend(json.loads(sys.argv[1]))
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification, or an answer to nothing we asked
        # ASCII JSON: the lone surrogate goes out as the escape `\ud800`, as a JS server's would.
        answer = _deep(message) or json.dumps(_answer(message))
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
