"""Models used from one event loop after another (`asyncio.run` per request, a sync caller
that runs `anyio.run` each time): a pool's connections belong to the loop that opened them."""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Generator, Sequence
from contextlib import contextmanager

import anyio
import httpx
import pytest
from anyio.from_thread import start_blocking_portal
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agent import AgentItem, AgentResult, ToolsAgent, UserMessage
from agent.errors import ModelConnectionError
from agent.models import OpenAICompatibleModel, shared_http_client
from tests.servers.asgi import serve_on_loopback

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_openai import completion

ASK = [UserMessage(content="hi")]
ANSWER = completion({"role": "assistant", "content": "42"})


@contextmanager
def keep_alive_provider() -> Generator[tuple[str, list[str]]]:
    """An OpenAI-compatible provider on 127.0.0.1 that keeps connections open between
    requests (uvicorn, HTTP/1.1), served from a thread of its own: the test's loops come and
    go while it runs. Yields its base URL and the client port of every request."""
    ports: list[str] = []

    async def chat(request: Request) -> JSONResponse:
        assert request.client is not None
        ports.append(str(request.client.port))
        return JSONResponse(ANSWER)

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(serve_on_loopback(app)) as base,
    ):
        yield f"{base}/v1", ports


def test_a_model_without_a_client_answers_in_one_event_loop_after_another() -> None:
    with keep_alive_provider() as (url, ports):
        model = OpenAICompatibleModel(url, "m1")

        async def ask_twice() -> tuple[httpx.AsyncClient, Sequence[str | None]]:
            with anyio.fail_after(10):
                answers = [(await model.invoke(ASK, [])).content for _ in range(2)]
            return shared_http_client(), answers

        clients: list[httpx.AsyncClient] = []
        for _ in range(3):
            client, answers = anyio.run(ask_twice)
            assert answers == ["42", "42"]
            assert client.is_closed  # closed as its loop ended: no socket outlives the loop
            clients.append(client)
    assert len({id(c) for c in clients}) == 3  # a client of its own for each loop
    # Within a loop the connection is kept and used again; each loop opened its own.
    assert len(ports) == 6
    assert [ports[0], ports[2], ports[4]] == [ports[1], ports[3], ports[5]]
    assert len(set(ports)) == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_an_agent_steps_in_one_asyncio_run_after_another() -> None:
    with keep_alive_provider() as (url, _):
        agent = ToolsAgent(model=OpenAICompatibleModel(url, "m1"))
        for _ in range(3):
            result = asyncio.run(agent.step([AgentItem(prompt="q")]))
            assert isinstance(result, AgentResult)
            assert result.items[0].output == "42"


@pytest.mark.anyio
async def test_a_connection_of_an_ended_loop_is_a_connection_failure_and_retried(
    sleeps: Sleeps,
) -> None:
    # What asyncio raises when a client of one's own kept a connection of a loop now closed:
    # httpx drops that connection, so the next attempt opens a fresh one.
    ended = RuntimeError("Event loop is closed")
    fake = FakeProvider(ended, json_response(200, ANSWER))
    model = OpenAICompatibleModel(
        "http://127.0.0.1:9/v1", "m1", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    answer = await model.invoke(ASK, [])
    assert answer.content == "42"
    assert len(sleeps.delays) == 1

    fake = FakeProvider(ended, ended)
    model = OpenAICompatibleModel(
        "http://127.0.0.1:9/v1",
        "m1",
        http_client=fake.client(),
        retry=retry_policy(sleeps, max_attempts=2),
    )
    with pytest.raises(ModelConnectionError) as caught:
        await model.invoke(ASK, [])
    assert "after 2 attempts: RuntimeError: Event loop is closed" in str(caught.value)
    assert "give each event loop its own client" in str(caught.value)


@pytest.mark.anyio
async def test_a_closed_client_is_a_connection_error_not_retried(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, ANSWER))
    client = fake.client()
    await client.aclose()
    model = OpenAICompatibleModel(
        "http://127.0.0.1:9/v1", "m1", http_client=client, retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelConnectionError) as caught:
        await model.invoke(ASK, [])
    assert "after 1 attempt: RuntimeError" in str(caught.value)
    assert "give each event loop its own client" in str(caught.value)
    assert sleeps.delays == []
    assert fake.requests == []
