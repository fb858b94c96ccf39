"""`sessions list | show ID | delete ID`: the conversations chat memory keeps."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

import anyio

from agent import AssistantMessage, ToolMessage, UserMessage
from agent.memory import SessionStore

from ..config import Config
from ..errors import GatewayError
from ..memory_config import MEMORY_FILE, open_memories
from ..store_config import check_store_url
from .common import Commands, check_session_id, config_of, pick_agent
from .exits import OK

__all__ = ["memory_store_url", "register"]


class UnknownSession(GatewayError):
    """No session of that id in the store (bad input: exit 2)."""


def memory_store_url(args: argparse.Namespace, config: Config) -> str | None:
    """Where chat memory is kept by default: `--store URL`, else the config's run store."""
    if args.store is not None and args.state_dir is not None:
        raise GatewayError("give one of --store and --state-dir")
    return check_store_url(args.store) if args.store is not None else config.store.url


def register(commands: Commands) -> None:
    sessions = commands.add("sessions", _sessions, "list, show or delete chat memory sessions")
    sessions.add_argument("action", choices=["list", "show", "delete"])
    sessions.add_argument("session_id", nargs="?", help="the session (show, delete)")
    sessions.add_argument("--agent", help="the store of this agent (default: the gateway's)")
    sessions.add_argument("--state-dir", help="the store of runs kept in this directory")
    sessions.add_argument("--store", metavar="URL", help="the run store at URL (as `run --store`)")
    sessions.add_argument("--json", action="store_true", help="print JSON")


async def _sessions(args: argparse.Namespace) -> int:
    if args.action != "list":
        if args.session_id is None:
            raise GatewayError(f"sessions {args.action} needs a session id")
        check_session_id(args.session_id)
    config = config_of(args)
    run_store = memory_store_url(args, config)
    if args.state_dir is not None and not await (anyio.Path(args.state_dir) / MEMORY_FILE).exists():
        # Opening it to look would make it (a mistyped --state-dir: a new empty store).
        raise UnknownSession(f"no sessions are kept in {args.state_dir}: it has no {MEMORY_FILE}")
    agent = pick_agent(config, args.agent) if args.agent else None
    own = {agent: config.agents[agent].memory} if agent else {"": None}
    memories, stores = open_memories(
        config.gateway.memory, own, state_dir=args.state_dir, run_store=run_store
    )
    store = next(iter(memories.values())).store
    try:
        if args.action == "list":
            return await _list(store, as_json=args.json)
        if args.action == "show":
            return await _show(store, args.session_id, as_json=args.json)
        return await _delete(store, args.session_id)
    finally:
        for opened in stores:
            await opened.aclose()


async def _list(store: SessionStore, *, as_json: bool) -> int:
    infos = await store.sessions()
    if as_json:
        print(json.dumps([info.model_dump() for info in infos]))
        return OK
    for info in infos:
        when = datetime.fromtimestamp(info.updated_at).isoformat(sep=" ", timespec="seconds")
        summary = f"  summarised through turn {info.summarised_through}" * bool(
            info.summarised_through
        )
        print(f"{info.session_id:<32} {info.turns:>4} turns  {when}{summary}")
    if not infos:
        print(f"no sessions in {store!r}")
    return OK


async def _show(store: SessionStore, session_id: str, *, as_json: bool) -> int:
    turns = await store.turns(session_id)
    summary = await store.summary(session_id)
    if not turns:
        raise UnknownSession(f"no session {session_id!r} in {store!r}")
    if as_json:
        document = {
            "session_id": session_id,
            "summary": summary.model_dump() if summary else None,
            "turns": [turn.model_dump(mode="json") for turn in turns],
        }
        print(json.dumps(document, ensure_ascii=False))
        return OK
    if summary is not None:
        print(f"summary of turns 1-{summary.through}: {summary.text}\n")
    for turn in turns:
        print(f"--- turn {turn.seq}")
        for message in turn.messages:
            if isinstance(message, UserMessage):
                print(f"user: {message.content}")
            elif isinstance(message, AssistantMessage):
                if message.content:
                    print(f"assistant: {message.content}")
                for call in message.tool_calls:
                    print(f"assistant calls {call.name} {json.dumps(call.arguments)}")
            elif isinstance(message, ToolMessage):
                print(f"{message.name}: {message.content}")
    return OK


async def _delete(store: SessionStore, session_id: str) -> int:
    if not await store.delete(session_id):
        raise UnknownSession(f"no session {session_id!r} in {store!r}")
    print(f"deleted session {session_id!r}")
    return OK
