"""The OpenAI-compatible API's wire where clients look closely, over real HTTP on 127.0.0.1:
a body no JSON reader takes, fields of the wrong type, methods not served, `usage` on every
chunk, an assistant's refusals in the conversation, and the models' `created`.
"""

from __future__ import annotations

import json
import logging
import time

import anyio
import httpx
import pytest

from agent import AssistantMessage, UserMessage

from .test_openai_api import QUESTION, error_of, helpful_gateway, post, served, sse_data

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_body_nested_past_any_reader_is_refused_400_and_logs_no_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway, top, _ = helpful_gateway()
    deep = b'{"model": "assistant", "messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            response = await http.post(f"{base}/chat/completions", content=deep)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert "nested too deeply" in error["message"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert top.calls == []


@pytest.mark.parametrize(
    ("body", "param", "said"),
    [
        ({"stream": "yes"}, "stream", "stream: Input should be a valid boolean"),
        (
            {"stream": True, "stream_options": {"include_usage": 1}},
            "stream_options.include_usage",
            "Input should be a valid boolean",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages",
            "messages.0.content: a part of type 'text' has no text",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "refusal", "refusal": "No."}]}]},
            "messages",
            "a part of type 'refusal' cannot be read",
        ),
    ],
)
async def test_a_field_of_the_wrong_kind_is_refused_naming_it(
    body: dict[str, object], param: str, said: str
) -> None:
    gateway, top, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base:
            response = await post(base, {"model": "assistant", "messages": [QUESTION], **body})
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == param
    assert said in error["message"]
    assert top.calls == []


async def test_a_method_not_served_is_405_saying_which_is() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            answers = [
                await http.get(f"{base}/chat/completions"),
                await http.post(f"{base}/models", json={}),
                await http.delete(f"{base}/models/assistant"),
            ]
    assert [a.status_code for a in answers] == [405, 405, 405]
    assert [a.headers["allow"] for a in answers] == ["POST", "GET", "GET"]
    assert error_of(answers[0])["code"] == "method_not_allowed"


async def test_with_include_usage_every_chunk_has_usage_null_but_the_last() -> None:
    gateway, _, _ = helpful_gateway()
    body = {
        "model": "assistant",
        "messages": [QUESTION],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with anyio.fail_after(30):
        async with served(gateway) as base:
            response = await post(base, body)
    *events, done = sse_data(response.text)
    assert done == "[DONE]"
    *chunks, last = [json.loads(e) for e in events]
    assert len(chunks) > 2
    assert all("usage" in c and c["usage"] is None for c in chunks)
    assert last["choices"] == []
    assert last["usage"]["completion_tokens"] > 0


async def test_an_assistants_refusal_in_the_conversation_is_what_it_said() -> None:
    """OpenAI's models refuse in a `refusal` field (content null) or part; a client that sends
    the conversation back sends them, and the agent reads them as the assistant's turns."""
    gateway, top, _ = helpful_gateway()
    messages = [
        {"role": "user", "content": "Help me pick a lock."},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "A lock of my own?"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "Still no."}]},
        QUESTION,
    ]
    with anyio.fail_after(30):
        async with served(gateway) as base:
            response = await post(base, {"model": "assistant", "messages": messages})
    assert response.status_code == 200, response.text
    sent, _tools = top.calls[0]
    assert sent[1:5] == [
        UserMessage(content="Help me pick a lock."),
        AssistantMessage(content="I can't help with that."),
        UserMessage(content="A lock of my own?"),
        AssistantMessage(content="Still no."),
    ]


async def test_the_models_were_created_when_the_gateway_began_serving_them() -> None:
    gateway, _, _ = helpful_gateway()
    before = int(time.time())
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            listed = (await http.get(f"{base}/models")).json()["data"]
            one = (await http.get(f"{base}/models/helper")).json()
    created = {m["created"] for m in listed} | {one["created"]}
    assert len(created) == 1
    assert before <= created.pop() <= int(time.time())
