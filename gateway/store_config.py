"""Where durable runs are kept: the run store in the config, its default, its URL.

    [store]
    url = "postgresql://gw@db.internal:5432/gw"   # default: the SQLite file below
    keep_days = 30                                 # finished runs are deleted after (0: never)
    unreachable_wait = 60                          # s a run waits for a store gone away
    read_pickled = false                           # true: read an older version's records

With no URL, runs are kept in the SQLite file `agent-gateway.sqlite3` in the data directory
(see `memory_config.data_dir`). Chat memory is kept in the run store's database too, unless
the config names another store for it. `--store URL` on the command line wins over the
config; `--state-dir DIR` means the file in DIR; `--no-store` runs without a store. This module does not import the store itself (DBOS takes a while to import).
"""

from __future__ import annotations

import shlex
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agent.url_credentials import redacted, without_credentials_of

from .errors import ConfigError, StoreError
from .home import expand_user
from .memory_config import MAX_KEEP_DAYS, MEMORY_FILE, default_memory_url

__all__ = [
    "STORE_FILE",
    "StoreSettings",
    "check_store_url",
    "default_store_url",
    "redacted",
    "runs_stored",
    "store_option",
    "without_credentials_of",
]

STORE_FILE = MEMORY_FILE


class StoreSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    url: str | None = None
    """`sqlite:///FILE` (relative to the config file; four slashes: absolute) or
    `postgresql://user@host:port/db` (several processes, several machines)."""
    keep_days: float = Field(default=30, ge=0, le=MAX_KEEP_DAYS)
    """Finished runs (succeeded, failed, cancelled) older than this are deleted, in the
    background of `run` and `serve` (`durable.retention`); 0 keeps them for ever. Runs not
    finished are never deleted."""
    unreachable_wait: float = Field(default=60, gt=0)
    """A PostgreSQL store that becomes unreachable while a run executes, or a SQLite store that
    another process locks: seconds the run waits for it (it goes on if the store is back), then
    it stops (exit 1), resumable from its last recorded step."""
    takeover_seconds: float = Field(default=5, gt=0)
    """`serve` on PostgreSQL: how often a replica looks for the runs of replicas that died
    (it finishes them)."""
    read_pickled: bool = False
    """Read records in Python's pickle format, as agent-gateway wrote them before it wrote
    JSON: reading one runs any code it names, so only for a store whose every writer is
    trusted (also `AGENT_GATEWAY_READ_PICKLED=1`). Else such a record is refused, unread."""

    @field_validator("url")
    @classmethod
    def _a_store_url(cls, value: str | None) -> str | None:
        if value is not None:
            if "${" in value:
                raise ValueError(
                    f"{redacted(value)!r}: ${{VAR}} is expanded only in the mcpServers' launch "
                    "keys; write the URL itself, or pass --store URL"
                )
            try:
                check_store_url(value)
            except StoreError as exc:
                raise ValueError(str(exc)) from None
        return value


def default_store_url(state_dir: str | Path | None = None) -> str:
    """The SQLite file in `state_dir`, else in the data directory: chat memory's default
    file, so runs and conversations are kept in one database. Raises `ConfigError` where the
    data directory is not known (`memory_config.data_dir`)."""
    return default_memory_url(state_dir)


def runs_stored(url: str) -> bool:
    """Whether the store at `url` can hold a run yet: not a SQLite file that does not exist,
    nor a database without the runs' tables (chat memory alone made it, before any run was
    stored). Looks without writing (opening the store to read would fail on the missing
    tables; to run, would create them); a database it cannot reach is for opening the store
    to report. Blocks: call it in a worker thread."""
    if url.startswith(("postgresql:", "postgres:")):
        return _postgres_holds_runs(url)
    if not url.startswith("sqlite:///"):
        return True
    path = Path(url.removeprefix("sqlite:///"))
    if not path.exists():
        return False
    try:
        # mode=rw: a file removed meanwhile is not created again.
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True)) as db:
            found = db.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'workflow_status'"
            ).fetchone()
    except sqlite3.Error:
        return True  # not a database, say: opening the store says so, as it did
    return found is not None


def store_option(url: str) -> str:
    """What names the store at `url` on the command line: " --store URL" ("" for the
    default one), its password hidden."""
    try:
        default = default_store_url()
    except ConfigError:  # no default store here: any store is named
        default = None
    return "" if url == default else f" --store {shlex.quote(redacted(url))}"


def check_store_url(url: str) -> str:
    """`url` if it names a run store (a relative SQLite file made absolute: a hint that names
    it, or another process, finds the same file; `~` expanded, which no shell does inside a
    URL). Raises `StoreError` (bad input) if not."""
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if path.is_absolute():
            return url
        try:
            return f"sqlite:///{expand_user(path).absolute()}"
        except ConfigError as exc:  # `~` where there is no home
            raise StoreError(f"{redacted(url)!r}: {exc}") from None
    if url.startswith(("postgresql://", "postgres://")):
        if urlsplit(url).path.strip("/"):
            return url
        raise StoreError(  # DBOS needs one: it creates it if need be
            f"the store URL names no database: {redacted(url)!r} "
            "(postgresql://USER@HOST:PORT/DBNAME)"
        )
    raise StoreError(
        f"not a run store URL (sqlite:///FILE or postgresql://USER@HOST:PORT/DB): {redacted(url)!r}"
    )


def _postgres_holds_runs(url: str) -> bool:
    import psycopg  # here: PostgreSQL stores only, and importing it costs every command

    try:
        with psycopg.connect(url, connect_timeout=10) as connection:
            row = connection.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()
    except psycopg.Error:
        return True
    return row is not None and row[0] is not None
