"""Turns in Redis (redis-py asyncio): for gateways that already share a Redis.

Per session: a list of turns (one JSON document each, its position is its turn number), a
set of the turn keys saved, and the summary; a sorted set indexes the sessions by their last
update. Appends and summary updates are Lua scripts, so each is atomic across clients.
Needs `pip install 'agent-gateway[redis]'`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import TypeVar, cast

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeout

from ..errors import MemoryStoreError, MemoryWriteUnknown
from ..messages import ChatMessage
from ..url_credentials import driver_said, redacted
from ._asyncio_only import check_asyncio
from .base import SessionInfo, StoredTurn, Summary
from .urls import store_identity

__all__ = ["RedisStore"]

T = TypeVar("T")

DEFAULT_PREFIX = "agent-gateway:memory"
LIST_BATCH = 1000
"""Sessions `sessions()` asks about in one round trip."""

# KEYS: turns list, keys set, sessions index. ARGV: key, turn JSON, time, session id.
_APPEND = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
local n = redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return n
"""
# KEYS: turns list and summary of each session. Returns its turns and summarised through, each.
_COUNTS = """
local counts = {}
for i = 1, #KEYS, 2 do
  counts[#counts + 1] = redis.call('LLEN', KEYS[i])
  local summary = redis.call('GET', KEYS[i + 1])
  counts[#counts + 1] = summary and cjson.decode(summary)['through'] or 0
end
return counts
"""
# KEYS: sessions index, then turns list, keys set and summary of each session. ARGV: the time
# before which a session is stale, then each session id. A session saved to meanwhile stays.
_PRUNE = """
local pruned = 0
for i = 2, #ARGV do
  local updated = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if updated and tonumber(updated) < tonumber(ARGV[1]) then
    local k = 2 + (i - 2) * 3
    redis.call('DEL', KEYS[k], KEYS[k + 1], KEYS[k + 2])
    redis.call('ZREM', KEYS[1], ARGV[i])
    pruned = pruned + 1
  end
end
return pruned
"""
# KEYS: summary. ARGV: summary JSON, its `through`.
_PUT_SUMMARY = """
local known = redis.call('GET', KEYS[1])
if known and cjson.decode(known)['through'] >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""


class _Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str
    messages: list[ChatMessage]
    tokens: list[int]
    created_at: float


class RedisStore:
    """A `SessionStore` in the Redis at `url` (`redis://host:port/db`), under `prefix`."""

    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._url = url
        self._prefix = prefix
        self._client: Redis | None = None
        self._lock = anyio.Lock()
        self._identity: Hashable | None = None

    def __repr__(self) -> str:
        return f"RedisStore({redacted(self._url)!r})"

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        now = time.time()
        turn = _Turn(key=key, messages=list(messages), tokens=list(tokens), created_at=now)
        keys = [self._key("turns", session_id), self._key("keys", session_id), self._index]

        async def append(redis: Redis) -> bool:
            added = await redis.eval(
                _APPEND, 3, *keys, key, turn.model_dump_json(), now, session_id
            )
            return int(added) > 0

        return await self._run(append, writes=True)

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        name = self._key("turns", session_id)

        async def read(redis: Redis) -> list[StoredTurn]:
            # Turn N is the list's item N - 1: `end` is the last index read (-1: the last).
            start, end = after, -1 if before is None else before - 2
            if before is not None and before - 1 <= after:
                return []
            if last is not None:
                top = int(await redis.llen(name))
                top = top if before is None else min(top, before - 1)
                start = max(start, top - last)
            documents = cast(list[bytes], await redis.lrange(name, start, end))
            return [_stored(start + i + 1, doc) for i, doc in enumerate(documents)]

        return await self._run(read)

    async def summary(self, session_id: str) -> Summary | None:
        async def read(redis: Redis) -> Summary | None:
            document = await redis.get(self._key("summary", session_id))
            if document is None:
                return None
            return Summary.model_validate_json(cast(bytes, document))

        return await self._run(read)

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        async def write(redis: Redis) -> None:
            await redis.eval(
                _PUT_SUMMARY,
                1,
                self._key("summary", session_id),
                summary.model_dump_json(),
                summary.through,
            )

        await self._run(write, writes=True)

    async def sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        if limit == 0:
            return []  # ZREVRANGE 0 -1 would be every one

        async def read(redis: Redis) -> list[SessionInfo]:
            indexed = cast(
                list[tuple[bytes, float]],
                await redis.zrevrange(  # pyright: ignore[reportUnknownMemberType]
                    self._index, 0, -1 if limit is None else limit - 1, withscores=True
                ),
            )
            infos: list[SessionInfo] = []
            for start in range(0, len(indexed), LIST_BATCH):
                batch = [
                    (raw.decode(), updated) for raw, updated in indexed[start : start + LIST_BATCH]
                ]
                # One script a batch, one reply: a GET and an LLEN per session, one after
                # another, took 8 s for 20,000 sessions (pipelined, still 1.5 s parsing them).
                keys = [
                    self._key(kind, session_id)
                    for session_id, _ in batch
                    for kind in ("turns", "summary")
                ]
                counts = cast(list[int], await redis.eval(_COUNTS, len(keys), *keys))
                for n, (session_id, updated) in enumerate(batch):
                    infos.append(
                        SessionInfo(
                            session_id=session_id,
                            turns=int(counts[2 * n]),
                            updated_at=updated,
                            summarised_through=int(counts[2 * n + 1]),
                        )
                    )
            return infos

        return await self._run(read)

    async def delete(self, session_id: str) -> bool:
        async def delete(redis: Redis) -> bool:
            names = [self._key(kind, session_id) for kind in ("turns", "keys", "summary")]
            removed = int(await redis.delete(*names))
            await redis.zrem(self._index, session_id)
            return removed > 0

        return await self._run(delete)

    async def prune(self, before: float) -> int:
        async def prune(redis: Redis) -> int:
            stale = cast(
                list[bytes],
                await redis.zrangebyscore(self._index, "-inf", f"({before}"),  # pyright: ignore[reportUnknownMemberType]
            )
            pruned = 0
            for start in range(0, len(stale), LIST_BATCH):
                ids = [raw.decode() for raw in stale[start : start + LIST_BATCH]]
                keys = [
                    self._key(kind, session_id)
                    for session_id in ids
                    for kind in ("turns", "keys", "summary")
                ]
                pruned += int(
                    await redis.eval(_PRUNE, len(keys) + 1, self._index, *keys, before, *ids)
                )
            return pruned

        return await self._run(prune)

    async def identity(self) -> Hashable:
        """The data this store keeps, as its server says: the server's `run_id` (new each
        time it starts), the database and the key prefix, so its Unix socket and its TCP
        port, any host name and any user are one store (`SharedStore`). Asked once per
        client; a user that may not ask (an ACL without INFO) has the URL's identity."""
        if self._identity is None:

            async def ask(redis: Redis) -> Hashable:
                try:
                    info = await redis.info("server")  # pyright: ignore[reportUnknownMemberType]
                except ResponseError:  # refused, not unanswered: the URL is all it knows
                    return ("redis", store_identity(self._url), self._prefix)
                database = int(redis.connection_pool.connection_kwargs.get("db") or 0)
                return ("redis", str(info["run_id"]), database, self._prefix)

            self._identity = await self._run(ask)
        return self._identity

    async def aclose(self) -> None:
        async with self._lock:
            self._identity = None  # a client made later may find another server there
            if self._client is not None:
                client, self._client = self._client, None
                with anyio.CancelScope(shield=True):
                    await client.aclose()

    @property
    def _index(self) -> str:
        return f"{self._prefix}:sessions"

    def _key(self, kind: str, session_id: str) -> str:
        return f"{self._prefix}:{kind}:{session_id}"

    async def _run(self, work: Callable[[Redis], Awaitable[T]], *, writes: bool = False) -> T:
        """`work` on the store's client. A write whose answer timed out raises
        `MemoryWriteUnknown`: Redis runs a script it has queued once it wakes (a stalled
        server), so the write may be applied after the error."""
        check_asyncio("Redis", self._url)  # before a client is made: none to close then
        async with self._lock:
            if self._client is None:
                self._client = Redis.from_url(self._url)  # pyright: ignore[reportUnknownMemberType]
            client = self._client
        try:
            return await work(client)
        except RedisError as exc:
            said = f"chat memory {redacted(self._url)}: {driver_said(self._url, exc)}"
            if writes and isinstance(exc, RedisTimeout):
                raise MemoryWriteUnknown(said) from exc
            raise MemoryStoreError(said) from exc


def _stored(seq: int, document: bytes) -> StoredTurn:
    try:
        turn = _Turn.model_validate_json(document)
    except ValidationError as exc:
        raise MemoryStoreError(f"stored turn {seq} is unreadable: {exc}") from exc
    return StoredTurn(
        seq=seq,
        key=turn.key,
        messages=turn.messages,
        tokens=turn.tokens,
        created_at=turn.created_at,
    )
