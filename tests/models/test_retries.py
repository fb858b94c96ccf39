"""Retries the user can see: each is a warning saying why and when, and a wait too long to
make is said in the error."""

from __future__ import annotations

import logging

import httpx
import pytest

from agent import UserMessage
from agent.errors import ModelConnectionError, ModelHTTPError
from agent.models import AnthropicModel, GeminiModel, OpenAIModel

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_anthropic import message
from .test_openai import completion
from .test_transport import gemini_quota_exceeded

pytestmark = pytest.mark.anyio

ASK = [UserMessage(content="hi")]
KEY = "sk-proj-retries-0123456789"
ANSWER = completion({"role": "assistant", "content": "42"})
# OpenAI's 429, as it answers an organisation over its requests per minute.
RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
RATE_HEADERS = {"x-ratelimit-limit-requests": "3", "x-ratelimit-remaining-requests": "0"}


def openai(fake: FakeProvider, sleeps: Sleeps) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4.1-mini", api_key=KEY, http_client=fake.client(), retry=retry_policy(sleeps)
    )


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


async def test_a_wait_longer_than_the_model_waits_is_said_in_the_error(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(
        json_response(429, RATE_LIMITED, headers={"retry-after": "120", **RATE_HEADERS})
    )
    with pytest.raises(ModelHTTPError) as caught:
        await openai(fake, sleeps).invoke(ASK, [])
    assert str(caught.value) == (
        "openai:gpt-4.1-mini: HTTP 429: Rate limit reached for requests; the provider asked to "
        "wait 120 s before trying again, longer than this model waits (60 s, "
        "RetryPolicy.max_retry_after): not retried, so a fallback model can answer now"
    )
    assert caught.value.provider_message == "Rate limit reached for requests"
    assert len(fake.requests) == 1
    assert sleeps.delays == []
    assert warnings_of(caplog) == []  # nothing was retried


async def test_geminis_long_retry_delay_is_said_too(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(429, gemini_quota_exceeded("3600s")))
    model = GeminiModel(
        "gemini-2.5-flash", api_key="AIza-k", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelHTTPError, match=r"asked to wait 3600 s before trying again"):
        await model.invoke(ASK, [])


async def test_a_rate_limit_that_is_waited_out_is_a_warning(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeProvider(
        json_response(429, RATE_LIMITED, headers={"retry-after": "5", **RATE_HEADERS}),
        json_response(200, ANSWER),
    )
    answer = await openai(fake, sleeps).invoke(ASK, [])
    assert answer.content == "42"
    assert sleeps.delays == [5.0]
    assert warnings_of(caplog) == [
        "openai:gpt-4.1-mini: rate limited (HTTP 429): Rate limit reached for requests. "
        "Retrying in 5 s (attempt 2 of 4)"
    ]
    assert answer.usage.requests == 1  # one model call, however many attempts it took


async def test_a_failure_the_server_says_not_to_retry_is_not_retried(sleeps: Sleeps) -> None:
    """`x-should-retry: false`, as OpenAI's SDKs read it: a gateway's agent that failed (its
    tools' effects and all) is not run again."""
    failed = {"error": {"message": "agent failed", "type": "server_error", "code": "run_failed"}}
    fake = FakeProvider(
        json_response(500, failed, headers={"x-should-retry": "false"}), json_response(200, ANSWER)
    )
    with pytest.raises(ModelHTTPError, match="HTTP 500: agent failed"):
        await openai(fake, sleeps).invoke(ASK, [])
    assert len(fake.requests) == 1
    assert sleeps.delays == []


@pytest.mark.parametrize("asked", ["-5", "0", "Wed, 21 Oct 2015 07:28:00 GMT"])
async def test_a_wait_that_is_not_positive_leaves_the_backoff_in_place(
    sleeps: Sleeps, asked: str
) -> None:
    """A negative `Retry-After`, or a date gone by, spent all four attempts in 75 ms."""
    limited = json_response(429, RATE_LIMITED, headers={"retry-after": asked})
    fake = FakeProvider(limited, limited, json_response(200, ANSWER))
    answer = await openai(fake, sleeps).invoke(ASK, [])
    assert answer.content == "42"
    assert sleeps.delays == [retry_policy(sleeps).backoff(1), retry_policy(sleeps).backoff(2)]
    assert all(delay > 0 for delay in sleeps.delays)


async def test_every_retry_is_said_once_the_same_way(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake = FakeProvider(
        json_response(529, overloaded),
        httpx.ConnectError("[Errno 111] Connection refused"),
        json_response(200, message([{"type": "text", "text": "ok"}], "end_turn")),
    )
    model = AnthropicModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-api03-retries",
        http_client=fake.client(),
        retry=retry_policy(sleeps),
    )
    assert (await model.invoke(ASK, [])).content == "ok"
    assert sleeps.delays == [0.375, 0.75]
    assert warnings_of(caplog) == [
        "anthropic:claude-sonnet-4-5: HTTP 529: Overloaded. Retrying in 0.4 s (attempt 2 of 4)",
        "anthropic:claude-sonnet-4-5: cannot reach https://api.anthropic.com/v1/messages: "
        "ConnectError: [Errno 111] Connection refused. Retrying in 0.8 s (attempt 3 of 4)",
    ]


async def test_the_last_attempt_is_not_said_as_a_retry(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    unavailable = {"error": {"message": f"bad gateway for key {KEY}", "type": "server_error"}}
    fake = FakeProvider(*[json_response(503, unavailable)] * 2, httpx.ConnectError(""))
    model = OpenAIModel(
        "gpt-4.1-mini",
        api_key=KEY,
        http_client=fake.client(),
        retry=retry_policy(sleeps, max_attempts=2),
    )
    with pytest.raises(ModelHTTPError, match=r"HTTP 503: bad gateway for key \*\*\*$"):
        await model.invoke(ASK, [])
    said = warnings_of(caplog)
    assert said == [
        "openai:gpt-4.1-mini: HTTP 503: bad gateway for key ***. Retrying in 0.4 s (attempt 2 of 2)"
    ]
    with pytest.raises(ModelConnectionError):  # one attempt left of none: not retried
        await OpenAIModel(
            "gpt-4.1-mini",
            api_key=KEY,
            http_client=fake.client(),
            retry=retry_policy(sleeps, max_attempts=1),
        ).invoke(ASK, [])
    assert len(warnings_of(caplog)) == 1
