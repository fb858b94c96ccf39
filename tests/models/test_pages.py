"""A page where a provider's answer was due (a proxy's 503, a captive portal's login page) is
said by its words: the status, the page's title and text without markup, never its CSS."""

from __future__ import annotations

import httpx
import pytest

from agent import UserMessage
from agent.errors import ModelConnectionError, ModelHTTPError
from agent.models import AnthropicModel, GeminiModel, OpenAIModel

from .support import FakeProvider, Sleeps, Tokens, retry_policy

pytestmark = pytest.mark.anyio

ASK = [UserMessage(content="hi")]
NGINX_503 = (
    "<html>\r\n<head><title>503 Service Temporarily Unavailable</title>"
    f"<style>{'body{margin:0}' * 300}</style></head>\r\n<body>\r\n"
    "<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n"
    "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)
LOGIN = (
    "<!DOCTYPE html><html><head><title>Acme proxy</title><script>var t = 1;</script></head>"
    "<body><!-- sso --><p>Please sign in to the Acme proxy &amp; try again.</p></body></html>"
)


def page(status: int, text: str) -> httpx.Response:
    return httpx.Response(status, text=text, headers={"content-type": "text/html"})


def models(fake: FakeProvider, sleeps: Sleeps) -> list[OpenAIModel | AnthropicModel | GeminiModel]:
    client, retry = fake.client(), retry_policy(sleeps)
    return [
        OpenAIModel("gpt-4.1-mini", api_key="sk-k", http_client=client, retry=retry),
        AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-k", http_client=client, retry=retry),
        GeminiModel("gemini-2.5-flash", api_key="AIza-k", http_client=client, retry=retry),
    ]


async def test_an_error_page_is_said_by_its_words(sleeps: Sleeps) -> None:
    fake = FakeProvider(*[page(503, NGINX_503)] * 4)
    (openai, *_) = models(fake, sleeps)
    with pytest.raises(ModelHTTPError) as caught:
        await openai.invoke(ASK, [])
    assert str(caught.value) == (
        "openai:gpt-4.1-mini: HTTP 503: 503 Service Temporarily Unavailable: nginx"
    )
    assert len(fake.requests) == 4  # retried as a 503 is


@pytest.mark.parametrize("provider", [0, 1, 2])
async def test_a_login_page_where_a_stream_was_due_is_said_by_its_words(
    sleeps: Sleeps, provider: int
) -> None:
    """Said before as 'the stream ended before the answer was complete' (OpenAI, Anthropic)
    or 'no candidates in the answer' (Gemini), the page's words nowhere."""
    fake = FakeProvider(page(200, LOGIN))
    model = models(fake, sleeps)[provider]
    with pytest.raises(ModelConnectionError) as caught:  # a stopped run resumes later
        await model.invoke(ASK, [], on_token=Tokens())
    said = str(caught.value)
    assert "answered HTTP 200 with text/html, not an event stream: " in said
    assert said.endswith(
        "Acme proxy: Please sign in to the Acme proxy & try again. "
        "(a proxy or a login page in the way?)"
    )
    assert "<" not in said


async def test_a_login_page_where_json_was_due_is_said_by_its_words(sleeps: Sleeps) -> None:
    fake = FakeProvider(page(200, LOGIN))
    (openai, *_) = models(fake, sleeps)
    with pytest.raises(ModelConnectionError, match="with text/html, not JSON: Acme proxy: "):
        await openai.invoke(ASK, [])
