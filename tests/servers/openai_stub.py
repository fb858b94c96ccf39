"""A scripted OpenAI-compatible model server on 127.0.0.1 that records what it was sent:
for tests where the model must sit behind a real HTTP port (other processes call it)."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CutOff", "OpenAIStub", "Refusal", "openai_stub"]


@dataclass(frozen=True)
class Refusal:
    """A scripted answer that is an HTTP error, with OpenAI's error body."""

    status: int
    message: str

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": "invalid_request_error", "code": None}}


@dataclass(frozen=True)
class CutOff:
    """A scripted streamed answer whose stream ends after `text`: no finish reason, no
    `[DONE]`, as a connection lost mid-answer ends it."""

    text: str


Answer = str | dict[str, Any] | list[dict[str, Any]] | Refusal | CutOff
"""A text answer, a tool call `{"name": ..., "arguments": {...}}`, several at once, an
HTTP error, or a stream cut off."""


class OpenAIStub:
    """Answers `/v1/chat/completions` with the next scripted answer (a string is a text
    answer, a dict `{"name": ..., "arguments": {...}}` a tool call, a list of them calls made
    at once, a `Refusal` an HTTP error, a `CutOff` a stream that breaks); `requests` holds
    every request body.

    With `hold_at=n`, the n-th request is not answered (`holding` is set) until `release()`:
    a test kills the caller while its model call is in flight. With `context_window`,
    `GET /v1/models` lists the model with it, as vLLM's `max_model_len`. With `reasoning`,
    every answer carries it as `reasoning_content` (DeepSeek's, llama.cpp's)."""

    def __init__(
        self,
        answers: Sequence[Answer],
        *,
        hold_at: int | None = None,
        context_window: int | None = None,
        reasoning: str | None = None,
    ) -> None:
        self.answers = list(answers)
        self.context_window = context_window
        self.reasoning = reasoning
        self.requests: list[dict[str, Any]] = []
        self.url = ""
        self.holding = threading.Event()
        self._hold_at = hold_at
        self._released = threading.Event()
        self._lock = threading.Lock()

    def release(self) -> None:
        self._released.set()

    @property
    def spec(self) -> str:
        return f"openai-compatible:{self.url}#stub"

    def messages(self, index: int) -> list[dict[str, Any]]:
        return self.requests[index]["messages"]

    def answer(self, body: dict[str, Any]) -> dict[str, Any] | Refusal | CutOff:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            scripted = self.answers[n - 1] if n <= len(self.answers) else "(script ended)"
        if n == self._hold_at:
            self.holding.set()
            self._released.wait()
        if isinstance(scripted, Refusal | CutOff):
            return scripted
        message: dict[str, Any] = {"role": "assistant", "content": scripted}
        if isinstance(scripted, dict | list):
            calls = scripted if isinstance(scripted, list) else [scripted]
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}" if len(calls) == 1 else f"call_{n}_{i}",
                        "type": "function",
                        "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
                    }
                    for i, c in enumerate(calls, 1)
                ],
            }
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "model": "stub",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10 * n, "completion_tokens": 5, "total_tokens": 10 * n + 5},
        }


@contextmanager
def openai_stub(
    answers: Sequence[Answer],
    *,
    hold_at: int | None = None,
    context_window: int | None = None,
    reasoning: str | None = None,
) -> Generator[OpenAIStub]:
    stub = OpenAIStub(answers, hold_at=hold_at, context_window=context_window, reasoning=reasoning)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/v1/models" or stub.context_window is None:
                self.send_error(404)
                return
            entry = {"id": "stub", "object": "model", "max_model_len": stub.context_window}
            data = json.dumps({"object": "list", "data": [entry]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            answer = stub.answer(body)
            if isinstance(answer, Refusal):
                data = json.dumps(answer.body()).encode()
                self.send_response(answer.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if isinstance(answer, CutOff):
                delta = {"role": "assistant", "content": answer.text}
                chunk: dict[str, Any] = {
                    "id": "chatcmpl-cut",
                    "object": "chat.completion.chunk",
                    "model": "stub",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                }
                data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
                kind = "text/event-stream"
            elif body.get("stream"):
                data = b"".join(
                    b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in _chunks(answer)
                )
                data += b"data: [DONE]\n\n"
                kind = "text/event-stream"
            else:
                data = json.dumps(answer).encode()
                kind = "application/json"
            self.send_response(200)
            self.send_header("content-type", kind)
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
        stub.release()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _chunks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole answer as the stream of `chat.completion.chunk`s that carries it."""
    choice = answer["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("reasoning_content"):
        delta["reasoning_content"] = message["reasoning_content"]
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    base = {"id": answer["id"], "object": "chat.completion.chunk", "model": answer["model"]}
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {**base, "choices": [], "usage": answer["usage"]},
    ]
