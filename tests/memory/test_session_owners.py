"""An authenticated caller's sessions are its own: the key `@caller/session_id`, composed
above the stores, that no other caller's can meet, and that the operator names to reach it."""

from __future__ import annotations

import pytest

from agent import AssistantMessage, InProcessStore, MemoryStoreError, SessionMemory, UserMessage
from gateway.session_owners import OwnedMemory, owned_memory, owned_session, session_owner

pytestmark = pytest.mark.anyio


def test_the_key_names_its_owner_and_no_two_callers_keys_meet() -> None:
    assert owned_session("token-1", "shared1") == "@token-1/shared1"
    assert session_owner("@token-1/shared1") == "token-1"
    # A `/` in a subject is escaped: "a" naming "b/c" is not "a/b" naming "c".
    assert owned_session("a", "b/c") != owned_session("a/b", "c")
    assert session_owner(owned_session("a/b%2F", "c")) == "a/b%2F"
    assert session_owner(owned_session("alice@example.com", "x/y")) == "alice@example.com"
    # Sessions kept as named (the command line, a server without tokens) are nobody's.
    for key in ("shared1", "project/notes", "@", "@/x", "@alone"):
        assert session_owner(key) is None, key


async def test_callers_naming_one_session_id_keep_apart_and_the_stored_key_reaches_it() -> None:
    store = InProcessStore()
    memory = SessionMemory(store)
    alice, bob = OwnedMemory(memory, "alice"), OwnedMemory(memory, "bob")
    assert owned_memory(memory, None) is memory  # a run nobody authenticated: as named
    assert owned_memory(None, "alice") is None
    turn = [UserMessage(content="my secret is PINEAPPLE-42"), AssistantMessage(content="Noted.")]
    await alice.save("shared1", "run-1:0", turn)
    assert (await bob.load("shared1")).messages == []
    assert (await memory.load("shared1")).messages == []
    assert (await memory.load("@alice/shared1")).messages == turn
    assert [s.session_id for s in await store.sessions()] == ["@alice/shared1"]


async def test_a_session_id_too_long_with_the_callers_name_says_so() -> None:
    alice = OwnedMemory(SessionMemory(InProcessStore()), "alice")
    await alice.load("x" * 248)  # 256 with "@alice/"
    with pytest.raises(MemoryStoreError, match="adds the caller's name \\(7 characters\\)"):
        await alice.load("x" * 250)
    with pytest.raises(MemoryStoreError, match="1 to 256 characters"):
        await alice.load("")
