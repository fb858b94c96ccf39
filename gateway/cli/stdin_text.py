"""What the user types or pipes in (`chat`'s lines, `run -`'s question, `--items -`), as text.

Python reads stdin in the locale's encoding. Bytes that are no text in it are kept as lone
surrogates (`surrogateescape`, a C or UTF-8 locale's way) or fail the read (`strict`, other
locales'): the read's failure ended the command with a traceback, and lone surrogates did
too, later, as no run can store them or send them to a model. So stdin is read keeping such
bytes, and `stdin_text` makes them text: UTF-8 (what an ASCII locale without Python's UTF-8
mode, `LC_ALL=C PYTHONUTF8=0`, makes of every non-ASCII character) as the text it is; bytes
that are no UTF-8 (a Latin-1 terminal's `é`, a file in another encoding) refused with a
`GatewayError` that shows them, as `startup.command_line_text` refuses such an argument.
"""

from __future__ import annotations

import io
import re
import sys
import termios
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, TextIO, cast

import anyio
import anyio.to_thread

from toolkits import in_background
from toolkits.printable import printable

from ..errors import GatewayError
from .line_editing import edited_line, line_editing, remember

__all__ = ["StdinLines", "not_utf8", "read_line", "read_stdin", "stdin_lines", "stdin_text"]

_SURROGATES = re.compile("[\udc80-\udcff]")
"""How `surrogateescape` keeps a byte it could not decode."""

_SHOWN_BYTES = 24
"""How many bytes on each side of the first bad one an error shows."""


async def read_stdin(what: str) -> str:
    """All of stdin, as text (`stdin_text`). Read in a thread that Ctrl-C abandons: a read
    blocking the event loop would let the first Ctrl-C go unheard and the second raise inside
    it. On a terminal, first a line saying what is awaited, and how to end it; its lines are
    read edited (`line_editing`: the terminal's own line mode cuts each at 4,095 characters)."""
    if sys.stdin.isatty():
        print(f"reading {what} from stdin (end it with Ctrl-D)", file=sys.stderr, flush=True)
    with line_editing() as edited:
        read = _edited_lines if edited else _stdin().read
        text = await anyio.to_thread.run_sync(read, abandon_on_cancel=True)
    return stdin_text(text, "stdin")


def _edited_lines() -> str:
    """The lines typed until Ctrl-D at a line's start, each edited (`edited_line`)."""
    lines: list[str] = []
    while line := edited_line(""):
        lines.append(line)
    return "".join(lines)


def read_line() -> str:
    """The next line of stdin ("" at its end), its bad bytes kept for `stdin_text` to refuse
    (blocks: call it in a thread)."""
    return _stdin().readline()


def _plain_line(prompt: str) -> str:
    """`read_line`, after `prompt` on stderr (stdout keeps answers only)."""
    if prompt:
        _prompt(prompt)
    return read_line()


def _prompt(prompt: str) -> None:
    print(prompt, end="", file=sys.stderr, flush=True)


class StdinLines:
    """Stdin's lines, each read in a thread whose line is kept for the next `read` when the
    one that waited for it was cancelled: a second read meanwhile would start a second thread,
    and whichever got the next line typed, the other would wait on (`chat`'s Ctrl-C at an
    approval question, then its prompt). `edited`: read with line editing (`line_editing`)."""

    def __init__(self, *, edited: bool = False) -> None:
        self.edited = edited
        self._wanted = anyio.Event()
        self._read = anyio.Event()
        self._reading = False
        self._prompt = ""
        self._line = ""

    async def read(self, prompt: str = "") -> str:
        """The next line ("" at the end of stdin), its bad bytes kept (`stdin_text`), asked
        for with `prompt` on the terminal (a read still waiting from before: written again)."""
        if not self._read.is_set() and not self._reading:  # else: it is read, or comes
            self._prompt = prompt
            self._wanted.set()
        elif prompt and not self._read.is_set():
            _prompt(prompt)
        await self._read.wait()
        self._read = anyio.Event()
        return self._line

    def forget_typed_ahead(self) -> None:
        """Drop what was typed before now and not asked for yet: a line read and kept, and
        what the terminal holds unread. For a question whose answer must be typed after it
        was asked (an approval: "y" typed ahead, or a pasted text's next line, would answer
        it unseen)."""
        if self._read.is_set():
            self._read = anyio.Event()
        if sys.stdin.isatty():
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)

    def remember(self, line: str) -> None:
        """Keep `line` (a question) for Up and Ctrl-R at the next prompts, when edited."""
        if self.edited:
            remember(line)

    async def reading(self) -> None:
        """Read a line each time one is wanted (in the background, for the block)."""
        while True:
            await self._wanted.wait()
            self._wanted, self._reading = anyio.Event(), True
            read = edited_line if self.edited else _plain_line
            self._line = await anyio.to_thread.run_sync(read, self._prompt, abandon_on_cancel=True)
            self._reading = False
            self._read.set()


@asynccontextmanager
async def stdin_lines(*, edited: bool = False) -> AsyncGenerator[StdinLines]:
    """Stdin's lines, for `await lines.read()` during the block."""
    lines = StdinLines(edited=edited)
    async with in_background(lines.reading, wait_started=False):
        yield lines


def stdin_text(text: str, what: str) -> str:
    """`text` read from stdin as the text it is (see the module's docstring). Raises
    `GatewayError` (bad input), naming it `what`, when its bytes are no UTF-8."""
    if _SURROGATES.search(text) is None:
        return text
    raw = text.encode(_stdin().encoding or "utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GatewayError(f"{what} is not valid text: {not_utf8(raw, exc.start)}") from None


def not_utf8(raw: bytes, at: int) -> str:
    """What is wrong with `raw`, whose byte `at` is where UTF-8 decoding failed: the bytes
    around it shown (bad ones as `\\xe9`), and what to do."""
    start = max(0, at - _SHOWN_BYTES)
    shown = raw[start : at + _SHOWN_BYTES].decode("utf-8", errors="backslashreplace")
    shown = printable(shown).replace("\n", "\\n")  # on the error's one line
    before = "..." if start else ""
    after = "..." if at + _SHOWN_BYTES < len(raw) else ""
    return f"its bytes are not UTF-8 (byte {at + 1}: '{before}{shown}{after}'); give it as UTF-8"


def _stdin() -> TextIO:
    """`sys.stdin`, made to keep the bytes its encoding cannot decode (as lone surrogates)
    rather than fail the read, which loses what was read with them."""
    stdin: Any = sys.stdin  # (a TextIOWrapper's type argument is not known here)
    if isinstance(stdin, io.TextIOWrapper) and stdin.errors == "strict":
        stdin.reconfigure(errors="surrogateescape")
    return cast(TextIO, stdin)
