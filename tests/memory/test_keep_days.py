"""Sessions not used for `keep_days` go, and only those: agents sharing a store keep its
sessions as long as the longest of their days asks, also where only the server can tell
that two URLs reach one store."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from agent import AssistantMessage, UserMessage
from agent.memory.redis_store import DEFAULT_PREFIX, RedisStore
from gateway import open_gateway
from gateway.config import parse_config
from gateway.memory_retention import DAY_SECONDS, pruning_sessions
from tests.servers.databases import RedisServer

pytestmark = pytest.mark.anyio

TURN = [UserMessage(content="q"), AssistantMessage(content="a")]


@pytest.fixture
async def old_session(redis_instance: RedisServer) -> AsyncIterator[RedisStore]:
    """Session `old` in the Redis (default prefix, by its Unix socket), last used 10 days
    ago; deleted after the test."""
    store = RedisStore(redis_instance.socket_url)
    admin = Redis.from_url(redis_instance.url)  # pyright: ignore[reportUnknownMemberType]
    try:
        await store.append("old", "k1", TURN, [1, 1])
        await admin.zadd(f"{DEFAULT_PREFIX}:sessions", {"old": time.time() - 10 * DAY_SECONDS})
        yield store
    finally:
        await store.delete("old")
        await store.aclose()
        await admin.aclose()


async def sessions(store: RedisStore) -> list[str]:
    return [info.session_id for info in await store.sessions()]


async def test_one_redis_by_its_socket_and_by_tcp_keeps_sessions_for_the_longest_days(
    old_session: RedisStore, redis_instance: RedisServer, tmp_path: Path
) -> None:
    """Agent `a` keeps memory in a Redis by TCP for a day, agent `b` in the same Redis by
    its Unix socket for ever: no URL says they are one store, so `a`'s keep_days deleted
    `b`'s sessions as the gateway opened. The server says which data it keeps: they stay."""
    script = tmp_path / "answers.json"
    script.write_text("[]")
    model = f"scripted:{script}"
    short: dict[str, Any] = {"url": redis_instance.url, "keep_days": 1}
    for_ever = {"url": redis_instance.socket_url}
    both = {"a": {"model": model, "memory": short}, "b": {"model": model, "memory": for_ever}}
    async with open_gateway(parse_config({"agents": both}), state_dir=tmp_path):
        pass
    assert await sessions(old_session) == ["old"]
    # `a` alone: its day has passed for the session.
    alone = {"a": {"model": model, "memory": short}}
    async with open_gateway(parse_config({"agents": alone}), state_dir=tmp_path):
        pass
    assert await sessions(old_session) == []


async def test_stores_no_server_says_are_apart_are_not_pruned_by_the_shorter_days(
    old_session: RedisStore, redis_instance: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Which stores are one is not known while a server does not answer: nothing is deleted
    by days another store may not share (the next round tries again)."""
    by_tcp = RedisStore(redis_instance.url)
    down = RedisStore("redis://127.0.0.1:1/0")  # nothing listens on port 1
    try:
        with caplog.at_level(logging.WARNING, logger="gateway.memory_retention"):
            async with pruning_sessions([(by_tcp, 1), (down, 0)]):
                pass
        assert await sessions(old_session) == ["old"]
        assert "deleting unused sessions waits for the next round: chat memory" in caplog.text
    finally:
        await by_tcp.aclose()
        await down.aclose()
