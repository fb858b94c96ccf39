"""`sessions list | show ID | delete ID | prune --older-than DAYS`: the conversations chat
memory keeps (a caller's own, `@caller/ID`, named by that key; see `session_owners`)."""

from __future__ import annotations

import argparse
import json
import sys

import anyio
from rich.cells import cell_len

from agent import AssistantMessage, MemoryStoreError, ToolMessage, UserMessage
from agent.memory import SessionInfo, SessionStore, SQLiteStore
from agent.memory.base import hidden_at
from agent.memory.postgres_store import PostgresStore
from toolkits.printable import printable

from ..config import Config
from ..errors import GatewayError
from ..memory_config import MEMORY_FILE, default_memory_url, memory_url, open_memories
from ..memory_retention import prune_sessions
from ..session_owners import session_owner
from ..store_config import check_store_url, redacted
from .common import (
    Commands,
    check_session_id,
    config_of,
    count_of,
    pick_agent,
    plural,
    user_path,
    utc,
    vacuumed_line,
)
from .exits import OK
from .output import result_json, result_stdout

__all__ = ["memory_store_url", "register"]


MEMORY_STORE_URLS = ("sqlite:///FILE", "postgresql://USER@HOST:PORT/DB", "redis://HOST:PORT/DB")
LIST_LIMIT = 100
"""How many sessions `sessions list` shows by default, newest first (as `runs list` does)."""


class UnknownSession(GatewayError):
    """No session of that id in the store (bad input: exit 2)."""


def memory_store_url(args: argparse.Namespace, config: Config) -> str | None:
    """Where chat memory is kept by default: `--store URL`, else the config's run store."""
    if args.store is not None and args.state_dir is not None:
        raise GatewayError("give one of --store and --state-dir")
    return check_store_url(args.store) if args.store is not None else config.store.url


def _named_store(args: argparse.Namespace) -> str | None:
    """The store `--store URL` or `--state-dir DIR` names: `sessions` looks there, not in
    a memory store the config names (a `sessions delete` must act on the database named)."""
    if args.store is not None and args.state_dir is not None:
        raise GatewayError("give one of --store and --state-dir")
    if args.store is not None:
        return _memory_store_url(args.store)
    return default_memory_url(args.state_dir) if args.state_dir is not None else None


def _memory_store_url(url: str) -> str:
    """`url` if it names a store chat memory can be kept in (a run store's database, or
    Redis), as `[memory] url` does. Raises `GatewayError` (bad input) if not."""
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss", "unix"):
        return url
    if scheme == "memory":
        raise GatewayError(
            "memory:// keeps sessions in the process that runs them only: no other command "
            "can look into it"
        )
    if scheme in ("sqlite", "postgresql", "postgres"):
        return check_store_url(url)
    raise GatewayError(
        f"not a chat memory store URL ({', '.join(MEMORY_STORE_URLS)}): {redacted(url)!r}"
    )


def register(commands: Commands) -> None:
    sessions = commands.add("sessions", _sessions)
    sessions.add_argument("action", nargs="?", choices=["list", "show", "delete", "prune"])
    sessions.add_argument("session_id", nargs="?", help="the session (show, delete)")
    sessions.add_argument("--agent", help="the store of this agent (default: the gateway's)")
    sessions.add_argument(
        "--state-dir",
        metavar="DIR",
        type=user_path,
        help="the SQLite file kept in this directory (not the memory store the config names)",
    )
    sessions.add_argument(
        "--store",
        metavar="URL",
        help="the store at URL: sqlite:///FILE, postgresql://..., redis://... (not the memory "
        "store the config names)",
    )
    sessions.add_argument(
        "--older-than",
        metavar="DAYS",
        type=float,
        help="prune: delete the sessions not used for DAYS days (then a SQLite file shrinks)",
    )
    sessions.add_argument(
        "--limit",
        type=count_of("sessions"),
        metavar="N",
        help=f"list: the newest N sessions (default {LIST_LIMIT}; 0: every one)",
    )
    sessions.add_argument("--json", action="store_true", help="print JSON")


async def _sessions(args: argparse.Namespace) -> int:
    if args.action is None:
        raise GatewayError(
            "say what to do: agent-gateway sessions list | show ID | delete ID | "
            "prune --older-than DAYS"
        )
    if args.limit is not None and args.action != "list":
        raise GatewayError(f"--limit is for sessions list, not sessions {args.action}")
    if args.action == "prune":
        if args.older_than is None or not args.older_than > 0:
            raise GatewayError(
                "sessions prune needs --older-than DAYS (more than 0): the sessions not used "
                "for that long are deleted"
            )
    elif args.action != "list":
        if args.session_id is None:
            raise GatewayError(f"sessions {args.action} needs a session id")
        check_session_id(args.session_id)
    config = config_of(args, runs_it=False)  # it reads chat memory: no server starts
    named = _named_store(args)
    agent = pick_agent(config, args.agent) if args.agent else None
    own = config.agents[agent].memory if agent else None
    # The config's memory store, unless the command names one.
    configured = config.gateway.memory if named is None else None
    own = own if named is None else None
    run_store = named or config.store.url
    # First: no place to look (no home directory, none named) is bad input, said as such.
    url = memory_url(configured, own, state_dir=args.state_dir, run_store=run_store)
    memories, stores = open_memories(
        configured, {agent or "": own}, state_dir=args.state_dir, run_store=run_store
    )
    store = next(iter(memories.values())).store
    if isinstance(store, SQLiteStore) and args.action in ("list", "show"):
        # Looking writes nothing: a backup, another user's store, a read-only directory.
        store = stores[url] = SQLiteStore(store.path, read_only=True)
    if isinstance(store, PostgresStore):
        # Nor does any command make the database or the tables: a mistyped name made an empty
        # one (deleting from, or pruning, a store not made deletes nothing).
        store = stores[url] = PostgresStore(url, make=False)
    where = str(store.path) if isinstance(store, SQLiteStore) else redacted(url)
    try:
        if isinstance(store, SQLiteStore) and not await anyio.Path(store.path).exists():
            # Opening it to look would make it: a new empty store (or a mistyped --state-dir's).
            if args.action == "prune":
                shown = {"deleted": 0, "bytes_before": None, "bytes_after": None}
                said = json.dumps(shown) if args.json else f"no sessions in {where}: none deleted"
                print(said, file=result_stdout())
                return OK
            if args.action != "list":
                raise UnknownSession(f"no session {args.session_id!r} in {where}")
            if args.state_dir is not None and not args.json:  # said even when not a terminal
                print(
                    f"no sessions are kept in {args.state_dir}: it has no {MEMORY_FILE}",
                    file=sys.stderr,
                )
                return OK
            return _print_list([], where, as_json=args.json)
        if args.action == "list":
            limit = LIST_LIMIT if args.limit is None else args.limit
            return await _list(store, limit, where, as_json=args.json)
        if args.action == "show":
            return await _show(store, args.session_id, where, as_json=args.json)
        if args.action == "prune":
            return await _prune(store, args.older_than, where, as_json=args.json)
        return await _delete(store, args.session_id, where, as_json=args.json)
    finally:
        for opened in stores.values():
            await opened.aclose()


async def _list(store: SessionStore, limit: int, where: str, *, as_json: bool) -> int:
    """The newest `limit` sessions (0: every one); a line on stderr when there are more."""
    # One more than shown: whether there are more, to say so. The store reads no others.
    infos = await store.sessions(limit=limit + 1 if limit else None)
    if limit and len(infos) > limit:  # on stderr: stdout stays the listing (or the JSON) alone
        infos = infos[:limit]
        print(
            f"the newest {limit} sessions; there are more: --limit N shows N, --limit 0 all",
            file=sys.stderr,
        )
    return _print_list(infos, where, as_json=as_json)


def _print_list(infos: list[SessionInfo], where: str, *, as_json: bool) -> int:
    """The sessions, latest first (UTC times); on a terminal, a note on stderr if none."""
    if as_json:
        listed = [_as_json(info) for info in infos]
        print(json.dumps(listed), file=result_stdout())
        return OK
    for info in infos:
        when = utc(info.updated_at * 1000)
        summary = f"  summarised through turn {info.summarised_through}" * bool(
            info.summarised_through
        )
        owner = session_owner(info.session_id)
        whose = f"  of {owner}" if owner is not None else ""
        # Padded to its cells, not its characters: a wide (CJK) id keeps the columns in line.
        # One kept before such ids were refused shows its invisible characters written out.
        seen = "".join(
            f"\\u{ord(c):04x}" if hidden_at(info.session_id, i) else c
            for i, c in enumerate(info.session_id)
        )
        shown = seen + " " * (32 - cell_len(seen))
        line = f"{shown} {plural(info.turns, 'turn'):>10}  {when}{summary}{whose}"
        print(printable(line), file=result_stdout())
    if not infos and sys.stderr.isatty():  # stdout stays empty: a listing of none
        print(f"no sessions in {where}", file=sys.stderr)
    return OK


def _ms(seconds: float) -> int:
    """A time as `runs list --json` gives it: milliseconds since the epoch."""
    return round(seconds * 1000)


def _as_json(info: SessionInfo) -> dict[str, object]:
    return {
        "session_id": info.session_id,
        "turns": info.turns,
        "updated_ms": _ms(info.updated_at),
        "summarised_through": info.summarised_through,
        "owner": session_owner(info.session_id),
    }


async def _show(store: SessionStore, session_id: str, where: str, *, as_json: bool) -> int:
    turns = await store.turns(session_id)
    summary = await store.summary(session_id)
    if not turns:
        raise UnknownSession(f"no session {session_id!r} in {where}")
    if as_json:
        # `created_at` (seconds) stays for the scripts that read it; `*_ms` as elsewhere.
        document = {
            "session_id": session_id,
            "created_ms": _ms(turns[0].created_at),
            "updated_ms": _ms(turns[-1].created_at),
            "summary": {**summary.model_dump(), "created_ms": _ms(summary.created_at)}
            if summary
            else None,
            "turns": [
                {**turn.model_dump(mode="json"), "created_ms": _ms(turn.created_at)}
                for turn in turns
            ],
        }
        print(result_json(document), file=result_stdout())
        return OK
    lines: list[str] = []
    if summary is not None:
        lines.append(f"summary of turns 1-{summary.through}: {summary.text}\n")
    for turn in turns:
        lines.append(f"--- turn {turn.seq}")
        for message in turn.messages:
            if isinstance(message, UserMessage):
                lines.append(f"user: {message.content}")
            elif isinstance(message, AssistantMessage):
                if message.content:
                    lines.append(f"assistant: {message.content}")
                for call in message.tool_calls:
                    lines.append(f"assistant calls {call.name} {json.dumps(call.arguments)}")
            elif isinstance(message, ToolMessage):
                lines.append(f"{message.name}: {message.content}")
    # A model's, a tool's or a caller's words, as `runs show` shows them: never obeyed by a
    # terminal (`--json` has them exactly).
    print(printable("\n".join(lines)), file=result_stdout())
    return OK


async def _prune(store: SessionStore, days: float, where: str, *, as_json: bool) -> int:
    pruned = await prune_sessions(store, days)
    if not as_json:  # said before VACUUM, which may fail (a full disk): they are deleted
        said = f"deleted {plural(pruned, 'session')} not used for {days:g} days from {where}"
        print(said, file=result_stdout())
    before = after = None
    if isinstance(store, SQLiteStore):
        # Deleted rows leave free pages, not a smaller file: VACUUM gives them back (those
        # the run store's keep_days freed in the same file too).
        size = (await anyio.Path(store.path).stat()).st_size
        try:
            await store.vacuum()
        except MemoryStoreError as exc:  # VACUUM writes a copy: a full disk has no room for it
            # The sessions stay deleted and SQLite reuses their room: the prune did its work.
            print(vacuumed_line(store.path, None, exc, "turns"), file=sys.stderr)
        else:
            before, after = size, (await anyio.Path(store.path).stat()).st_size
            if not as_json:
                print(
                    vacuumed_line(store.path, (before, after), None, "turns"), file=result_stdout()
                )
    if as_json:
        shown = {"deleted": pruned, "bytes_before": before, "bytes_after": after}
        print(json.dumps(shown), file=result_stdout())
    return OK


async def _delete(store: SessionStore, session_id: str, where: str, *, as_json: bool) -> int:
    if not await store.delete(session_id):
        raise UnknownSession(f"no session {session_id!r} in {where}")
    if as_json:
        print(json.dumps({"session_id": session_id, "deleted": True}), file=result_stdout())
    else:
        print(f"deleted session {session_id!r}", file=result_stdout())
    return OK
