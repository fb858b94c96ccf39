"""Chat memory in the config, and the stores it names.

    [gateway]
    memory = "redis://127.0.0.1:6379/0"     # every agent's store, by URL (or a table as below)

    [agents.assistant.memory]               # this agent's own settings
    url = "postgresql://gw@db.internal/gw"  # default: the gateway's, else the default SQLite file
    turns = 10                              # turns the model sees
    max_tokens = 4000                       # and at most these tokens of them
    summarise = true                        # what falls out is summarised by the agent's model
    keep_days = 90                          # sessions not used for this long are deleted (0: never)

With no URL anywhere, memory is kept in the run store's database (`[store] url`, `--store`),
else in the SQLite file `agent-gateway.sqlite3` (the run store's default file too) in the state
directory (`--state-dir`), else in the data directory: `$AGENT_GATEWAY_DATA_DIR`, else
`$XDG_DATA_HOME/agent-gateway` (an absolute path; a relative one is ignored, as the XDG spec
says), else `~/.local/share/agent-gateway`. Nothing is written until a run uses a session.
Where that leaves no place (no home directory, none named), memory fails only once a run uses
a session, saying what to set: whatever uses none still runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent import ChatMessage, MemoryStoreError
from agent.memory import (
    DEFAULT_TURNS,
    SessionInfo,
    SessionMemory,
    SessionStore,
    StoredTurn,
    Summary,
    store_from_url,
    store_url_problem,
)
from agent.memory.urls import store_identity
from agent.url_credentials import redacted

from .errors import ConfigError
from .home import expand_user, home

__all__ = [
    "DATA_DIR_ENV",
    "MAX_KEEP_DAYS",
    "MEMORY_FILE",
    "MemoryConfig",
    "data_dir",
    "default_memory_url",
    "memory_url",
    "open_memories",
    "stores_keep_days",
]

DATA_DIR_ENV = "AGENT_GATEWAY_DATA_DIR"
MEMORY_FILE = "agent-gateway.sqlite3"


MAX_KEEP_DAYS = 36500
"""The most days a `keep_days` may be (a hundred years; 0 is for ever): beyond it the date
it counts back to is no date (`inf`, `1e18`), and pruning failed on every run."""


class MemoryConfig(BaseModel):
    """Where an agent's conversations are kept and how much of them its model sees."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    url: str | None = None
    turns: int | None = Field(default=DEFAULT_TURNS, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    summarise: bool = False
    keep_days: float = Field(default=0, ge=0, le=MAX_KEEP_DAYS)
    """Sessions not saved to for this long are deleted (0: kept until deleted)."""

    @model_validator(mode="before")
    @classmethod
    def _url_alone(cls, value: Any) -> Any:
        if isinstance(value, str):  # checked here: the error names the key as written
            return {"url": _store_url(value)}
        if not isinstance(value, dict | MemoryConfig):
            raise ValueError(
                f'a store URL ("sqlite:///memory.db") or a table (url, turns, ...), not {value!r}'
            )
        return cast(Any, value)

    @field_validator("url")
    @classmethod
    def _a_store_url(cls, value: str | None) -> str | None:
        return value if value is None else _store_url(value)


def _store_url(url: str) -> str:
    """`url` if it names a memory store; else `ValueError` saying why (checked with the config,
    as the run store's URL is: not first when a run uses it)."""
    if "${" in url:
        raise ValueError(
            f"{redacted(url)!r}: ${{VAR}} is expanded only in the mcpServers' launch keys; "
            "write the URL itself"
        )
    problem = store_url_problem(url)
    if problem is not None:
        raise ValueError(problem)
    return url


def data_dir() -> Path:
    """Where the gateway keeps its data when no state directory is given (`~` expanded).
    Raises `ConfigError` (what to set) where it is under a home directory there is not."""
    explicit = os.environ.get(DATA_DIR_ENV)
    xdg = os.environ.get("XDG_DATA_HOME", "")
    try:
        # A relative one would move with the working directory (a cron job started elsewhere
        # would find another, empty store): ours is refused, as a relative HOME is; the XDG
        # one is ignored, as its spec says.
        if explicit:
            chosen = expand_user(explicit)
            if not chosen.is_absolute():
                raise ConfigError(f"{DATA_DIR_ENV} ({explicit!r}) is not an absolute path")
            return chosen
        base = Path(xdg) if os.path.isabs(xdg) else home() / ".local" / "share"
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}: name a data directory with --state-dir DIR, or set {DATA_DIR_ENV} or "
            "XDG_DATA_HOME"
        ) from None
    return base / "agent-gateway"


def default_memory_url(state_dir: str | Path | None = None) -> str:
    """The default SQLite file's URL: in `state_dir`, else in the data directory. Raises
    `ConfigError` as `data_dir` does."""
    directory = expand_user(state_dir) if state_dir is not None else data_dir()
    return f"sqlite:///{(directory / MEMORY_FILE).absolute()}"


def memory_url(
    gateway: MemoryConfig | None,
    own: MemoryConfig | None,
    *,
    state_dir: str | Path | None = None,
    run_store: str | None = None,
) -> str:
    """Where an agent's memory is kept: its own URL, else the gateway's, else `run_store`,
    else the default file (in `state_dir`, else the data directory)."""
    named = (own.url if own else None) or (gateway.url if gateway else None)
    return named or run_store or default_memory_url(state_dir)


def stores_keep_days(
    gateway: MemoryConfig | None,
    agents: Mapping[str, MemoryConfig | None],
    *,
    state_dir: str | Path | None = None,
    run_store: str | None = None,
) -> dict[str, float]:
    """How long each store (by the URL `open_memories` keys it by) keeps sessions not used,
    0 for ever: several agents on one store, however each spells its URL
    (`store_identity`), keep them as long as the longest of their `keep_days` (0, for ever,
    is the longest), so no agent loses a session it keeps. Stores whose URLs do not tell
    (a Redis by its Unix socket and by TCP) are told apart by their servers when pruned
    (`pruning_sessions`), so every store is here, those kept for ever too."""
    kept: dict[str, tuple[str, float]] = {}  # by identity: a URL of it, and the days
    for own in agents.values():
        chosen = own or gateway or MemoryConfig()
        try:
            url = memory_url(gateway, own, state_dir=state_dir, run_store=run_store)
        except ConfigError:  # no place to keep it: nothing kept there to delete either
            continue
        days = chosen.keep_days or float("inf")
        identity = store_identity(url, users=False)  # of any user: it may be their tables
        first, known = kept.get(identity, (url, days))
        kept[identity] = (first, max(known, days))
    return {url: 0 if days == float("inf") else days for url, days in kept.values()}


def open_memories(
    gateway: MemoryConfig | None,
    agents: Mapping[str, MemoryConfig | None],
    *,
    state_dir: str | Path | None = None,
    run_store: str | None = None,
) -> tuple[dict[str, SessionMemory], dict[str, SessionStore]]:
    """Each agent's memory, and the stores under them by URL (one per store, however each
    URL spells it, shared; close them).
    With no URL configured, memory is kept in `run_store` (the run store's database, when
    it names one), else in the default file (in `state_dir`, else the data directory).

    Memory with no place to be kept (`data_dir` has none) fails once used, saying why.

    Raises `agent.errors.MemoryStoreError` for a bad URL.
    """
    stores: dict[str, SessionStore] = {}
    by_identity: dict[str, SessionStore] = {}
    memories: dict[str, SessionMemory] = {}
    for name, own in agents.items():
        chosen = own or gateway or MemoryConfig()
        try:
            url = memory_url(gateway, own, state_dir=state_dir, run_store=run_store)
        except ConfigError as exc:
            url = ""  # no URL names such a store
            stores.setdefault(url, _Unplaced(str(exc)))
        if url not in stores:
            identity = store_identity(url)
            if identity not in by_identity:  # one object: its session locks are one too
                by_identity[identity] = store_from_url(url)
            stores[url] = by_identity[identity]
        memories[name] = SessionMemory(
            stores[url],
            turns=chosen.turns,
            max_tokens=chosen.max_tokens,
            summarise=chosen.summarise,
        )
    return memories, stores


class _Unplaced:
    """The store of memory that has no place to be kept: each use fails, saying why."""

    def __init__(self, reason: str) -> None:
        self._reason = reason

    def _fail(self) -> NoReturn:
        raise MemoryStoreError(f"chat memory: {self._reason}")

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        self._fail()

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        self._fail()

    async def summary(self, session_id: str) -> Summary | None:
        self._fail()

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        self._fail()

    async def sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        self._fail()

    async def delete(self, session_id: str) -> bool:
        self._fail()

    async def prune(self, before: float) -> int:
        self._fail()

    async def aclose(self) -> None:
        pass
