"""Approval asked in place: `chat` (and `call AGENT`) on a terminal asks the person there
about each call that needs it, and the run goes on with the answer. No run store: the
decision lives in this process, as the conversation does.

The question names the agents down to the one that made the call, the tool and its input
(cut to `SHOWN_INPUT` characters; control characters written out, as every line the gateway
prints of others' text), and takes `y` (run it), `n` (do not), or `n` and a message for the
model (`n use the other account`). Questions come one at a time; the other calls of the step
go on meanwhile, and what they show waits for the answer (`RunConsole.asking`). Ctrl-C at the
question is the command's (`chat` cancels the answer in flight); Ctrl-D denies.

Without a terminal nobody can be asked: such a command's gated calls are refused
(`NobodyToAsk`), and the model is told what would ask them (`piped_chat`, `call_unasked`).
"""

from __future__ import annotations

import json
import sys
from typing import IO

import anyio

from toolkits.printable import encodes_all, printable

from ..approval import DECLINED, ApprovalRequest, Decision, NobodyToAsk
from ..console import RunConsole
from ..errors import GatewayError
from .stdin_text import StdinLines, stdin_text

__all__ = [
    "SHOWN_INPUT",
    "TerminalApprover",
    "answer",
    "call_unasked",
    "can_ask",
    "piped_chat",
    "question",
]

SHOWN_INPUT = 400
"""The most characters of a call's input (as JSON) a question shows."""
CHOICES = "y/n, and a message for the model if you like"
_AGAIN = "type y or n, and a message for the model if you like: "


def _stored_run(command: str) -> str:
    """The remedy without a terminal: a run kept in the run store waits for a decision."""
    return (
        f"or use `{command}` (it keeps the run in the run store, where the call waits for "
        "`agent-gateway runs approve` or `runs deny`)"
    )


def can_ask() -> bool:
    """Whether a person can be asked: stdin is a terminal, not piped or redirected (closed,
    it is /dev/null: `startup`)."""
    return sys.stdin.isatty()


def piped_chat() -> NobodyToAsk:
    """Who refuses for a chat whose input is no terminal."""
    return NobodyToAsk(
        "this tool call needs a person's approval, and this chat cannot ask for it: its input "
        "is not a terminal. Chat on a terminal to be asked about each call, "
        + _stored_run("agent-gateway run")
    )


def call_unasked(agent: str) -> NobodyToAsk:
    """Who refuses for `call AGENT` without a terminal."""
    return NobodyToAsk(
        "this tool call needs a person's approval, and `call` cannot ask for it without a "
        f"terminal. Call {agent} on a terminal to be asked about each call, "
        + _stored_run(f"agent-gateway run --agent {agent}")
    )


class TerminalApprover:
    """Asks the person at the terminal about each call that needs approval, one question at
    a time, reading the answers from `lines` (the command's stdin, a terminal)."""

    def __init__(self, console: RunConsole, lines: StdinLines) -> None:
        self._console = console
        self._lines = lines
        self._turn = anyio.Lock()
        # A call waiting its turn is asked here, not decided with `runs approve`.
        console.approval_hint = "waiting for its question"

    async def decide(self, request: ApprovalRequest) -> Decision:
        async with self._turn:
            with self._console.asking() as terminal:
                self._lines.forget_typed_ahead()
                _write(terminal, f"{question(request, terminal)}\n")
                prompt, answered = f"allow it? [{CHOICES}] ", False
                try:
                    while True:
                        line = await self._lines.read(prompt)
                        prompt = _AGAIN
                        if not line:  # Ctrl-D: no
                            _write(terminal, "\n")
                            answered = True
                            return Decision(approved=False, refused_as=DECLINED)
                        try:
                            decision = answer(stdin_text(line, "the answer"))
                        except GatewayError as exc:  # bytes that are no text: asked again
                            decision = None
                            _write(terminal, f"{printable(str(exc))}\n")
                        if decision is not None:
                            answered = True
                            return decision
                finally:
                    if not answered:  # cut off (Ctrl-C): what follows goes on a line of its own
                        _write(terminal, "\n")


def question(request: ApprovalRequest, terminal: IO[str]) -> str:
    """The call `request` asks about, on one line: who makes it, the tool, its input."""
    said = json.dumps(request.input, ensure_ascii=not encodes_all(terminal))
    if len(said) > SHOWN_INPUT:
        said = f"{said[:SHOWN_INPUT]}... ({len(said)} characters)"
    who = f"{' -> '.join(request.agents)}: " if request.agents else ""
    line = f"{who}the call {request.tool} {said} needs approval"
    # Others' words (a server's tool name, a model's arguments): shown, never obeyed, and on
    # the question's one line.
    return printable(line).replace("\n", "\\n").replace("\t", "\\t")


def answer(text: str) -> Decision | None:
    """The decision `text` gives (`y`, `y MESSAGE`, `n`, `n MESSAGE`, as `yes`, `no`,
    `no, MESSAGE`); None: it is none of them."""
    word, _, rest = text.strip().partition(" ")
    word = word.rstrip(",:;.").lower()
    if word in ("y", "yes", "n", "no"):
        return Decision(approved=word.startswith("y"), message=rest.strip() or None)
    return None


def _write(terminal: IO[str], text: str) -> None:
    terminal.write(text)
    terminal.flush()
