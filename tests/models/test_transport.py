"""Between a model and its provider: timeouts, proxies, credentials in URLs, retry hints."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agent import UserMessage
from agent.errors import ModelConnectionError, ModelHTTPError, ModelResponseError, ModelTimeout
from agent.models import (
    AnthropicModel,
    GeminiModel,
    ModelSettings,
    OpenAICompatibleModel,
    OpenAIModel,
    new_http_client,
)
from agent.models._base import HTTPChatModel
from agent.models._clients import _PoolOnFirstRequest  # pyright: ignore[reportPrivateUsage]
from agent.models.retry import parse_retry_info
from tests.servers.asgi import serve_on_loopback

from .support import FakeProvider, Sleeps, Tokens, json_response, retry_policy, sse_response
from .test_gemini import generated
from .test_openai import compatible, completion

pytestmark = pytest.mark.anyio

ASK = [UserMessage(content="hi")]
ANSWER = completion({"role": "assistant", "content": "42"})


async def test_a_provider_that_never_answers_fails_once_after_the_models_timeout(
    sleeps: Sleeps,
) -> None:
    asked = 0
    release = anyio.Event()

    async def chat(request: Request) -> JSONResponse:
        nonlocal asked
        asked += 1
        await release.wait()  # a hung provider: it took the request and says nothing
        return JSONResponse(ANSWER)

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    async with serve_on_loopback(app) as base:
        client = new_http_client()
        try:
            model = OpenAICompatibleModel(
                f"{base}/v1",
                "m1",
                http_client=client,
                settings=ModelSettings(timeout=0.3),
                retry=retry_policy(sleeps),
            )
            with anyio.fail_after(10), pytest.raises(ModelTimeout) as caught:
                await model.invoke(ASK, [])
        finally:
            release.set()
            await client.aclose()
    assert asked == 1  # not asked (and billed) again
    assert sleeps.delays == []
    error = caught.value
    assert isinstance(error, ModelConnectionError)  # still stops the run, resumable
    assert error.seconds == 0.3
    assert "did not answer within 0.3 s" in str(error)
    assert "cannot reach" not in str(error)


async def test_a_read_timeout_is_not_retried_and_says_the_timeout(sleeps: Sleeps) -> None:
    fake = FakeProvider(httpx.ReadTimeout("timed out"))
    model = OpenAIModel(
        "gpt-4.1-mini", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    # within the read timeout in effect: httpx's default client (5 s) for the fake provider
    with pytest.raises(
        ModelTimeout, match=r"^openai:gpt-4\.1-mini: the model did not answer within 5 s"
    ):
        await model.invoke(ASK, [])
    assert len(fake.requests) == 1
    assert sleeps.delays == []


async def test_a_provider_that_hangs_mid_answer_says_so_and_the_timeout(sleeps: Sleeps) -> None:
    release = anyio.Event()
    first = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "The"}}],
    }

    async def chat(request: Request) -> StreamingResponse:
        async def events() -> AsyncGenerator[bytes]:
            yield f"data: {json.dumps(first)}\n\n".encode()
            await release.wait()  # hung after its first tokens

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    tokens = Tokens()
    async with serve_on_loopback(app) as base:
        client = new_http_client()
        try:
            model = OpenAICompatibleModel(
                f"{base}/v1",
                "m1",
                http_client=client,
                settings=ModelSettings(timeout=0.3),
                retry=retry_policy(sleeps),
            )
            with anyio.fail_after(10), pytest.raises(ModelTimeout) as caught:
                await model.invoke(ASK, [], on_token=tokens)
        finally:
            release.set()
            await client.aclose()
    assert tokens.received == ["The"]
    assert caught.value.seconds == 0.3
    said = str(caught.value)
    assert said.startswith(
        "openai-compatible:http://127.0.0.1:"  # then the port
    )
    assert "stopped sending mid-answer: nothing came for 0.3 s" in said
    assert "needs a longer `model_timeout`" in said
    assert not said.rstrip().endswith(":")


@pytest.mark.parametrize(
    "failure",
    [httpx.RemoteProtocolError(""), httpx.ReadError("")],
    ids=["protocol", "read"],
)
async def test_a_broken_stream_never_says_an_empty_reason(
    sleeps: Sleeps, failure: httpx.RequestError
) -> None:
    async def broken() -> AsyncGenerator[bytes]:
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "The"}}]}\n\n'
        raise failure

    fake = FakeProvider(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=broken()),
        httpx.ConnectError(""),
        httpx.ConnectError(""),
    )
    model = OpenAIModel(
        "gpt-4.1-mini",
        api_key="sk-proj-0123456789",
        http_client=fake.client(),
        retry=retry_policy(sleeps, max_attempts=2),
    )
    with pytest.raises(ModelConnectionError) as broke:
        await model.invoke(ASK, [], on_token=Tokens())
    assert str(broke.value) == (f"openai:gpt-4.1-mini: stream broke: {type(failure).__name__}")
    with pytest.raises(ModelConnectionError) as unreachable:
        await model.invoke(ASK, [])
    assert str(unreachable.value) == (
        "openai:gpt-4.1-mini: cannot reach https://api.openai.com/v1/chat/completions "
        "after 2 attempts: ConnectError"
    )


async def test_a_refused_connection_is_still_retried(sleeps: Sleeps) -> None:
    fake = FakeProvider(httpx.ConnectError("refused"), json_response(200, ANSWER))
    model = OpenAIModel(
        "gpt-4.1-mini", api_key="k", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    assert (await model.invoke(ASK, [])).content == "42"
    assert len(fake.requests) == 2


async def test_the_models_timeout_is_the_requests_read_timeout(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, ANSWER), json_response(200, ANSWER))
    for settings in (ModelSettings(timeout=42), ModelSettings()):
        model = OpenAIModel(
            "gpt-4.1-mini",
            api_key="k",
            http_client=fake.client(),
            settings=settings,
            retry=retry_policy(sleeps),
        )
        await model.invoke(ASK, [])
    timeouts = [request.extensions["timeout"] for request in fake.requests]
    assert timeouts[0]["read"] == 42
    assert timeouts[1]["read"] == 5.0  # httpx's default client: ours keeps it unless told
    assert timeouts[0]["connect"] == timeouts[1]["connect"] == 5.0


def test_a_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        ModelSettings(timeout=0)


PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The environment without proxies of its own (lower case wins over upper case)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


@asynccontextmanager
async def forward_proxy(answer: bytes) -> AsyncGenerator[tuple[str, list[str]]]:
    """A plain HTTP forward proxy on 127.0.0.1 that answers every request itself: yields its
    URL and the request lines it was sent (`POST http://host/path HTTP/1.1`)."""
    seen: list[str] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            seen.append(lines[0])
            fields = dict(line.lower().split(": ", 1) for line in lines[1:])
            while len(body) < int(fields.get("content-length", "0")):
                body += await stream.receive()
            await stream.send(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(answer)}\r\nconnection: close\r\n\r\n".encode()
                + answer
            )

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        try:
            yield f"http://127.0.0.1:{port}", seen
        finally:
            tg.cancel_scope.cancel()


async def test_model_calls_go_through_the_environments_proxy(
    no_proxies: pytest.MonkeyPatch,
) -> None:
    async with forward_proxy(json.dumps(ANSWER).encode()) as (proxy, seen):
        no_proxies.setenv("HTTP_PROXY", proxy)
        client = new_http_client()
        try:
            # model.invalid resolves nowhere: only the proxy can have answered
            model = OpenAICompatibleModel("http://model.invalid/v1", "m1", http_client=client)
            with anyio.fail_after(10):
                answer = await model.invoke(ASK, [])
        finally:
            await client.aclose()
    assert answer.content == "42"
    assert seen == ["POST http://model.invalid/v1/chat/completions HTTP/1.1"]


async def test_no_proxy_hosts_are_called_directly(no_proxies: pytest.MonkeyPatch) -> None:
    async def chat(request: Request) -> JSONResponse:
        return JSONResponse(ANSWER)

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    async with (
        forward_proxy(b"{}") as (proxy, seen),
        serve_on_loopback(app) as base,
    ):
        no_proxies.setenv("HTTP_PROXY", proxy)
        no_proxies.setenv("NO_PROXY", "localhost,127.0.0.1")
        client = new_http_client()
        try:
            model = OpenAICompatibleModel(f"{base}/v1", "m1", http_client=client)
            with anyio.fail_after(10):
                answer = await model.invoke(ASK, [])
        finally:
            await client.aclose()
    assert answer.content == "42"
    assert seen == []


async def test_proxies_are_mounted_as_a_plain_client_mounts_them(
    no_proxies: pytest.MonkeyPatch,
) -> None:
    no_proxies.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    no_proxies.setenv("ALL_PROXY", "http://other.example:8080")
    no_proxies.setenv("NO_PROXY", "internal.example,10.0.0.1")
    ours, plain = new_http_client(), httpx.AsyncClient()
    try:
        routes = {
            str(pattern.pattern): transport
            for pattern, transport in ours._mounts.items()  # pyright: ignore[reportPrivateUsage]
        }
        expected = {
            str(p.pattern)
            for p in plain._mounts  # pyright: ignore[reportPrivateUsage]
        }
        assert set(routes) == expected
        assert routes["all://*internal.example"] is None
        proxied = {
            pattern: str(transport.proxy.url)
            for pattern, transport in routes.items()
            if isinstance(transport, _PoolOnFirstRequest) and transport.proxy is not None
        }
        assert proxied == {
            "https://": "http://proxy.example:3128",
            "all://": "http://other.example:8080",
        }
    finally:
        await ours.aclose()
        await plain.aclose()


@pytest.mark.parametrize(
    "no_proxy",
    [
        "localhost, 127.0.0.1 ,::1,10.0.0.0/8,fd00::1",
        ".corp.example,corp.example,http://plain.example,https://*.tls.example",
        "internal.example,*",  # `*`: no proxy at all
        "",
    ],
)
async def test_no_proxy_hosts_are_routed_as_a_plain_client_routes_them(
    no_proxies: pytest.MonkeyPatch, no_proxy: str
) -> None:
    no_proxies.setenv("HTTP_PROXY", "proxy.example:3128")  # no scheme: http://
    no_proxies.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    no_proxies.setenv("NO_PROXY", no_proxy)
    ours, plain = new_http_client(), httpx.AsyncClient()

    def routes(client: httpx.AsyncClient) -> dict[str, bool]:
        """Each mount pattern, and whether it goes through a proxy."""
        mounts = client._mounts  # pyright: ignore[reportPrivateUsage]
        return {
            str(pattern.pattern): transport is not None for pattern, transport in mounts.items()
        }

    try:
        assert routes(ours) == routes(plain)
        proxies = {
            str(transport.proxy.url)
            for transport in ours._mounts.values()  # pyright: ignore[reportPrivateUsage]
            if isinstance(transport, _PoolOnFirstRequest) and transport.proxy is not None
        }
        everywhere = "*" in no_proxy.split(",")
        assert proxies == (set() if everywhere else {"http://proxy.example:3128"})
    finally:
        await ours.aclose()
        await plain.aclose()


async def test_a_password_in_the_model_url_reaches_no_log_line(
    caplog: pytest.LogCaptureFixture, sleeps: Sleeps
) -> None:
    caplog.set_level(logging.DEBUG)
    listing = {"object": "list", "data": [{"id": "m1", "max_model_len": 4096}]}
    fake = FakeProvider(json_response(200, ANSWER), json_response(200, listing))
    model = OpenAICompatibleModel(
        "http://bob:PASS%2Fword@127.0.0.1:8080/v1",
        "m1",
        http_client=fake.client(),
        retry=retry_policy(sleeps),
    )
    await model.invoke(ASK, [])
    assert await model.context_window() == 4096
    assert "HTTP Request: POST http://127.0.0.1:8080/v1/chat/completions" in caplog.text
    assert "PASS" not in caplog.text
    basic = "Basic " + base64.b64encode(b"bob:PASS/word").decode()
    for request in fake.requests:
        assert request.url.userinfo == b""
        assert request.headers["authorization"] == basic


async def test_a_key_in_the_model_urls_query_is_sent_and_said_nowhere(
    caplog: pytest.LogCaptureFixture, sleeps: Sleeps
) -> None:
    """`?api_key=KEY` was in httpx's request lines, and an error saying it back showed it."""
    caplog.set_level(logging.DEBUG)

    def says_it_back(request: httpx.Request) -> httpx.Response:
        said = f"Unauthorized: {request.url} (key {request.url.params['api_key']})"
        return httpx.Response(401, json={"error": {"message": said}})

    fake = FakeProvider(json_response(200, ANSWER), says_it_back)
    model = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1?api-version=1&api_key=QK%2BEY",
        "m1",
        http_client=fake.client(),
        retry=retry_policy(sleeps, max_attempts=1),
    )
    await model.invoke(ASK, [])
    with pytest.raises(ModelHTTPError) as caught:
        await model.invoke(ASK, [])
    assert [r.url.params["api_key"] for r in fake.requests] == ["QK+EY", "QK+EY"]
    assert "api-version=1&api_key=***" in caplog.text
    said = f"{caught.value} {caught.value.provider_message} {caplog.text}"
    assert "QK" not in said
    assert "(key ***)" in str(caught.value)


async def test_credentials_in_the_url_win_over_the_key_which_that_server_is_not_sent(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider(json_response(200, ANSWER), json_response(200, ANSWER))
    for url in ("http://bob:pw@127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"):
        model = OpenAICompatibleModel(
            url,
            "m1",
            api_key="sk-compat-key",
            http_client=fake.client(),
            retry=retry_policy(sleeps),
        )
        await model.invoke(ASK, [])
    with_user, without = (request.headers["authorization"] for request in fake.requests)
    assert with_user == "Basic " + base64.b64encode(b"bob:pw").decode()
    assert "sk-compat-key" not in str(fake.requests[0].headers)
    assert without == "Bearer sk-compat-key"


PASSWORD = "Sup3r%40S3cret"  # as written in the URL: "Sup3r@S3cret"
USER_URL = f"http://alice:{PASSWORD}@127.0.0.1:18711/v1"


def echoes_credentials(request: httpx.Request) -> httpx.Response:
    """A 401 that says back what it was sent, as a misconfigured proxy does: the Basic
    header, its decoded pair, and the password as typed in the URL."""
    header = request.headers["authorization"]
    pair = base64.b64decode(header.removeprefix("Basic ")).decode()
    said = f"Unauthorized: got header {header!r} ({pair}; typed {PASSWORD})"
    return httpx.Response(401, json={"error": {"message": said, "type": "auth"}})


def models_at(url: str, client: httpx.AsyncClient, sleeps: Sleeps) -> list[HTTPChatModel]:
    retry = retry_policy(sleeps, max_attempts=1)
    common: dict[str, Any] = {"base_url": url, "http_client": client, "retry": retry}
    return [
        OpenAICompatibleModel(url, "m1", http_client=client, retry=retry),
        OpenAIModel("gpt-4.1-mini", api_key="sk-k", **common),
        AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-k", **common),
        GeminiModel("gemini-2.5-flash", api_key="AIza-k", **common),
    ]


def assert_no_credentials(said: str) -> None:
    token = base64.b64encode(b"alice:Sup3r@S3cret").decode()
    for secret in ("Sup3r", "S3cret", token, token.rstrip("=")):
        assert secret not in said
    assert "***" in said


async def test_a_url_password_the_provider_echoes_in_an_error_is_scrubbed(sleeps: Sleeps) -> None:
    fake = FakeProvider(*[echoes_credentials] * 4)
    for model in models_at(USER_URL, fake.client(), sleeps):
        with pytest.raises(ModelHTTPError) as caught:
            await model.invoke(ASK, [])
        assert_no_credentials(str(caught.value))
        assert_no_credentials(caught.value.provider_message or "")
    assert len(fake.requests) == 4  # each provider sent the URL's credentials, as Basic auth
    assert all(r.headers["authorization"].startswith("Basic ") for r in fake.requests)


async def test_a_url_password_echoed_in_an_answer_or_a_stream_is_scrubbed(sleeps: Sleeps) -> None:
    said = f"bad user alice:Sup3r@S3cret (typed {PASSWORD})"
    fake = FakeProvider(
        json_response(200, {"error": {"message": said}}),
        sse_response([(None, {"error": {"message": said}})]),
    )
    model = models_at(USER_URL, fake.client(), sleeps)[0]
    for on_token in (None, Tokens()):
        with pytest.raises(ModelResponseError) as caught:
            await model.invoke(ASK, [], on_token=on_token)
        assert_no_credentials(str(caught.value))


async def test_a_token_in_the_users_place_is_a_secret_too(sleeps: Sleeps) -> None:
    fake = FakeProvider(echoes_credentials)
    model = OpenAICompatibleModel(
        "http://tok-0123456789@127.0.0.1:18711/v1",
        "m1",
        http_client=fake.client(),
        retry=retry_policy(sleeps),
    )
    with pytest.raises(ModelHTTPError) as caught:
        await model.invoke(ASK, [])
    assert "tok-0123456789" not in str(caught.value)
    assert base64.b64encode(b"tok-0123456789:").decode() not in str(caught.value)


def gemini_quota_exceeded(delay: str) -> dict[str, object]:
    """Gemini's 429, as it answers a free tier over its per-minute quota."""
    return {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing "
            "details. Please retry in 36.6s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                    "violations": [
                        {
                            "quotaMetric": "generativelanguage.googleapis.com/"
                            "generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                            "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                            "quotaValue": "10",
                        }
                    ],
                },
                {
                    "@type": "type.googleapis.com/google.rpc.Help",
                    "links": [
                        {
                            "description": "Learn more about Gemini API quotas",
                            "url": "https://ai.google.dev/gemini-api/docs/rate-limits",
                        }
                    ],
                },
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
            ],
        }
    }


def gemini(fake: FakeProvider, sleeps: Sleeps) -> GeminiModel:
    return GeminiModel(
        "gemini-2.5-flash", api_key="AIza-k", http_client=fake.client(), retry=retry_policy(sleeps)
    )


async def test_geminis_retry_delay_in_the_body_is_waited_for(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        json_response(429, gemini_quota_exceeded("37s")),
        json_response(200, generated([{"text": "ok"}])),
    )
    assert (await gemini(fake, sleeps).invoke(ASK, [])).content == "ok"
    assert sleeps.delays == [37.0]  # not the 0.375 s backoff


async def test_a_retry_delay_longer_than_allowed_fails_at_once(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(429, [gemini_quota_exceeded("3600s")]))
    with pytest.raises(ModelHTTPError) as caught:
        await gemini(fake, sleeps).invoke(ASK, [])
    assert caught.value.status_code == 429
    assert len(fake.requests) == 1  # so a fallback model answers now
    assert sleeps.delays == []


@pytest.mark.parametrize(
    ("body", "seconds"),
    [
        (gemini_quota_exceeded("0.250s"), 0.25),
        ([gemini_quota_exceeded("5s")], 5.0),
        (gemini_quota_exceeded("soon"), None),
        ({"error": {"code": 429, "message": "Too many requests"}}, None),
        ("Too many requests", None),
        (None, None),
    ],
)
def test_retry_info(body: object, seconds: float | None) -> None:
    assert parse_retry_info(body) == seconds


async def test_a_stream_with_headers_and_no_event_did_not_answer(sleeps: Sleeps) -> None:
    async def silent() -> AsyncIterator[bytes]:
        yield b": keep-alive\n\n"  # a comment is no answer
        raise httpx.ReadTimeout("")

    fake = FakeProvider(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=silent())
    )
    model = compatible(fake, sleeps, settings=ModelSettings(timeout=3))
    with pytest.raises(ModelTimeout) as caught:
        await model.invoke(ASK, [], on_token=Tokens())
    said = str(caught.value)
    assert "did not answer within 3 s" in said
    assert "mid-answer" not in said
    assert len(fake.requests) == 1
