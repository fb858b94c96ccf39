"""A scripted OpenAI Responses API server on 127.0.0.1 that records what it was sent: for tests
where `openai-responses:` models run in other processes (`OPENAI_BASE_URL` pointing here), or
name it (`openai-responses:URL#MODEL`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .openai_stub import Refusal

__all__ = ["ResponsesStub", "responses_stub"]


@dataclass
class ResponsesStub:
    """Answers `POST /v1/responses` with the next scripted list of output items, as a whole
    response or, when asked to stream, as its events (a `Refusal`: that HTTP error);
    `requests` holds every request body, `seen` each request's query and `Authorization`."""

    outputs: Sequence[list[dict[str, Any]] | Refusal]
    requests: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    seen: list[tuple[str, str | None]] = field(default_factory=list[tuple[str, str | None]])
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: dict[str, Any]) -> dict[str, Any] | Refusal:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
        output = self.outputs[n - 1] if n <= len(self.outputs) else []
        if isinstance(output, Refusal):
            return output
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1767268800 + n,
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "model": "gpt-5-mini-2025-08-07",
            "output": output,
            "usage": {
                "input_tokens": 10 * n,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 3},
                "total_tokens": 10 * n + 5,
            },
        }


def _events(response: dict[str, Any]) -> bytes:
    """`response` as the events that stream it: each item done, text as deltas, the end."""
    events: list[dict[str, Any]] = []
    for index, item in enumerate(response["output"]):
        events += [
            {"type": "response.output_text.delta", "output_index": index, "delta": part["text"]}
            for part in item.get("content", [])
            if part.get("type") == "output_text"
        ]
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': n})}\n\n".encode()
        for n, event in enumerate(events)
    )


@contextmanager
def responses_stub(
    outputs: Sequence[list[dict[str, Any]] | Refusal],
) -> Generator[ResponsesStub]:
    stub = ResponsesStub(outputs)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            path = urlsplit(self.path)
            if path.path != "/v1/responses":
                self.send_error(404)
                return
            stub.seen.append((path.query, self.headers.get("authorization")))
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            response = stub.answer(body)
            status = 200
            if isinstance(response, Refusal):
                data, kind = json.dumps(response.body()).encode(), "application/json"
                status = response.status
            elif body.get("stream"):
                data, kind = _events(response), "text/event-stream"
            else:
                data, kind = json.dumps(response).encode(), "application/json"
            self.send_response(status)
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
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
