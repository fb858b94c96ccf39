"""`runs list | show | resume | cancel`: durable runs in the run store (`--store URL`).

`run --store URL` starts a run there; see `gateway.durable`.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import asdict
from typing import TYPE_CHECKING

from ..app import open_gateway
from ..config import Config
from ..console import open_terminal_console
from ..errors import UnknownRun
from ..run_state import RunResult, RunState
from .common import (
    Commands,
    add_model_options,
    add_strict_option,
    add_trace_options,
    check_runnable,
    check_servers,
    config_of,
    pick_agent,
    trace_hooks,
    with_steps,
)
from .exits import OK
from .results import print_result

if TYPE_CHECKING:
    from ..durable import DurableRuns

__all__ = ["add_store_option", "register", "run_stored"]


def add_store_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--store",
        metavar="URL",
        help="the run store: sqlite:///FILE or postgresql://... (default: runs.sqlite in the "
        "data directory)",
    )


def register(commands: Commands) -> None:
    runs = commands.add("runs", _needs_action, "durable runs: list, show, resume, cancel")
    actions = runs.add_subparsers(metavar="ACTION")
    listing = actions.add_parser("list", help="the stored runs, newest first")
    listing.add_argument(
        "--status", help="only runs in this state: PENDING, SUCCESS, ERROR, CANCELLED"
    )
    listing.set_defaults(handler=_list)
    show = actions.add_parser("show", help="a run's status, state and recorded calls")
    show.add_argument("run_id")
    show.set_defaults(handler=_show)
    resume = actions.add_parser("resume", help="continue a run whose process stopped, here")
    resume.add_argument("run_id")
    add_model_options(resume, agent=False)
    add_strict_option(resume)
    add_trace_options(resume)
    resume.set_defaults(handler=_resume)
    cancel = actions.add_parser("cancel", help="stop a run: it is not resumed")
    cancel.add_argument("run_id")
    cancel.set_defaults(handler=_cancel)
    for sub in (listing, show, resume, cancel):
        add_store_option(sub)
        sub.add_argument("--config", help="TOML or JSON config")
        sub.add_argument("--json", action="store_true", help="print JSON")


async def _cancel(args: argparse.Namespace) -> int:
    async with _open(args.store, launch=False) as runs:
        await runs.cancel(args.run_id)
    print(f"cancelled {args.run_id}", file=sys.stderr)
    return OK


def _open(url: str | None, *, launch: bool = True) -> AbstractAsyncContextManager[DurableRuns]:
    # Imported here: DBOS takes seconds to import, and only these commands need it.
    try:
        from ..durable import open_runs
    except ImportError as exc:  # dbos is an optional extra
        raise UnknownRun(
            f"durable runs need DBOS: pip install 'agent-gateway[durable]' ({exc})"
        ) from None
    return open_runs(url, launch=launch)


def _needs_action(args: argparse.Namespace) -> int:
    raise UnknownRun("say what to do: agent-gateway runs list | show ID | resume ID | cancel ID")


async def _list(args: argparse.Namespace) -> int:
    async with _open(args.store, launch=False) as runs:
        found = await runs.list(args.status)
    if args.json:
        print(json.dumps([asdict(info) for info in found]))
        return OK
    for info in found:
        print(f"{info.run_id}  {info.status:<10} {info.agent or '?'}")
    return OK


async def _show(args: argparse.Namespace) -> int:
    async with _open(args.store, launch=False) as runs:
        info = await runs.get(args.run_id)
        steps = await runs.steps(args.run_id)
        state = await runs.state(args.run_id)
    if args.json:
        shown = {
            **asdict(info),
            "steps": [asdict(step) for step in steps],
            "state": state.model_dump(mode="json") if state is not None else None,
        }
        print(json.dumps(shown, default=str))
        return OK
    print(f"run {info.run_id}  {info.status}  agent {info.agent or '?'}")
    if info.error:
        print(f"error: {info.error}")
    for step in steps:
        *path, call = step.name.split("/")
        took = (
            f"{step.completed_ms - step.started_ms} ms"
            if step.started_ms is not None and step.completed_ms is not None
            else "-"
        )
        said = step.error if step.error is not None else json.dumps(step.output, default=str)
        print(f"{'  ' * (len(path) + 1)}{call}  [{took}]  {said[:200]}")
    return OK


async def _resume(args: argparse.Namespace) -> int:
    config = config_of(args)
    async with _open(args.store) as runs:
        info = await runs.get(args.run_id)
        if info.agent is None:
            raise UnknownRun(f"run {args.run_id!r} was not stored by this version")
        return await _drive(args, config, runs, info.agent, lambda: runs.resume(args.run_id))


async def run_stored(args: argparse.Namespace, config: Config, state: RunState) -> int:
    """`run --store`: the run is a durable run in the store."""
    async with _open(args.store) as runs:
        return await _drive(args, config, runs, state.agent, lambda: runs.start(state))


async def _drive(
    args: argparse.Namespace,
    config: Config,
    runs: DurableRuns,
    agent: str,
    go: Callable[[], Awaitable[RunResult]],
) -> int:
    pick_agent(config, agent)
    async with (
        open_terminal_console(io.StringIO() if args.json else sys.stdout, sys.stderr) as console,
        open_gateway(config, model=args.model, hooks=trace_hooks(args, console)) as gateway,
    ):
        check_runnable(gateway, agent)
        check_servers(gateway, strict=args.strict)
        if args.json:
            with_steps(gateway, agent)
        runs.use(gateway, stream=True)
        result = await go()
    return print_result(result, as_json=args.json, shown=console.streamed)
