"""`chat`: talk with an agent, one question a line, on the same memory as `run --session`.

Commands: `/tools` lists the agent's tools, `/context` shows the run context every question is
asked with (`--context`), `/context JSON` replaces it, `/reset` forgets the conversation,
`/exit` (or end of input) leaves; a command is its word alone (but `/context JSON`), and a
question that begins with `/` is typed with two (`//etc/hosts is what?`). On a terminal,
answers stream to stdout as the model writes them; piped or redirected, stdout gets each answer
whole, exactly, as `run` writes it. A question that fails is reported and the conversation goes
on; the exit code says whether any failed (1, as `run` exits for it, whether its run raised or
returned the failure). On a terminal's stderr, each tool call leaves a line, the agent's
warnings show, and a turn's save that waits has a status line (`chat_lines`). On a terminal,
Ctrl-C cancels the answer in flight and the prompt comes back; at the prompt it leaves (exit
130), as Ctrl-D does (exit as so far), saying how to continue the session. A call that needs
a person's approval is asked about on the terminal (`ask_here`); piped, nobody can be asked,
and it is refused.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import AsyncGenerator, Generator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass

import anyio
from pydantic import JsonValue
from rich.console import Console

from agent import AgentError, MemoryStoreError, MemoryWriteUnknown
from agent.memory import InProcessStore, SessionMemory
from agent.models import spec_without_credentials
from toolkits import ToolkitError, in_background
from toolkits.printable import encodes_all, printable

from ..approval import Approver
from ..assembly import open_gateway
from ..console import RunConsole, open_console
from ..engine import Gateway
from ..errors import GatewayError
from ..store_config import check_store_url, redacted
from ..trace import new_id
from .ask_here import TerminalApprover, piped_chat
from .chat_lines import ChatLines
from .common import (
    Commands,
    add_context_option,
    add_model_options,
    add_trace_options,
    check_memory_kept,
    check_runnable,
    check_session_id,
    config_of,
    name_width,
    pick_agent,
    plural,
    read_context,
    trace_hooks,
    user_path,
    utc,
)
from .exits import INTERRUPTED, OK, exit_code, report
from .line_editing import line_editing
from .output import result_stdout
from .results import print_result
from .sessions import memory_store_url
from .signals import interrupts, stopping_shown
from .stdin_text import StdinLines, stdin_lines, stdin_text

__all__ = ["register"]

HELP = (
    "/tools lists the tools, /context shows or sets the run's context, /reset forgets the "
    "conversation, /exit leaves"
)
COMMANDS = ("/tools", "/context", "/reset", "/exit", "/quit")
"""A line that begins with `/` is a command: one of these words, alone (`//` begins a
question with `/`)."""


def register(commands: Commands) -> None:
    chat = commands.add("chat", _chat)
    add_model_options(chat)
    chat.add_argument("--session", metavar="ID", help="continue this session (default: a new one)")
    chat.add_argument(
        "--state-dir",
        metavar="DIR",
        type=user_path,
        help="keep the conversation in this directory's database",
    )
    chat.add_argument("--store", metavar="URL", help="keep it in the run store at URL")
    add_context_option(chat, ", for every question; /context shows or replaces it")
    add_trace_options(chat)


async def _chat(args: argparse.Namespace) -> int:
    if args.session is not None:
        check_session_id(args.session)
    # The chat's runs' context, replaced whole by `/context JSON` (`{}`: none).
    context = read_context(args.context) if args.context is not None else {}
    config = config_of(args)
    if args.store is not None:  # chat memory goes where the config's run store would
        store = config.store.model_copy(update={"url": memory_store_url(args, config)})
        config = config.model_copy(update={"store": store})
    name = pick_agent(config, args.agent)
    check_memory_kept(config, name, args.state_dir)
    session = args.session if args.session is not None else f"chat-{new_id()[:12]}"
    interactive = sys.stdin.isatty()
    # Answers stream to a terminal (a dumb one too: text alone needs no cursor moves); piped
    # or redirected, stdout gets each answer whole once it is known, exactly as `run` writes
    # it. The status line only on a terminal that can draw it; a dumb one gets plain lines.
    out, err = Console(file=result_stdout()), Console(file=sys.stderr)
    answers = out if out.is_terminal else None
    status = err if err.is_terminal and not err.is_dumb_terminal else None
    plain = sys.stderr if err.is_dumb_terminal else None
    started = lasting = False
    with line_editing() as edited:
        try:
            async with (
                stopping_shown(
                    open_console(answers, status, plain=plain, asks=interactive)
                ) as console,
                stdin_lines(edited=edited) as lines,
            ):
                # Tool calls, warnings and the turn's save: on a terminal (a dumb one too).
                shown = ChatLines(console, width=err.width, starts=plain is not None)
                hooks = trace_hooks(args, console) + ([shown] if err.is_terminal else [])
                async with open_gateway(
                    config,
                    model=args.model,
                    hooks=hooks,
                    state_dir=args.state_dir,
                    wait_for=config.nodes_of(name),
                    on_waiting=console.waiting_for,
                ) as gateway:
                    check_runnable(gateway, name)
                    started, lasting = True, _lasting(gateway, name)
                    settings = config.agents[name].memory or config.gateway.memory
                    kept = settings.keep_days if settings is not None else 0.0
                    opened = await _opened(
                        gateway, name, session, given=args.session is not None, kept_days=kept
                    )
                    print(f"agent {name}, {opened} ({HELP})", file=sys.stderr, flush=True)
                    steps = _Steps()
                    approver = TerminalApprover(console, lines) if interactive else piped_chat()
                    chat = _Chat(session, context, approver, _look(args, session), shown)
                    async with steps.interruptible() if interactive else nullcontext():
                        code = await _converse(
                            gateway, name, chat, console, steps, lines, interactive
                        )
        except anyio.get_cancelled_exc_class():  # a signal: it may have come mid-prompt
            if interactive and started:
                print(file=sys.stderr)
            raise
        finally:
            if interactive and started:  # how to go on, however the chat ended
                going_on = _going_on(args, session, context, lasting=lasting)
                print(printable(going_on), file=sys.stderr)
    return code


async def _opened(
    gateway: Gateway, name: str, session: str, *, given: bool, kept_days: float
) -> str:
    """What the banner says of the session: whether it continues a stored one (a mistyped id,
    or one `keep_days` deleted, starts afresh: `kept_days` says the latter may be why), and
    how long that one is."""
    memory = gateway.agents[name].memory or gateway.memory
    if not given or not isinstance(memory, SessionMemory):
        return f"new session {session}"
    try:
        last = await memory.store.turns(session, last=1)
    except MemoryStoreError:  # the first question says what is wrong with the store
        return f"session {session}"
    if not last:
        gone = f": sessions unused for {kept_days:g} days are deleted" if kept_days else ""
        return f"new session {session} (none of that id is stored{gone})"
    when = utc(last[-1].created_at * 1000)
    return f"session {session} continued: {plural(last[-1].seq, 'turn')}, the last {when}"


def _look(args: argparse.Namespace, session: str) -> str:
    """The command that shows the session where this chat keeps it (an id that begins with
    `-` after `--`, which only the options' end lets come after them)."""
    where = f"{_same_place(args)}{_options(('--agent', args.agent))}"
    if session.startswith("-"):
        return f"agent-gateway sessions{where} show -- {shlex.quote(session)}"
    return f"agent-gateway sessions show {shlex.quote(session)}{where}"


def _lasting(gateway: Gateway, name: str) -> bool:
    """Whether the agent's sessions outlive this process (`memory://` keeps them in it)."""
    memory = gateway.agents[name].memory or gateway.memory
    return isinstance(memory, SessionMemory) and not isinstance(memory.store, InProcessStore)


def _going_on(
    args: argparse.Namespace, session: str, context: dict[str, JsonValue], *, lasting: bool
) -> str:
    """The line a chat on a terminal ends with: the command that continues its session (with
    the context its last question had: instructions that read it need it)."""
    if not lasting:
        return f"session {session} ends with this chat: memory:// keeps it in this process only"
    again = f"agent-gateway chat{_options(('--session', session))}"
    again += f"{_same_place(args)}{_same_agent(args)}"
    given = json.dumps(context, ensure_ascii=False) if context else None
    return f"session {session}: `{again}{_options(('--context', given))}` continues it"


def _same_place(args: argparse.Namespace) -> str:
    """The options that name the config and memory this chat used, as given ("" for the
    defaults): without them, the session is looked for where it is not."""
    return _options(
        ("--config", args.config),
        ("--state-dir", args.state_dir),
        ("--store", redacted(check_store_url(args.store)) if args.store else None),
    )


def _same_agent(args: argparse.Namespace) -> str:
    """The options that chose the agent and its model, as given: without `--agent`, a config
    of several agents refuses to chat. A model's credentials are not shown (`***`: give
    them again)."""
    return _options(
        ("--agent", args.agent),
        ("--model", spec_without_credentials(args.model) if args.model else None),
        ("--system", args.system),
        ("--temperature", args.temperature),
        ("--max-tokens", args.max_tokens),
    )


def _options(*given: tuple[str, object]) -> str:
    """` --option value` of each option given (not None), quoted for a shell; `--option=value`
    for a value that begins with `-`, which argparse would take for an option."""
    said = ""
    for option, value in given:
        if value is None:
            continue
        text = str(value)
        said += (
            f" {option}={shlex.quote(text)}"
            if text.startswith("-")
            else f" {option} {shlex.quote(text)}"
        )
    return said


@dataclass(frozen=True)
class _Chat:
    """The session a chat goes on in, and the context its questions are asked with."""

    session: str
    context: dict[str, JsonValue]
    """Replaced in place by `/context JSON`, so the chat's last line says the last one."""
    approver: Approver
    """Who decides on the calls that need approval: the person at the terminal, or nobody."""
    look: str
    """The command that shows the session (`sessions show`, in the store this chat uses)."""
    shown: ChatLines
    """What the terminal shows of a question's run besides its answer; whether it is saving."""


async def _converse(
    gateway: Gateway,
    name: str,
    chat: _Chat,
    console: RunConsole,
    steps: _Steps,
    lines: StdinLines,
    interactive: bool,
) -> int:
    """Answer line after line until the input ends (or `/exit`, or Ctrl-C at the prompt)."""
    code = OK
    while True:
        line = ""
        with steps.step():
            line = await lines.read("> " if interactive else "")
        if steps.interrupted or not line:  # Ctrl-C or Ctrl-D at the prompt leaves
            if interactive:
                print(file=sys.stderr)  # the prompt's line was left open
            return INTERRUPTED if steps.interrupted else code
        try:
            text = stdin_text(line.strip(), "the line")
        except GatewayError as exc:  # bytes that are no text: that line's failure alone
            report(exc)
            code = max(code, exit_code(exc))
            continue
        if text in ("/exit", "/quit"):  # (with words after it: refused, as any command)
            break
        if not text:
            continue
        lines.remember(text)
        with steps.step():
            try:
                # A question may fail on its own (the model refused it, an empty answer, max
                # iterations): reported, not raised, and its exit code counts as a raise's.
                code = max(code, await _one(gateway, name, chat, text, console))
            except (AgentError, GatewayError, ToolkitError) as exc:
                # One question failed (the provider is down, say): the conversation goes on,
                # and the exit code still says something failed.
                report(_looked_up(exc, chat))
                code = max(code, exit_code(exc))
        if steps.interrupted:
            saving, chat.shown.saving = chat.shown.saving, False
            console.cancelled()
            said = "the answer was cancelled"
            if saving:  # a store may apply a write it was sent (Redis, once it answers)
                said = (
                    "the answer was shown, its turn was being saved: it may have been saved "
                    f"or not: `{chat.look}` tells"
                )
            print(
                printable(f"(interrupted: {said}; Ctrl-C again or Ctrl-D leaves)"),
                file=sys.stderr,
                flush=True,
            )
    return code


def _looked_up(exc: BaseException, chat: _Chat) -> BaseException:
    """`exc`, its `sessions show ID` (a turn that may have been saved) the command that looks
    in the store this chat uses."""
    if not isinstance(exc, MemoryWriteUnknown):
        return exc
    said = str(exc).replace(f"`sessions show {shlex.quote(chat.session)}`", f"`{chat.look}`")
    looked = MemoryWriteUnknown(said)
    for note in getattr(exc, "__notes__", ()):
        looked.add_note(note)
    return looked


class _Steps:
    """On a terminal, Ctrl-C cancels the step in flight (a question's answer, or the wait for
    the next line at the prompt) rather than the whole chat, and is remembered."""

    def __init__(self) -> None:
        self._scope: anyio.CancelScope | None = None
        self.interrupted = False

    @asynccontextmanager
    async def interruptible(self) -> AsyncGenerator[None]:
        with interrupts() as received:

            async def watch() -> None:
                async for _ in received:
                    if self._scope is not None:
                        self.interrupted = True
                        self._scope.cancel()

            async with in_background(watch, wait_started=False):
                yield

    @contextmanager
    def step(self) -> Generator[None]:
        self.interrupted = False
        with anyio.CancelScope() as scope:
            self._scope = scope
            try:
                yield
            finally:
                self._scope = None


async def _one(gateway: Gateway, name: str, chat: _Chat, text: str, console: RunConsole) -> int:
    """Answer one line: a command, or a question for the agent; its exit code."""
    if text.startswith("/") and not text.startswith("//"):
        return await _command(gateway, name, chat, text)
    question = text.removeprefix("/")  # `//...` asks `/...`
    context = dict(chat.context) or None
    result = await gateway.run(
        name,
        question,
        session_id=chat.session,
        stream=True,
        context=context,
        approver=chat.approver,
    )
    code = print_result(result, shown=console.streamed)
    result_stdout().flush()
    return code


async def _command(gateway: Gateway, name: str, chat: _Chat, text: str) -> int:
    """Carry out the command `text` is (a word, nothing after it, but `/context JSON`); its
    exit code."""
    word, *rest = text.split()
    if word == "/context":
        return _context(chat, text.removeprefix(word).strip())
    if word not in COMMANDS or rest:
        said = (
            f"{word} takes nothing after it, so nothing was done: type {word} alone"
            if word in COMMANDS
            else f"unknown command {word!r}: {HELP}"
        )
        asked = f"a question that begins with / is typed with two: /{text}"
        print(printable(f"{said}; {asked}"), file=sys.stderr, flush=True)
        return OK
    if word == "/tools":
        tools = await gateway.tools_for(gateway.agents[name])
        handoffs = gateway.agents[name].handoffs
        width = name_width(tool.name for tool in tools.values())
        for tool in sorted(tools.values(), key=lambda t: t.name):
            summary = (tool.description.strip().splitlines() or [""])[0]
            if tool.name in handoffs:  # its answer is the answer: not a tool like the others
                summary = f"(handoff) {summary}".rstrip()
            # A server's words: shown, never obeyed (as `tools` shows them).
            line = printable(f"{tool.name:<{width}} {summary}")
            print(line, flush=True, file=result_stdout())
        if not tools:
            print("(this agent has no tools)", flush=True, file=result_stdout())
        return OK
    assert word == "/reset"  # (`_converse` leaves at /exit and /quit)
    memory = gateway.agents[name].memory or gateway.memory
    if not isinstance(memory, SessionMemory):
        raise GatewayError(f"agent {name!r} keeps no conversation to forget")
    await memory.store.delete(chat.session)
    print("(the conversation is forgotten)", file=sys.stderr, flush=True)
    return OK


def _context(chat: _Chat, given: str) -> int:
    """`/context`: the chat's context on stdout, as JSON (`{}`: none). `/context JSON`: that
    object is the context of the questions after it, whole (`{}` clears it); what is not one
    is bad input, and the context stays as it was."""
    if not given:
        out = result_stdout()
        shown = json.dumps(chat.context, ensure_ascii=not encodes_all(out))
        print(shown, flush=True, file=out)
        return OK
    try:
        context = read_context(given, "/context")
    except GatewayError as exc:  # that line's failure: refused, as a mistyped command is
        report(exc)
        return OK
    chat.context.clear()
    chat.context.update(context)
    said = "(the context is cleared)" if not context else "(the next questions have this context)"
    print(said, file=sys.stderr, flush=True)
    return OK
