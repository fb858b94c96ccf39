"""A recording fake provider on `httpx.MockTransport`, and helpers to build real-format answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import httpx

from agent.messages import AssistantMessage
from agent.models import RetryPolicy

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]
"""A queued answer: a response, an exception to raise, or a response built from the request."""


class FakeProvider:
    """Answers each request with the next queued response (or raises the queued exception)
    and records every request it was sent."""

    def __init__(self, *answers: Answer) -> None:
        self._answers = list(answers)
        self.requests: list[httpx.Request] = []

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self._answers:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer if isinstance(answer, httpx.Response) else answer(request)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self._handle))

    def body(self, index: int = -1) -> Any:
        return json.loads(self.requests[index].content)


@dataclass
class Sleeps:
    """Stands in for `anyio.sleep`: records the delays, never waits."""

    delays: list[float] = field(default_factory=list[float])

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def retry_policy(sleeps: Sleeps, **overrides: Any) -> RetryPolicy:
    return RetryPolicy(sleep=sleeps, random=lambda: 0.5, now=lambda: NOW, **overrides)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


def sse_response(events: Sequence[tuple[str | None, Any]], *, chunk: int = 7) -> httpx.Response:
    """A `text/event-stream` answer, delivered in small chunks so that lines and events are
    split across reads as they are on a real network."""
    text = ""
    for name, data in events:
        if name is not None:
            text += f"event: {name}\n"
        text += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
    raw = text.encode()

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), chunk):
            yield raw[start : start + chunk]

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())


def raw_of(message: AssistantMessage) -> dict[str, Any]:
    """The provider payload of `message`, which the HTTP providers always keep as a dict."""
    assert isinstance(message.raw, dict)
    return cast(dict[str, Any], message.raw)


class Tokens:
    """An `on_token` callback that records what it was given."""

    def __init__(self) -> None:
        self.received: list[str] = []

    async def __call__(self, delta: str) -> None:
        self.received.append(delta)
