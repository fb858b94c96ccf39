"""The shared pieces: Retry-After, backoff, SSE decoding, the public surface."""

from __future__ import annotations

from datetime import timedelta

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import agent.models
from agent import UserMessage
from agent.models import OpenAICompatibleModel, RetryPolicy, new_http_client
from agent.models._http import Secret, public_url
from agent.models._sse import SSEDecoder, SSEEvent
from agent.models.retry import parse_retry_after
from tests.servers.asgi import serve_on_loopback

from .support import NOW


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "-4"}, None),  # not a wait: the backoff applies
        ({"retry-after": "0"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "-250", "retry-after": "9"}, 9.0),
        ({"retry-after": "Thu, 01 Jan 2026 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Thu, 01 Jan 2026 11:59:00 GMT"}, None),  # gone by: a skewed clock
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers, NOW) == seconds


def test_backoff_grows_is_capped_and_jittered() -> None:
    low = RetryPolicy(random=lambda: 0.0, max_delay=4.0)
    high = RetryPolicy(random=lambda: 1.0, max_delay=4.0)
    assert [low.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert [high.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert RetryPolicy().now() - NOW > timedelta(0)


def test_retryable_statuses() -> None:
    assert [
        s
        for s in (400, 401, 404, 408, 409, 422, 429, 500, 503, 529)
        if RetryPolicy.retryable_status(s)
    ] == [408, 429, 500, 503, 529]


def test_sse_decoder_handles_multiline_data_comments_and_names() -> None:
    decoder = SSEDecoder()
    lines = [
        ": keep-alive",
        "event: message_start",
        'data: {"a":',
        "data: 1}",
        "",
        "data:x",
        "",
        "",
    ]
    events = [e for e in map(decoder.feed, lines) if e is not None]
    assert events == [SSEEvent("message_start", '{"a":\n1}'), SSEEvent("message", "x")]
    assert decoder.feed("data: tail") is None
    assert decoder.flush() == SSEEvent("message", "tail")
    assert decoder.flush() is None


def test_public_url_drops_credentials() -> None:
    assert public_url("https://u:p@host.example:8443/v1?key=k#f") == "https://host.example:8443/v1"
    assert public_url("http://[::1]:8080/v1") == "http://[::1]:8080/v1"


def test_secret_never_shows_itself() -> None:
    secret = Secret("sk-live-123")
    assert "sk-live-123" not in f"{secret} {secret!r} {[secret]}"
    assert secret.reveal() == "sk-live-123"


def test_exports_are_curated_and_sorted() -> None:
    exported = agent.models.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    assert set(exported) == {
        "API_KEYS",
        "PROVIDERS",
        "SPEC_FORMS",
        "AnthropicModel",
        "FallbackCallback",
        "FallbackModel",
        "GeminiModel",
        "ModelRequest",
        "ModelSettings",
        "OpenAICompatibleModel",
        "OpenAICompatibleResponsesModel",
        "OpenAIModel",
        "OpenAIResponsesModel",
        "ProviderFactory",
        "RetryPolicy",
        "answer_token_limit",
        "api_key_names",
        "capped_max_tokens",
        "model_from_spec",
        "new_http_client",
        "parse_text_tool_calls",
        "request_headers",
        "shared_http_client",
        "spec_without_credentials",
        "stored_without_credentials",
        "thinking_text",
    }
    for name in exported:
        assert hasattr(agent.models, name)


@pytest.mark.anyio
async def test_a_gateways_client_makes_its_pool_when_first_asked_and_keeps_its_connection() -> None:
    peers: list[tuple[str, int]] = []

    async def chat(request: Request) -> JSONResponse:
        assert request.client is not None
        peers.append((request.client.host, request.client.port))
        model = (await request.json())["model"]
        message = {"role": "assistant", "content": f"{model} here"}
        return JSONResponse(
            {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    async with serve_on_loopback(app) as base:
        client = new_http_client()  # no pool yet: starting a gateway reads no CA bundle
        try:
            model = OpenAICompatibleModel(f"{base}/v1", "qwen2.5", http_client=client)
            for _ in range(2):
                answer = await model.invoke([UserMessage(content="hi")], [])
                assert answer.content == "qwen2.5 here"
        finally:
            await client.aclose()
    assert len(peers) == 2
    assert peers[0] == peers[1]  # one pooled connection, kept
