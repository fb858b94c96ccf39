"""Every session store keeps turns in order, once per key, and forgets them on request:
in process, SQLite, and real PostgreSQL and Redis servers."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from pathlib import Path
from typing import cast

import anyio
import anyio.lowlevel
import psycopg
import pytest
from psycopg import sql
from redis.asyncio import Redis

from agent import AssistantMessage, MemoryStoreError, ToolCall, ToolMessage, UserMessage
from agent.errors import MemoryWriteUnknown
from agent.memory import (
    InProcessStore,
    SessionMemory,
    SessionStore,
    SQLiteStore,
    Summary,
    redis_store,
    sqlite_store,
    store_from_url,
)
from agent.memory.postgres_store import PostgresStore
from gateway import open_gateway
from gateway.config import parse_config
from tests.servers.databases import PostgresCluster

pytestmark = pytest.mark.anyio

KINDS = ["in_process", "sqlite", "postgres", "redis"]


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    kind: str = request.param
    if kind == "in_process":
        made: SessionStore = InProcessStore()
    elif kind == "sqlite":
        made = SQLiteStore(tmp_path / "sub" / "memory.sqlite3")
    else:
        url: str = request.getfixturevalue(f"{kind}_url")
        made = store_from_url(url)
    # Every test gets its own sessions: the servers live for the whole test session.
    yield made
    for info in await made.sessions():
        await made.delete(info.session_id)
    await made.aclose()


def turn(n: int, *, tool: bool = False) -> list[UserMessage | AssistantMessage | ToolMessage]:
    messages: list[UserMessage | AssistantMessage | ToolMessage] = [UserMessage(content=f"q{n}")]
    if tool:
        call = ToolCall(id=f"c{n}", name="calculator", arguments={"expression": f"{n}*2"})
        messages += [
            AssistantMessage(
                tool_calls=(call,), provider="anthropic", raw={"content": [{"type": "x"}]}
            ),
            ToolMessage(tool_call_id=f"c{n}", name="calculator", content=str(n * 2)),
        ]
    messages.append(AssistantMessage(content=f"a{n}"))
    return messages


async def test_turns_come_back_in_order_exactly_as_saved(store: SessionStore) -> None:
    first, second = turn(1, tool=True), turn(2)
    assert await store.append("s", "k1", first, [1] * len(first))
    assert await store.append("s", "k2", second, [2] * len(second))
    turns = await store.turns("s")
    assert [t.seq for t in turns] == [1, 2]
    assert [t.key for t in turns] == ["k1", "k2"]
    assert turns[0].messages == first  # raw provider payloads included
    assert turns[1].tokens == [2, 2]
    assert [t.seq for t in await store.turns("s", after=1)] == [2]
    assert [t.seq for t in await store.turns("s", last=1)] == [2]
    assert await store.turns("nobody") == []


JOINED_IDS = [
    "\U0001f469\u200d\U0001f4bb",  # woman technologist: woman, ZWJ, laptop
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag: its ZWJ after a variation selector
    "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",  # Persian "I want": ZWNJ between its parts
    "\u0915\u094d\u200d\u0937",  # Devanagari ka, virama, ZWJ, ssa: a half form
]


async def test_session_ids_with_the_joiners_words_need_keep_their_turns(
    store: SessionStore,
) -> None:
    """A Persian word, an Indic conjunct and an emoji sequence need U+200C or U+200D, which
    session ids refused as invisible format characters. Each is its own session, kept,
    listed and deleted as named; without its joiner, it is another session."""
    memory = SessionMemory(store)
    for n, session_id in enumerate(JOINED_IDS):
        await memory.save(session_id, f"k{n}", turn(n))
    for n, session_id in enumerate(JOINED_IDS):
        history = await memory.load(session_id)
        assert [m.content for m in history.messages] == [f"q{n}", f"a{n}"], session_id
    assert sorted(info.session_id for info in await store.sessions()) == sorted(JOINED_IDS)
    persian = JOINED_IDS[2]
    assert (await memory.load(persian.replace("\u200c", ""))).messages == []
    assert await store.delete(persian)
    assert await store.turns(persian) == []
    assert len(await store.sessions()) == len(JOINED_IDS) - 1


async def test_a_long_session_is_read_a_part_at_a_time(store: SessionStore) -> None:
    for n in range(1, 8):
        assert await store.append("s", f"k{n}", turn(n), [1, 1])

    async def seqs(**bounds: int) -> list[int]:
        return [t.seq for t in await store.turns("s", **bounds)]

    assert await seqs(before=4) == [1, 2, 3]
    assert await seqs(before=6, last=2) == [4, 5]
    assert await seqs(after=4, before=6, last=5) == [5]
    assert await seqs(after=2, before=4) == [3]
    assert await seqs(after=3, before=4) == []
    assert await seqs(before=1, last=3) == []
    assert await seqs(before=20, last=2) == [6, 7]
    [fourth] = await store.turns("s", after=3, before=5)
    assert fourth.messages == turn(4)


async def test_sessions_not_saved_to_since_a_time_are_pruned(store: SessionStore) -> None:
    await store.append("old", "k", turn(1), [1, 1])
    await store.put_summary("old", Summary(through=1, text="s"))
    await store.append("revived", "k1", turn(1), [1, 1])
    cut = time.time()
    while time.time() == cut:  # the next turn is saved after the cut, however fine the clock
        await anyio.lowlevel.checkpoint()
    await store.append("revived", "k2", turn(2), [1, 1])
    await store.append("new", "k", turn(1), [1, 1])
    assert await store.prune(cut) == 1
    assert sorted(i.session_id for i in await store.sessions()) == ["new", "revived"]
    assert await store.turns("old") == []
    assert await store.summary("old") is None
    assert len(await store.turns("revived")) == 2
    assert await store.append("old", "k", turn(1), [1, 1])  # its key is forgotten too
    assert await store.prune(cut) == 0


async def test_a_sqlite_session_read_whole_costs_in_proportion_to_its_length(
    tmp_path: Path,
) -> None:
    """A turn's messages were searched for by the whole range of turns read, once a turn:
    `sessions show` of a 5,000-turn session took 35 s (quadratic); they are looked up by the
    turn's number. Counted in SQLite's own steps, which no machine's load changes."""
    path = tmp_path / "memory.sqlite3"
    store = SQLiteStore(path)
    await store.append("s", "k1", turn(1, tool=True), [1] * 4)
    assert [t.seq for t in await store.turns("s")] == [1]
    await store.aclose()
    query: str = sqlite_store._SELECT_TURNS  # pyright: ignore[reportPrivateUsage]
    steps: list[int] = []  # SQLite's steps of each read

    def step() -> int:
        steps[-1] += 1
        return 0  # go on

    with closing(sqlite3.connect(path)) as db:
        for length in (200, 400):
            with db:  # turns 2..length, each a copy of turn 1's four messages
                db.execute("DELETE FROM memory_turns WHERE seq > 1")
                db.execute("DELETE FROM memory_messages WHERE seq > 1")
                db.executemany(
                    "INSERT INTO memory_turns SELECT session_id, ?, ?, created_at "
                    "FROM memory_turns WHERE seq = 1",
                    [(n, f"k{n}") for n in range(2, length + 1)],
                )
                db.executemany(
                    "INSERT INTO memory_messages SELECT session_id, ?, position, role, message, "
                    "tokens FROM memory_messages WHERE seq = 1",
                    [(n,) for n in range(2, length + 1)],
                )
            steps.append(0)
            db.set_progress_handler(step, 1)
            rows = db.execute(query, ("s", 0, 0, 2**62)).fetchall()
            db.set_progress_handler(None, 1)
            assert len(rows) == 4 * length
        plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {query}", ("s", 0, 0, 2**62))]
    assert steps[1] < 2.2 * steps[0], steps  # twice the turns: 3.95x the steps, before
    assert any("SEARCH m USING" in p and "(session_id=? AND seq=?)" in p for p in plan), plan
    store = SQLiteStore(path)
    turns = await store.turns("s")  # the store reads them all, in order
    assert [t.seq for t in turns] == list(range(1, 401))
    assert turns[-1].messages == turn(1, tool=True)
    assert [t.seq for t in await store.turns("s", after=10, before=14)] == [11, 12, 13]
    await store.aclose()


async def test_a_key_saved_again_stores_nothing(store: SessionStore) -> None:
    assert await store.append("s", "same", turn(1), [1, 1])
    assert not await store.append("s", "same", turn(1), [1, 1])
    assert len(await store.turns("s")) == 1


async def test_concurrent_appends_get_consecutive_numbers(store: SessionStore) -> None:
    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(store.append, "s", f"k{n}", turn(n), [1, 1])
    turns = await store.turns("s")
    assert [t.seq for t in turns] == list(range(1, 9))
    assert sorted(t.key for t in turns) == sorted(f"k{n}" for n in range(8))


async def test_a_summary_never_goes_back_to_fewer_turns(store: SessionStore) -> None:
    assert await store.summary("s") is None
    await store.put_summary("s", Summary(through=3, text="three", tokens=5))
    await store.put_summary("s", Summary(through=2, text="two", tokens=5))
    summary = await store.summary("s")
    assert summary is not None
    assert (summary.through, summary.text) == (3, "three")


async def test_sessions_are_listed_newest_first_and_deleted(store: SessionStore) -> None:
    await store.append("old", "k", turn(1), [1, 1])
    await store.append("new", "k", turn(1), [1, 1])
    await store.append("new", "k2", turn(2), [1, 1])
    await store.put_summary("new", Summary(through=1, text="s"))
    infos = await store.sessions()
    assert [(i.session_id, i.turns, i.summarised_through) for i in infos] == [
        ("new", 2, 1),
        ("old", 1, 0),
    ]
    assert await store.delete("new")
    assert not await store.delete("new")
    assert await store.turns("new") == []
    assert await store.summary("new") is None
    assert [i.session_id for i in await store.sessions()] == ["old"]


async def test_only_the_newest_sessions_asked_for_are_listed(store: SessionStore) -> None:
    for n in range(5):
        await store.append(f"s{n}", "k1", turn(n), [1, 1])
        await store.append(f"s{n}", "k2", turn(n), [1, 1])
        cut = time.time()
        while time.time() == cut:  # each newer than the last, however coarse the clock
            await anyio.lowlevel.checkpoint()
    await store.put_summary("s3", Summary(through=1, text="t"))
    newest = await store.sessions(limit=2)
    assert [(i.session_id, i.turns, i.summarised_through) for i in newest] == [
        ("s4", 2, 0),
        ("s3", 2, 1),
    ]
    assert await store.sessions(limit=0) == []
    assert [i.session_id for i in await store.sessions(limit=9)] == ["s4", "s3", "s2", "s1", "s0"]
    assert await store.sessions(limit=None) == await store.sessions(limit=9)


async def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    for url in (
        "postgresql://gw:secret@127.0.0.1:1/db",
        "redis://:secret@127.0.0.1:1/0",
        # libpq and redis-py read a password from the query too: it was shown as given.
        "postgresql://gw@127.0.0.1:1/db?password=secret",
        "redis://127.0.0.1:1/0?password=secret",
    ):
        store = store_from_url(url)
        with pytest.raises(MemoryStoreError) as caught:
            await store.turns("s")
        assert "secret" not in str(caught.value)
        # One line, as the run store's (libpq's hint on a second line is left out).
        assert "\n" not in str(caught.value), caught.value
        # Each named by its plain URL (Redis's was `RedisStore('redis://:***@...')`).
        shown = url.replace("secret", "***")
        assert str(caught.value).startswith(f"chat memory {shown}: "), caught.value
        await store.aclose()


async def test_a_postgres_database_that_does_not_exist_is_made(postgres_url: str) -> None:
    """It failed the run (exit 1), while the run store made its own database."""
    server = postgres_url.rsplit("/", 1)[0]
    database = f"memory_{uuid.uuid4().hex[:12]}"
    store = store_from_url(f"{server}/{database}")
    try:
        assert await store.append("s", "k1", turn(1), [1, 1])
        assert [t.key for t in await store.turns("s")] == ["k1"]
    finally:
        await store.aclose()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(database)))
        # A user who may not create one is told how it is done.
        await admin.execute("DROP ROLE IF EXISTS plain; CREATE ROLE plain LOGIN")
        store = store_from_url(f"{server.replace('postgres@', 'plain@')}/{database}")
        with pytest.raises(MemoryStoreError) as caught:
            await store.turns("s")
        await store.aclose()
        await admin.execute("DROP ROLE plain")
    said = str(caught.value)
    assert said.startswith(f"chat memory postgresql://plain@{server.split('@')[1]}/{database}: ")
    assert f"database '{database}' does not exist, and creating it failed (" in said
    assert "permission denied" in said
    assert said.endswith(f"create it (`createdb {database}`, or CREATE DATABASE as its owner)")


async def test_a_sqlite_store_read_only_writes_nothing_and_reads_none_where_it_has_none(
    tmp_path: Path,
) -> None:
    """`sessions list` of a run store with no memory in it, read only: the memory's tables are
    not made in the file, and it lists none."""
    path = tmp_path / "runs.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE workflow_status (id TEXT)")
    before = path.read_bytes()
    store = SQLiteStore(path, read_only=True)
    assert await store.sessions() == []
    assert await store.turns("s") == []
    with pytest.raises(MemoryStoreError, match="readonly database"):
        await store.append("s", "k1", turn(1), [1, 1])
    await store.aclose()
    assert path.read_bytes() == before


@pytest.mark.parametrize("url", ["mysql://x", "sqlite://relative", "nothing"])
def test_an_unknown_or_malformed_url_is_refused(url: str) -> None:
    with pytest.raises(MemoryStoreError, match="memory URL"):
        store_from_url(url)


async def test_postgres_goes_on_after_the_server_ended_its_connection(postgres_url: str) -> None:
    # What a server restart does to a kept connection (`pg_ctl restart`), from the next use on:
    # "terminating connection due to administrator command".
    database = f"memory_{uuid.uuid4().hex[:12]}"
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        store = store_from_url(f"{postgres_url.rsplit('/', 1)[0]}/{database}")
        try:
            assert await store.append("s", "k1", turn(1), [1, 1])
            ended = await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )
            assert [row[0] for row in await ended.fetchall()] == [True]
            assert [t.key for t in await store.turns("s")] == ["k1"]  # on a new connection
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )
            assert await store.append("s", "k2", turn(2), [1, 1])  # a write too, once
            assert [t.key for t in await store.turns("s")] == ["k1", "k2"]
        finally:
            await store.aclose()
            await admin.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(database)))


async def test_redis_lists_sessions_in_one_round_trip_a_batch(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = redis_store.RedisStore(redis_url, prefix=f"test-{uuid.uuid4().hex}")
    for n in range(25):
        await store.append(f"s{n}", "k1", turn(n), [1, 1])
        if n % 2:
            await store.append(f"s{n}", "k2", turn(n), [1, 1])
            await store.put_summary(f"s{n}", Summary(through=1, text="t"))
    sent: list[object] = []
    execute = cast(Callable[..., Awaitable[object]], Redis.execute_command)  # pyright: ignore[reportUnknownMemberType]

    async def counted(self: Redis, *args: object, **options: object) -> object:
        sent.append(args[0])
        return await execute(self, *args, **options)

    monkeypatch.setattr(redis_store, "LIST_BATCH", 10)
    monkeypatch.setattr(Redis, "execute_command", counted)
    infos = await store.sessions()
    assert len(sent) == 1 + 3  # the index, then 3 batches of 10: not a GET and LLEN each (51)
    assert [info.session_id for info in infos] == [f"s{n}" for n in reversed(range(25))]
    assert [(info.turns, info.summarised_through) for info in infos[:2]] == [(1, 0), (2, 1)]
    sent.clear()
    newest = await store.sessions(limit=10)  # the index's newest 10 alone, then one batch
    assert (len(sent), [info.session_id for info in newest]) == (
        2,
        [f"s{n}" for n in range(24, 14, -1)],
    )
    for info in infos:
        await store.delete(info.session_id)
    await store.aclose()


@pytest.mark.parametrize("anyio_backend", ["trio"])
@pytest.mark.parametrize(("kind", "what"), [("postgres", "PostgreSQL"), ("redis", "Redis")])
async def test_a_database_store_under_trio_says_it_runs_on_asyncio_only(
    kind: str, what: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Once its driver's own errors came out ("no running event loop", trio's "unrecognized
    yield message"), and a Redis client made meanwhile failed again as `open_gateway` closed
    it, masking the first. Now one clear error, and nothing opened to close."""
    url: str = request.getfixturevalue(f"{kind}_url")
    said = f"{what} memory runs on asyncio only"
    store = store_from_url(url)
    with pytest.raises(MemoryStoreError, match=said):
        await store.turns("s")
    await store.aclose()
    script = tmp_path / "answers.json"
    script.write_text('[{"content": "never asked"}]')
    config = parse_config(
        {"gateway": {"memory": url}, "agents": {"a": {"model": f"scripted:{script}"}}}
    )
    with anyio.fail_after(30), pytest.raises(MemoryStoreError, match=said) as caught:
        async with open_gateway(config, state_dir=tmp_path) as gateway:
            await gateway.run("a", "first", session_id="t1")
    assert "trio" in str(caught.value)


async def test_a_summary_with_a_nul_character_is_kept(store: SessionStore) -> None:
    """A model echoing a pasted NUL in its summary: PostgreSQL's text refused it, and every
    later turn of the session failed. It keeps it as U+FFFD; the others as it is."""
    await store.append("nul", "k1", turn(1), [1, 1])
    await store.put_summary("nul", Summary(through=1, text="x\x00y said", tokens=3))
    summary = await store.summary("nul")
    assert summary is not None
    assert summary.through == 1
    assert summary.text in ("x\x00y said", "x\ufffdy said")


async def test_looking_into_a_postgres_store_not_made_makes_nothing(postgres_url: str) -> None:
    """`sessions list|show|delete|prune` made the database a URL named (a typo too) and the
    tables."""
    server = postgres_url.rsplit("/", 1)[0]
    database = f"memory_{uuid.uuid4().hex[:12]}"
    looked = PostgresStore(f"{server}/{database}", make=False)
    assert await looked.sessions() == []
    assert await looked.turns("s") == []
    assert await looked.summary("s") is None
    assert await looked.delete("s") is False
    assert await looked.prune(time.time()) == 0
    await looked.aclose()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
        found = await admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,))
        assert await found.fetchone() is None
        await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        looked = PostgresStore(f"{server}/{database}", make=False)
        assert await looked.sessions() == []  # a database without the memory's tables
        assert await looked.turns("s") == []
        assert await looked.delete("s") is False
        assert await looked.prune(time.time()) == 0
        await looked.aclose()
        async with await psycopg.AsyncConnection.connect(f"{server}/{database}") as db:
            tables = await db.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE 'memory_%'"
            )
            assert await tables.fetchall() == []
        made = PostgresStore(f"{server}/{database}")
        assert await made.append("s", "k1", turn(1), [1, 1])
        await made.aclose()
        looked = PostgresStore(f"{server}/{database}", make=False)
        assert [i.session_id for i in await looked.sessions()] == ["s"]
        assert await looked.delete("s") is True  # where it is made, it deletes
        assert await looked.sessions() == []
        await looked.aclose()
    finally:
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as admin:
            await admin.execute(
                sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database))
            )


def _freeze(cluster: PostgresCluster, sig: signal.Signals) -> None:
    """Signal the cluster's postmaster and its children: a server that stopped answering."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    children = subprocess.run(
        ["pgrep", "-P", str(postmaster)], capture_output=True, text=True, check=False
    ).stdout.split()
    for pid in [postmaster, *map(int, children)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


async def test_a_postgres_server_that_stops_answering_fails_the_use_in_bounded_time(
    pg_cluster: PostgresCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A frozen server hung the turn, and every session of the process behind its lock, with
    no error and no end (Redis fails in 5 s). Its error comes alone: psycopg's own warning
    that the cancelled query's cancel was interrupted was logged beside it."""
    url = pg_cluster.url.rsplit("/", 1)[0] + "/gw"
    store = PostgresStore(url, answer_wait=1)
    fresh = PostgresStore(url, answer_wait=1)
    assert await store.append("s", "k1", turn(1), [1, 1])
    _freeze(pg_cluster, signal.SIGSTOP)
    try:
        with anyio.fail_after(20):
            with pytest.raises(MemoryStoreError) as caught:
                await store.turns("s")
            assert str(caught.value) == (f"chat memory {url}: the server did not answer within 1 s")
            with pytest.raises(MemoryWriteUnknown, match="did not answer within 1 s"):
                await store.append("s", "k2", turn(2), [1, 1])
            with pytest.raises(MemoryStoreError, match="did not answer within 1 s"):
                await fresh.sessions()  # connecting, too
    finally:
        _freeze(pg_cluster, signal.SIGCONT)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
    with anyio.fail_after(20):  # back: it goes on, on a new connection
        assert await store.append("s", "k2", turn(2), [1, 1]) in (True, False)
        assert [t.key for t in await store.turns("s")] == ["k1", "k2"]
    await store.aclose()
    await fresh.aclose()
