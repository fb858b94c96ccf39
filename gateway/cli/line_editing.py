"""Lines typed at a terminal, edited as a shell edits them (GNU readline, Python's `readline`).

Read in the terminal's own line mode (canonical mode), a line loses every character after its
4,095th without a word (Linux's line discipline keeps no more), arrow keys arrive as escape
sequences in the text, and a pasted text ends at its first newline: each of its lines became a
question of its own. Readline reads keys one by one: no length limit, the line is edited in
place (arrows, Ctrl-A/E, Ctrl-R through the questions asked before), and with bracketed paste
(which Python turns off for its own prompt; we turn it back on) a pasted text is one line,
newlines and all, until Enter.

Only where stdin is a terminal and so is the stdout `input()` writes its prompt to: fd 1, which
is stderr while the command's results keep stdout for themselves (`output.stdout_for_results`).
"""

from __future__ import annotations

import os
import sys
import termios
from collections.abc import Generator
from contextlib import contextmanager
from types import ModuleType
from typing import TextIO

__all__ = ["edited_line", "line_editing", "remember"]

_PASTES_OFF = "\x1b[?2004l"
"""Tells the terminal to stop marking what is pasted (bracketed paste mode off)."""


@contextmanager
def line_editing() -> Generator[bool]:
    """Whether lines are read edited (`edited_line`) during the block: stdin and stdout a
    terminal, and readline there. The terminal's modes are restored at the end: a read left
    waiting (Ctrl-C at the prompt leaves) would leave it in readline's raw mode, without echo,
    for the shell after us."""
    typed = _terminal(sys.stdin) and _terminal(sys.stdout)
    readline = _readline() if typed else None
    if readline is None:
        yield False
        return
    pastes = "libedit" not in (readline.__doc__ or "")  # (macOS's libedit has no such mode)
    if pastes:
        readline.parse_and_bind("set enable-bracketed-paste on")
    readline.set_auto_history(False)  # the questions only, not the answers to approvals
    fd = sys.stdin.fileno()
    modes = termios.tcgetattr(fd)
    try:
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, modes)
        if pastes:  # readline turns it off as a line ends: a read left waiting did not
            sys.stderr.write(_PASTES_OFF)
            sys.stderr.flush()


def edited_line(prompt: str) -> str:
    """The next line typed after `prompt`, with its newline ("" at Ctrl-D, the input's end).
    Blocks: call it in a thread."""
    try:
        return input(prompt) + "\n"
    except EOFError:
        return ""


def remember(line: str) -> None:
    """Keep `line` for Up and Ctrl-R at the next prompts (edited lines only)."""
    readline = _readline()
    if readline is not None:
        readline.add_history(line)


def _terminal(stream: TextIO | None) -> bool:
    """Whether `stream`'s file descriptor is a terminal (as `input()` asks it)."""
    try:
        return stream is not None and os.isatty(stream.fileno())
    except (OSError, ValueError):  # closed, or no descriptor (io.UnsupportedOperation)
        return False


def _readline() -> ModuleType | None:
    """Python's `readline`, where it is built (not on Windows, nor in some minimal Pythons);
    none on a dumb terminal, whose user asked for no cursor moves."""
    if os.environ.get("TERM") == "dumb":
        return None
    try:
        import readline
    except ImportError:
        return None
    return readline
