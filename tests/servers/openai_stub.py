"""A scripted OpenAI-compatible model server on 127.0.0.1 that records what it was sent:
for tests where the model must sit behind a real HTTP port (other processes call it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OpenAIStub", "openai_stub"]


class OpenAIStub:
    """Answers `/v1/chat/completions` with the next scripted answer (a string is a text
    answer, a dict `{"name": ..., "arguments": {...}}` a tool call); `requests` holds every
    request body."""

    def __init__(self, answers: Sequence[str | dict[str, Any]]) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self._lock = threading.Lock()

    @property
    def spec(self) -> str:
        return f"openai-compatible:{self.url}#stub"

    def messages(self, index: int) -> list[dict[str, Any]]:
        return self.requests[index]["messages"]

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            scripted = self.answers[n - 1] if n <= len(self.answers) else "(script ended)"
        message: dict[str, Any] = {"role": "assistant", "content": scripted}
        if isinstance(scripted, dict):
            arguments = json.dumps(scripted["arguments"])
            call = {"name": scripted["name"], "arguments": arguments}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call_{n}", "type": "function", "function": call}],
            }
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "model": "stub",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10 * n, "completion_tokens": 5, "total_tokens": 10 * n + 5},
        }


@contextmanager
def openai_stub(answers: Sequence[str | dict[str, Any]]) -> Generator[OpenAIStub]:
    stub = OpenAIStub(answers)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            data = json.dumps(stub.answer(body)).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
