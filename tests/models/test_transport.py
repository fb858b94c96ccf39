"""Between a model and its provider: timeouts, proxies, credentials in URLs, retry hints."""

from __future__ import annotations

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent import UserMessage
from agent.errors import ModelConnectionError, ModelTimeout
from agent.models import ModelSettings, OpenAICompatibleModel, OpenAIModel, new_http_client
from tests.servers.asgi import serve_on_loopback

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_openai import completion

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
