"""`runs list | show | resume | cancel`: the runs in the run store (see `stored`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable
from dataclasses import asdict
from typing import TYPE_CHECKING, TypeVar

import anyio

from toolkits.printable import printable

from ..approval import ApprovalRequest, Decision
from ..errors import AlreadyDecided, StoreError, UnknownRun, UnreadableRun
from ..store_config import redacted, runs_stored
from .common import Commands, add_verbose_option, count_of, utc, vacuumed_line
from .exits import OK
from .output import result_json, result_stdout
from .run_tree import render_run
from .stored import (
    add_resume_options,
    add_store_options,
    open_store,
    read_pickled,
    resume_hint,
    resume_stored,
    store_url,
)

if TYPE_CHECKING:
    from ..durable import RunInfo

_T = TypeVar("_T")

__all__ = ["register"]


def register(commands: Commands) -> None:
    runs = commands.add("runs", _needs_action)
    actions = runs.add_subparsers(metavar="ACTION")
    listing = actions.add_parser("list", help="the stored runs, newest first")
    listing.add_argument(
        "--status",
        choices=["running", "waiting_approval", "stopped", "succeeded", "failed", "cancelled"],
        help="only runs in this state",
    )
    listing.add_argument(
        "--limit",
        type=count_of("runs"),
        default=LIST_LIMIT,
        metavar="N",
        help=f"the newest N runs (default {LIST_LIMIT}; 0: every one)",
    )
    listing.set_defaults(handler=_list)
    show = actions.add_parser("show", help="a run's status, state and recorded calls")
    show.add_argument("run_id", help="the run's id (as `runs list` shows it)")
    show.set_defaults(handler=_show)
    resume = actions.add_parser("resume", help="continue a run that stopped, here")
    add_resume_options(resume)
    resume.set_defaults(handler=resume_stored)
    cancel = actions.add_parser("cancel", help="stop a run: it is not resumed")
    cancel.add_argument("run_id", help="the run's id (as `runs list` shows it)")
    cancel.set_defaults(handler=_cancel)
    decisions: list[argparse.ArgumentParser] = []
    for verb, handler in (("approve", _approve), ("deny", _deny)):
        decide = actions.add_parser(verb, help=f"{verb} a run's call waiting for approval")
        decide.add_argument("run_id", help="the run's id (as `runs list` shows it)")
        decide.add_argument(
            "call",
            nargs="?",
            help="which waiting call, e.g. c1 (its `short` under `waiting` in `runs list "
            "--json`, as the run's own message names it, or its `call`; default: every one)",
        )
        decide.add_argument("--message", help="what to tell the model with the decision")
        decide.set_defaults(handler=handler)
        decisions.append(decide)
    prune = actions.add_parser(
        "prune",
        help="delete the runs that ended more than DAYS ago (and with --stopped, the stopped "
        "ones not resumed for DAYS), and give a SQLite file's freed room back",
    )
    prune.add_argument(
        "--older-than", type=_days, required=True, metavar="DAYS", help="days (more than 0)"
    )
    prune.add_argument(
        "--stopped",
        action="store_true",
        help="also the stopped runs (resumable: given up on) not changed for DAYS",
    )
    prune.set_defaults(handler=_prune)
    for sub in (listing, show, resume, cancel, prune, *decisions):
        sub.set_defaults(command_parser=sub)
        add_verbose_option(sub)
        sub.add_argument(
            "--config",
            metavar="FILE",
            help="TOML or JSON config: the one to resume the run on (default: the one it "
            "started with), and its [store] url"
            if sub is resume
            else "TOML or JSON config (for its [store] url)",
        )
    for sub in (listing, show, cancel, prune, *decisions):
        add_store_options(sub)
        sub.add_argument("--json", action="store_true", help="print JSON")


def _needs_action(args: argparse.Namespace) -> int:
    raise UnknownRun(
        "say what to do: agent-gateway runs list | show ID | resume ID | cancel ID | "
        "approve ID [CALL] | deny ID [CALL]"
    )


async def _approve(args: argparse.Namespace) -> int:
    return await _decide(args, approved=True)


async def _deny(args: argparse.Namespace) -> int:
    return await _decide(args, approved=False)


async def _decide(args: argparse.Namespace, *, approved: bool) -> int:
    decision = Decision(approved=approved, message=args.message)
    url = store_url(args)
    assert url is not None  # `runs` has no --no-store
    refused: list[str] = []
    async with open_store(url, launch=False, read_pickled=read_pickled(args)) as runs:
        info = await runs.get(args.run_id)
        chosen = _chosen(info, args.call, resume_hint(info.run_id, args, url))
        sent: list[ApprovalRequest] = []
        for request in chosen:
            try:
                await runs.decide(args.run_id, request.call, decision)
            except AlreadyDecided as exc:  # the first decision stands
                refused.append(str(exc))
            else:
                sent.append(request)
        if args.json and sent:  # what was decided, and where the run is now
            after = await runs.get(args.run_id)
            decided = [
                {
                    "call": request.call,
                    "short": request.short,
                    "tool": request.tool,
                    "input": request.input,
                    "approved": approved,
                    "message": args.message,
                }
                for request in sent
            ]
            shown = {**after.to_json(), "decided": decided, "refused": refused}
            print(result_json(shown), flush=True, file=result_stdout())
    verb = "approved" if approved else "denied"
    for request in sent:
        print(
            printable(f"{verb} {request.short}: {request.tool} {json.dumps(request.input)}"),
            file=sys.stderr,
        )
    if sent and info.error is not None:  # nobody runs it now: the decision waits in the store
        print(
            f"run {info.run_id} is not running ({info.error}): "
            f"`{resume_hint(info.run_id, args, url)}` continues it",
            file=sys.stderr,
        )
    if refused:
        raise AlreadyDecided("; ".join(refused))
    return OK


def _chosen(info: RunInfo, call: str | None, resume: str) -> list[ApprovalRequest]:
    """The waiting calls `call` names (all when None; when none waits, those decided and not
    taken yet, so that a second decision is refused naming the first). Raises `UnknownRun`
    if none; for a run that stopped, saying that `resume` (the command) asks again."""
    asked = [*info.waiting, *info.decided] if call is not None else info.waiting or info.decided
    if not asked:
        problem = f"run {info.run_id} has no call waiting for approval ({info.status})"
        if info.status == "stopped":
            # Stopped while it waited, it is asked again when resumed. (Older versions
            # stopped so did not even list the call, though their message named it.)
            problem += f": if it stopped waiting for one, resume it ({resume}); it will ask again"
        raise UnknownRun(problem)
    if call is None:
        return list(asked)
    named = [r for r in asked if call in (r.call, r.short)]
    if len(named) != 1:
        waiting = ", ".join(r.short for r in info.waiting) or "none"
        problem = "names several calls" if named else "is not waiting for approval"
        raise UnknownRun(f"call {call!r} of run {info.run_id} {problem} (waiting: {waiting})")
    return named


async def _cancel(args: argparse.Namespace) -> int:
    async with open_store(store_url(args), launch=False, read_pickled=read_pickled(args)) as runs:
        await runs.cancel(args.run_id)
        if args.json:  # the run as `runs list --json` shows it: `status` cancelled
            shown = (await runs.get(args.run_id)).to_json()
            print(json.dumps(shown), flush=True, file=result_stdout())
    print(f"cancelled {args.run_id}", file=sys.stderr)
    return OK


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        days = 0.0
    if not days > 0 or days == float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of days (more than 0): {text!r}")
    return days


async def _prune(args: argparse.Namespace) -> int:
    from ..durable.retention import forget_stopped, vacuumed

    url = store_url(args)
    assert url is not None
    finished = stopped = 0
    skipped: list[str] = []
    sizes: tuple[int, int] | None = None
    unshrunk: StoreError | None = None
    stored = await anyio.to_thread.run_sync(runs_stored, url)
    if stored:  # else there is nothing to delete
        async with open_store(url, launch=False, read_pickled=read_pickled(args)) as runs:
            finished = await runs.forget_finished(args.older_than)
            if args.stopped:
                stopped, skipped = await forget_stopped(runs, args.older_than)
        try:
            sizes = await vacuumed(url)
        except StoreError as exc:
            unshrunk = exc
    room = _room(url, sizes, unshrunk)
    if args.json:
        shown = {
            "finished": finished,
            "stopped": stopped if args.stopped else None,
            "skipped": len(skipped) if args.stopped else None,
            "bytes_before": sizes[0] if sizes is not None else None,
            "bytes_after": sizes[1] if sizes is not None else None,
        }
        print(json.dumps(shown), file=result_stdout())
        if unshrunk is not None:  # else the sizes are in the JSON
            print(room, file=sys.stderr)
        return OK
    if not stored:  # a mistyped --store, say: not a store of no old runs
        print(f"no runs are stored in {redacted(url)}: none deleted", file=sys.stderr)
        return OK
    said = f"deleted {finished} finished run{'' if finished == 1 else 's'}"
    if args.stopped:
        said += f" and {stopped} stopped run{'' if stopped == 1 else 's'}"
        if skipped:  # the warning above says why
            said += f" ({len(skipped)} not read, skipped)"
    days = f"{args.older_than:g} day{'' if args.older_than == 1 else 's'}"
    print(f"{said} older than {days} from {redacted(url)}", file=sys.stderr)
    if room is not None:
        print(room, file=sys.stderr)
    return OK


def _room(url: str, sizes: tuple[int, int] | None, failed: StoreError | None) -> str | None:
    """What `vacuumed` did with a SQLite file's free room, in a line; None for PostgreSQL."""
    if failed is None and sizes is None:
        return None
    # Failed, the runs are deleted all the same, and SQLite reuses their room.
    return vacuumed_line(url.removeprefix("sqlite:///"), sizes, failed, "runs")


LIST_LIMIT = 100
"""How many runs `runs list` shows by default, newest first (a store may hold thousands)."""


async def _list(args: argparse.Namespace) -> int:
    url = store_url(args)
    assert url is not None
    found: list[RunInfo] = []
    limit: int | None = args.limit or None
    stored = await anyio.to_thread.run_sync(runs_stored, url)
    if stored:  # else no run is stored yet
        # Looking writes nothing: a backup, another user's store, a read-only directory.
        pickled = read_pickled(args)
        async with open_store(url, launch=False, read_pickled=pickled, read_only=True) as runs:
            # One more than shown: whether there are more to say so.
            found = await runs.list(args.status, limit=limit + 1 if limit else None)
    more = limit is not None and len(found) > limit
    found = found[:limit]
    if more:  # on stderr: stdout stays the listing (or the JSON) alone
        status = f" {args.status}" if args.status else ""
        print(
            f"the newest {limit}{status} runs; there are more: --limit N shows N, --limit 0 all",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps([info.to_json() for info in found]), file=result_stdout())
        return OK
    for info in found:
        at = info.updated_ms or info.created_ms
        when = utc(at) if at is not None else "-"
        calls = sorted(r.short for r in info.waiting)
        waits = f"  waiting on {', '.join(calls)}" if calls else ""
        why = f"  {info.error}" if info.error else ""
        print(
            printable(f"{info.run_id}  {info.status:<16} {when}  {info.agent or '?'}{waits}{why}"),
            file=result_stdout(),
        )
    if not stored and (args.store or args.state_dir):  # mistyped, say: said even in a script
        print(f"no runs are stored in {redacted(url)}", file=sys.stderr)
    elif not found and sys.stderr.isatty():  # stdout stays empty: a listing of none
        status = f" {args.status}" if args.status else ""
        print(f"no{status} runs in {redacted(url)}", file=sys.stderr)
    return OK


async def _show(args: argparse.Namespace) -> int:
    from ..durable import call_tree
    from ..durable.so_far import recorded_calls, recorded_so_far
    from ..durable.status import ACTIVE_STATUSES

    url, pickled = store_url(args), read_pickled(args)
    async with open_store(url, launch=False, read_pickled=pickled, read_only=True) as runs:
        info = await runs.get(args.run_id)
        steps = await runs.steps(args.run_id)
        unread: list[str] = []  # a state or result that does not validate: the rest shows
        state = await _readable(runs.state(args.run_id), unread)
        result = await _readable(runs.result(args.run_id), unread)
        asked = await runs.asked(args.run_id)
        decisions = await runs.decisions(args.run_id) if asked else {}
    calls = call_tree(
        steps,
        state=state,
        in_flight=info.status in ACTIVE_STATUSES,
        cancelled=info.status == "cancelled",
        asked=[r.call for r in asked],
        decisions=decisions,
    )
    if args.json:
        shown = {
            **info.to_json(),
            "calls": [call.to_json() for call in calls],
            "result": result.model_dump(mode="json") if result is not None else None,
            "state": state.model_dump(mode="json") if state is not None else None,
            "steps": [asdict(step) for step in steps],
            **({"unreadable": unread} if unread else {}),
        }
        print(result_json(shown, default=str), file=result_stdout())
        return OK
    # The question (maybe a remote caller's), the model's text, tools' errors: as text.
    # Its usage as the run's own `--json` said it when it stopped: with the calls recorded since.
    so_far = recorded_so_far(state, recorded_calls(steps)) if state is not None else None
    print(printable("\n".join(render_run(info, calls, so_far, result))), file=result_stdout())
    for problem in unread:
        print(printable(f"warning: {problem}"), file=sys.stderr)
    return OK


async def _readable(read: Awaitable[_T | None], unread: list[str]) -> _T | None:
    """What `read` reads, or None for a record that does not validate (noted in `unread`)."""
    try:
        return await read
    except UnreadableRun as exc:
        unread.append(str(exc))
        return None
