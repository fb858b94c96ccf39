"""Runs kept in the run store, from the command line: which store, and driving a run there.

`run` and `resume` use the store by default (`gateway.store_config`): `--store URL` names one,
`--state-dir DIR` means the SQLite file in DIR, `--no-store` (on `run`) runs without one.
The store (DBOS) is imported only when a command uses it: it takes a while.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import shlex
import sys
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING

import anyio
from pydantic import JsonValue

from agent import AgentError
from agent.models import spec_without_credentials
from toolkits import ToolkitError

from ..approval import ApprovalRequest, WaitLeft
from ..assembly import open_gateway
from ..config import Config, load_config
from ..console import RunConsole, open_terminal_console
from ..errors import (
    ConfigError,
    GatewayError,
    PickledRecord,
    RunCancelled,
    StoreError,
    StoreGone,
    StoreUnavailable,
    UnknownRun,
)
from ..run_state import RunOrigin, RunResult, RunState
from ..store_config import (
    StoreSettings,
    check_store_url,
    default_store_url,
    redacted,
    runs_stored,
    store_option,
)
from ..trace import TraceHook
from .common import (
    add_model_options,
    add_strict_option,
    add_trace_options,
    check_runnable,
    check_servers,
    pick_agent,
    trace_hooks,
    user_path,
    with_steps,
)
from .exits import BAD_INPUT, WAITING_APPROVAL, exit_code
from .items import ItemLines
from .origin import resume_config
from .output import result_stdout
from .results import print_result, run_error_json, stopped_chain
from .signals import stopping_shown

if TYPE_CHECKING:
    from ..durable import DurableRuns

__all__ = [
    "add_output_options",
    "add_resume_options",
    "add_store_options",
    "item_lines",
    "open_store",
    "preload_store",
    "print_stopped",
    "read_pickled",
    "resume_hint",
    "resume_stored",
    "run_hooks",
    "run_stored",
    "store_url",
    "terminal_console",
]


def add_store_options(sub: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """`--store URL` and `--state-dir DIR`; with `optional`, also `--no-store`."""
    sub.add_argument(
        "--store",
        metavar="URL",
        help="the run store: sqlite:///FILE or postgresql://... (default: [store] url in the "
        "config, else agent-gateway.sqlite3 in the data directory)",
    )
    sub.add_argument(
        "--state-dir",
        metavar="DIR",
        type=user_path,
        help="the run store (and chat memory) in the SQLite file agent-gateway.sqlite3 in DIR",
    )
    if optional:
        sub.add_argument(
            "--no-store", action="store_true", help="keep no record of the run: it cannot resume"
        )


def add_resume_options(resume: argparse.ArgumentParser) -> None:
    """`resume`'s arguments (also `runs resume`'s)."""
    resume.add_argument("run_id", help="the stopped run's id (as `runs list` shows it)")
    add_model_options(resume, agent=False, settings=False)
    add_store_options(resume)
    resume.add_argument(
        "--force", action="store_true", help="resume even though the config file changed"
    )
    add_output_options(resume)


def add_output_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object: run_id, agent, status, output, error, stopped_in, usage, "
        "iterations, steps, handoff (of many items: a JSON line each, then one for the run)",
    )
    sub.add_argument(
        "--no-wait",
        action="store_true",
        help="when a call needs a person's approval, leave the run stored, waiting, and exit 3 "
        "(then `runs approve|deny` and `resume`)",
    )
    add_strict_option(sub)
    add_trace_options(sub)


def store_url(args: argparse.Namespace, config: Config | None = None) -> str | None:
    """The store the command names, else the config's, else the default; None: `--no-store`.
    Raises `StoreError` for a URL that is not a store's, and for options that contradict."""
    given = [
        name
        for name in ("store", "state_dir", "no_store")
        if getattr(args, name, None) not in (None, False)
    ]
    if len(given) > 1:
        options = " and ".join("--" + name.replace("_", "-") for name in given)
        raise GatewayError(f"give one of {options}")
    if getattr(args, "no_store", False):
        return None
    if args.store:
        return check_store_url(args.store)
    if args.state_dir:
        return default_store_url(args.state_dir)
    if config is None:
        config = load_config(getattr(args, "config", None))
    try:
        return config.store.url or default_store_url()
    except ConfigError as exc:  # no data directory to keep it in
        optional = hasattr(args, "no_store")
        raise ConfigError(
            f"{exc}{' (or --no-store: keep no record)' if optional else ''}"
        ) from None


def read_pickled(args: argparse.Namespace) -> bool:
    """`[store] read_pickled` of the config the command names (`--config`), or of the one
    found when no `--store` or `--state-dir` names the store."""
    named = getattr(args, "config", None)
    if named is None and (getattr(args, "store", None) or getattr(args, "state_dir", None)):
        return False
    return load_config(named).store.read_pickled


def resume_hint(run_id: str, args: argparse.Namespace, url: str) -> str:
    """What to type to resume a stored run (its config and model are in its state, but for
    the credentials of a model's URL: then `--model` with `***` to fill in)."""
    model: str | None = getattr(args, "model", None)
    hidden = spec_without_credentials(model) if model else None
    again = f" --model {shlex.quote(hidden)}" if hidden and hidden != model else ""
    return f"agent-gateway resume {run_id}{_store_option(args, url)}{again}"


def _resume_again(failure: BaseException, hint: str) -> str:
    """`hint`, or for a run that stopped on a record in the pickle format, `hint` as it can
    work: reading it allowed (as the failure says, only if the store's writers are trusted)."""
    if not isinstance(failure, PickledRecord):
        return hint
    from ..durable.record_format import READ_PICKLED_ENV  # loaded with the store already

    return f"if you trust its writers, {READ_PICKLED_ENV}=1 {hint}"


def _store_option(args: argparse.Namespace, url: str) -> str:
    """The option that names the store at `url` again ("" for the default one)."""
    if args.state_dir:
        return f" --state-dir {shlex.quote(str(args.state_dir))}"
    return store_option(url)


def preload_store() -> None:
    """Start importing the store in a thread: it takes a while (DBOS, SQLAlchemy), and most
    of it passes while the gateway starts its servers, waiting on other processes."""
    threading.Thread(target=importlib.import_module, args=("gateway.durable",), daemon=True).start()


def open_store(
    url: str | None,
    *,
    launch: bool = True,
    replica_every: float | None = None,
    keep_days: float = 0,
    unreachable_wait: float | None = None,
    read_pickled: bool = False,
    read_only: bool = False,
    origin: RunOrigin | None = None,
) -> AbstractAsyncContextManager[DurableRuns]:
    # Imported here (or by `preload_store`): only stored runs need it.
    from ..durable import open_runs

    return open_runs(
        url,
        launch=launch,
        replica_every=replica_every,
        keep_days=keep_days,
        unreachable_wait=unreachable_wait or StoreSettings().unreachable_wait,
        read_pickled=read_pickled,
        read_only=read_only,
        origin=origin,
    )


def terminal_console(
    args: argparse.Namespace, *, items: bool = False, asks: bool = False
) -> AbstractAsyncContextManager[RunConsole]:
    """The live console on the terminal; with `--json` or many items, stdout carries the JSON
    alone. `asks`: a person may be asked there (`RunConsole.asking`)."""
    quiet = args.json or items
    out = io.StringIO() if quiet else result_stdout()
    return stopping_shown(open_terminal_console(out, sys.stderr, asks=asks))


async def run_stored(args: argparse.Namespace, config: Config, state: RunState, url: str) -> int:
    """`run`: `state` as a new run in the store at `url`."""
    preload_store()
    return await _drive(args, config, state, url, None, lambda runs: runs.start(state))


async def resume_stored(args: argparse.Namespace) -> int:
    """`resume ID` (and `runs resume ID`): on the config and model the run started with,
    unless `--config` or `--model` say otherwise."""
    url = store_url(args)
    assert url is not None
    if not await anyio.to_thread.run_sync(runs_stored, url):
        # Opening it to look would make it (a mistyped --state-dir: a new empty store).
        raise UnknownRun(f"no stored run {args.run_id!r}: no runs are stored in {redacted(url)}")
    async with open_store(url, read_pickled=read_pickled(args)) as runs:
        await runs.resumable(args.run_id)
        state = await runs.state(args.run_id)
        if state is None:
            raise UnknownRun(f"run {args.run_id!r} was not stored by this version")
        own = state.origin.model if state.origin else None
        config, origin, model = resume_config(args, state.origin, state.agent)
        return await _drive(
            args,
            config,
            state,
            url,
            runs,
            lambda runs: runs.resume(args.run_id, origin=origin),
            model=model,
            # Another model's refusal of the run's requests says nothing of the run: stopped,
            # it stays resumable on its own model.
            on_trial=args.model is not None and spec_without_credentials(args.model) != own,
        )


async def _drive(
    args: argparse.Namespace,
    config: Config,
    state: RunState,
    url: str,
    runs: DurableRuns | None,
    go: Callable[[DurableRuns], Awaitable[RunResult]],
    *,
    model: str | None = None,
    on_trial: bool = False,
) -> int:
    """Run on the gateway of `config`, in `runs` (else the store at `url`, opened once the
    gateway is up), saying how to resume a run that stops; `on_trial`: `model` is not the
    run's own (see `open_gateway`'s `model_on_trial`)."""
    pick_agent(config, state.agent)
    hint = resume_hint(state.run_id, args, url)
    # Chat memory goes to the run's store too, unless the config names its own.
    config = config.model_copy(update={"store": config.store.model_copy(update={"url": url})})
    items = _as_items(args, state)
    lines = item_lines(args, state) if items else None
    so_far: RunState | None = None  # a failed run's last checkpoint, for --json
    stored = runs is not None  # else not until the store opens: no run id to show before
    # What the store keeps of a run that raised: one resumed stays resumable until it runs;
    # one never stored has ended.
    status = "stopped" if stored else "failed"
    asked: list[ApprovalRequest] = []  # with --no-wait, the call that made the run return
    async with (
        interrupted_at_start(
            args, lines, state, status=status, run_id=state.run_id if stored else None
        ) as began,
        terminal_console(args, items=items) as console,
        open_gateway(
            config,
            model=model or args.model,
            hooks=run_hooks(args, console, lines),
            state_dir=args.state_dir,
            wait_for=None if args.strict else config.nodes_of(state.agent),
            on_waiting=console.waiting_for,
            model_on_trial=on_trial,
        ) as gateway,
    ):
        began()
        check_runnable(gateway, state.agent)
        try:
            check_servers(gateway, strict=args.strict)
            if args.json:
                with_steps(gateway, state.agent)
            settings = config.store
            async with (
                open_store(
                    url,
                    keep_days=settings.keep_days,
                    unreachable_wait=settings.unreachable_wait,
                    read_pickled=settings.read_pickled,
                )
                if runs is None
                else nullcontext(runs) as store
            ):
                stored = True
                store.unreachable_wait = settings.unreachable_wait  # resumed: its config's

                async def waiting(request: ApprovalRequest) -> None:
                    said = json.dumps(request.input, ensure_ascii=False)
                    call = f"{state.run_id} {shlex.quote(request.short)}{_store_option(args, url)}"
                    console.say(
                        f"waiting for approval: {request.tool} {said}\n"
                        f"  agent-gateway runs approve {call} [--message TEXT]\n"
                        f"  agent-gateway runs deny {call} [--message TEXT]"
                    )
                    if args.no_wait:
                        asked.append(request)
                        # The calls in flight end first, each recorded; the status says which.
                        console.leaving()
                        store.leave_waiting(state.run_id)  # then `WaitLeft`: stored, waiting

                store.use(gateway, stream=True, on_approval=waiting)
                try:
                    result = await go(store)
                except WaitLeft:  # --no-wait, and a call waits for approval
                    console.cancelled()  # the wait ended
                    return await _left_waiting(args, lines, state, store, asked, hint)
                except UnknownRun:
                    raise  # it runs elsewhere: nothing to resume here
                except StoreGone:  # and the run with it: nothing to resume
                    so_far = store.made_here(state.run_id)  # what this process knew last
                    stored, status = False, "failed"
                    raise
                except RunCancelled:  # it has ended; what it spent till then is known
                    status = "cancelled"
                    if args.json:
                        so_far = await _last_state(store, state.run_id)
                    raise
                except (AgentError, ToolkitError, GatewayError) as exc:
                    # What failed may be the store: this process knows what the run did.
                    so_far = store.made_here(state.run_id)
                    readable, recorded = True, None  # unread in time: in it still, maybe
                    with anyio.move_on_after(STORE_READ):
                        try:
                            recorded = await store.so_far(state.run_id)
                            readable = recorded is not None or runs is not None
                        except StoreError as failed:
                            # Away now (unreachable, locked), or a record refused unread: the
                            # run is in it still; else the store cannot read it (damaged).
                            readable = isinstance(failed, (StoreUnavailable, PickledRecord))
                        except Exception:  # the run may be in it still
                            recorded = None
                    if not readable:  # not taken in, or not there to resume: no hint
                        stored, status = False, "failed"
                        raise
                    so_far = so_far or recorded
                    exc.add_note(f"the run is stored: {_resume_again(exc, hint)}")
                    status = "stopped"
                    raise
                except anyio.get_cancelled_exc_class():  # Ctrl-C, a signal: say how to go on
                    gone = store.gone()  # its file deleted: nothing to go on from
                    after = f"is stored: {hint}" if gone is None else f"is lost: {gone}"
                    console.say_stopped(f"interrupted: run {state.run_id} {after}")
                    if args.json:  # still one JSON object (or line) on stdout, for scripts
                        stopped = GatewayError(f"interrupted: the run {after}")
                        said = "stopped" if gone is None else "failed"
                        waits: list[ApprovalRequest] = []
                        so_far = store.made_here(state.run_id)  # should the store not answer
                        with anyio.CancelScope(shield=True), anyio.move_on_after(STORE_READ):
                            so_far = await _last_state(store, state.run_id)
                            if gone is None:  # its calls that wait still do, in the store
                                waits = (await store.get(state.run_id)).waiting
                        # Worded as `runs list` words it: it needs a person first.
                        more: dict[str, JsonValue] = {"waiting": _listed(waits)} if waits else {}
                        print_stopped(
                            args,
                            lines,
                            state,
                            stopped,
                            so_far,
                            status=WAITING if waits else said,
                            run_id=state.run_id if gone is None else None,
                            **more,
                        )
                    raise
                # Said before the store and the servers close (a stdio server may take its
                # 2 s grace to exit): a script reading the answer need not wait; the exit
                # code does.
                if lines is not None:
                    return lines.finished(result)
                return print_result(result, as_json=args.json, shown=console.streamed)
        except (AgentError, ToolkitError, GatewayError) as exc:
            if args.json and exit_code(exc) != BAD_INPUT:  # one JSON object, for scripts
                run_id = state.run_id if stored else None
                print_stopped(args, lines, state, exc, so_far, status=status, run_id=run_id)
            raise


async def _left_waiting(
    args: argparse.Namespace,
    lines: ItemLines | None,
    state: RunState,
    store: DurableRuns,
    asked: list[ApprovalRequest],
    hint: str,
) -> int:
    """`--no-wait`: a call waits for approval, and the run, stored, with it. Say so (with
    `--json`, status `waiting_approval` and the calls that wait), and exit 3."""
    with anyio.move_on_after(STORE_READ):
        asked = (await store.get(state.run_id)).waiting or asked  # every call waiting
    said = f"run {state.run_id} waits for approval (--no-wait): once decided, {hint}"
    print(said, file=sys.stderr, flush=True)
    if args.json:
        waiting = _listed(asked)
        so_far = await _last_state(store, state.run_id)
        error = GatewayError(said)
        print_stopped(
            args, lines, state, error, so_far, status=WAITING, run_id=state.run_id, waiting=waiting
        )
    return WAITING_APPROVAL


def _listed(waiting: Sequence[ApprovalRequest]) -> JsonValue:
    """The calls waiting for approval, as `--json` lists them."""
    return [{**r.model_dump(mode="json"), "short": r.short} for r in waiting]


def item_lines(args: argparse.Namespace, state: RunState, *, stored: bool = True) -> ItemLines:
    """`run --items` output for `state`'s run (with `--json`, its summary line too; its
    `run_id` null unless `stored`: `--no-store`)."""
    run_id = state.run_id if stored else None
    return ItemLines(run_id, state.agent, len(state.items), summary=args.json)


def run_hooks(
    args: argparse.Namespace, console: RunConsole, lines: ItemLines | None
) -> list[TraceHook]:
    """The trace hooks of a run: the console, the printers asked for, and the item lines
    (written around the status line)."""
    hooks = trace_hooks(args, console)
    if lines is not None:
        hooks.append(lines.writing_to(console.stream(result_stdout())))
    return hooks


def print_stopped(
    args: argparse.Namespace,
    lines: ItemLines | None,
    state: RunState,
    exc: BaseException,
    so_far: RunState | None,
    *,
    status: str,
    run_id: str | None,
    **more: JsonValue,
) -> None:
    """`--json` of a run that ended before it returned: the summary line after the item
    lines, or the one JSON object; either says the run's `status` (`stopped`, `failed`,
    `cancelled`, `waiting_approval`), with `more` (`waiting`). `run_id` None: no run was
    stored."""
    if not args.json:
        return
    if lines is not None:
        shown_in = stopped_chain(exc, so_far, status)
        lines.stopped(run_id, status, str(exc), so_far, stopped_in=shown_in, **more)
        return
    shown = run_error_json(run_id, state.agent, exc, so_far, status=status, **more)
    print(shown, flush=True, file=result_stdout())


@asynccontextmanager
async def interrupted_at_start(
    args: argparse.Namespace,
    lines: ItemLines | None,
    state: RunState,
    *,
    status: str,
    run_id: str | None,
) -> AsyncGenerator[Callable[[], None]]:
    """Around a command that runs `state`: interrupted (Ctrl-C, a signal) before the gateway
    was up, `--json` still prints its one object (`print_stopped`): nothing ran. The block
    calls what this yields once the gateway is up; from then on the run says it."""
    up = False

    def began() -> None:
        nonlocal up
        up = True

    try:
        yield began
    except anyio.get_cancelled_exc_class():
        if not up:
            said = GatewayError("interrupted while its MCP servers started: nothing ran")
            print_stopped(args, lines, state, said, None, status=status, run_id=run_id)
        raise


STORE_READ = 2.0
"""How long an interrupted run waits for its last checkpoint, for `--json`."""
WAITING = "waiting_approval"
"""The status of a run whose calls wait for a person's approval (`runs list` says it too)."""


def _as_items(args: argparse.Namespace, state: RunState) -> bool:
    """Whether the answers are JSON lines: `run --items`, even of one line. A resumed run's
    `--items` is not recorded: one of several items is."""
    if hasattr(args, "items"):
        return bool(args.items)
    return len(state.items) > 1


async def _last_state(runs: DurableRuns, run_id: str) -> RunState | None:
    """What the run did so far as the store has it (`runs show` says the same), else, the
    store not answering, as this process knew it."""
    try:
        recorded = await runs.so_far(run_id)
    except Exception:
        recorded = None
    return recorded or runs.made_here(run_id)
