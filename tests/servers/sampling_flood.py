"""A hand-written MCP server over stdio whose tools ask for many completions in one call:
`python tests/servers/sampling_flood.py` (2025-11-25 handshake, one JSON-RPC message a line).

- `ask_each {"n", "max_tokens"}`: asks `n` times (`sampling/createMessage`, `maxTokens`
  as given), one after the other, each once the last is answered; its result is JSON:
  `{"answers": [texts], "refusals": [error messages]}`.
- `flood {"n", "max_tokens"}`: sends `n` requests at once and its result right after them,
  waiting for no answer (as a careless or hostile server does).
"""

from __future__ import annotations

import json
import sys
from typing import Any

_NUMBERS = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "max_tokens": {"type": "integer"}},
}
TOOLS = [
    {"name": "ask_each", "description": "asks one by one", "inputSchema": _NUMBERS},
    {"name": "flood", "description": "asks all at once", "inputSchema": _NUMBERS},
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def ask(request_id: str, text: str, max_tokens: int) -> None:
    content = {"type": "text", "text": text}
    params = {"messages": [{"role": "user", "content": content}], "maxTokens": max_tokens}
    send({"jsonrpc": "2.0", "id": request_id, "method": "sampling/createMessage", "params": params})


def result(call_id: object, text: str) -> None:
    send({"jsonrpc": "2.0", "id": call_id, "result": {"content": [{"type": "text", "text": text}]}})


def main() -> None:
    asking: dict[str, Any] = {}  # the `ask_each` call in progress
    for line in sys.stdin:
        message: dict[str, Any] = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if method is None:  # an answer to one of our requests
            if not asking:
                continue
            if "result" in message:
                asking["answers"].append(message["result"]["content"]["text"])
            else:
                asking["refusals"].append(message["error"]["message"])
            asking["left"] -= 1
            if asking["left"]:
                ask(f"ask-{asking['left']}", f"question {asking['left']}", asking["max_tokens"])
            else:
                outcome = {"answers": asking["answers"], "refusals": asking["refusals"]}
                result(asking["call"], json.dumps(outcome))
                asking = {}
        elif method == "initialize":
            version = message["params"].get("protocolVersion", "2025-11-25")
            info = {"name": "sampling-flood", "version": "1"}
            capabilities: dict[str, Any] = {"tools": {}}
            answer = {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info}
            send({"jsonrpc": "2.0", "id": message_id, "result": answer})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            arguments: dict[str, Any] = message["params"].get("arguments") or {}
            n, max_tokens = int(arguments.get("n", 1)), int(arguments.get("max_tokens", 100))
            if message["params"]["name"] == "flood":
                for i in range(n):
                    ask(f"flood-{i}", f"flood {i}", max_tokens)
                result(message_id, f"sent {n} sampling requests")
            else:
                asking = {"call": message_id, "left": n, "max_tokens": max_tokens}
                asking |= {"answers": [], "refusals": []}
                ask(f"ask-{n}", f"question {n}", max_tokens)
        elif message_id is not None:
            error = {"code": -32601, "message": f"no method {method}"}
            send({"jsonrpc": "2.0", "id": message_id, "error": error})


if __name__ == "__main__":
    main()
