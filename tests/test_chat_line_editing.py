"""`chat` on a terminal reads each line with readline's editing: a line of any length, a pasted
text of several lines as one question, arrow keys that move the cursor, Up for the questions
asked before; and the terminal as it was after the chat, however it ended. An approval question
is answered by what is typed after it is asked, never before."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from tests.chat_terminal import (
    chat_on_pty,
    gated_config,
    on_pty,
    session_messages,
    tool_call,
)
from tests.screen import Terminal, read_all

PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
LEFT, UP = b"\x1b[D", b"\x1b[A"
PASTES_ON, PASTES_OFF = "\x1b[?2004h", "\x1b[?2004l"


def _new_terminals_modes() -> list[Any]:
    """The modes a terminal has before any program changes them (each new pty's)."""
    primary, secondary = pty.openpty()
    try:
        return termios.tcgetattr(secondary)
    finally:
        os.close(primary)
        os.close(secondary)


def _send(terminal: Terminal, data: bytes, timeout: float = 30) -> None:
    """Type `data`, reading what the chat echoes meanwhile: a long line's echo would fill the
    terminal's buffer, and the chat would stop reading what is typed."""
    deadline = time.monotonic() + timeout
    while data:
        left = max(0.0, deadline - time.monotonic())
        readable, writable, _ = select.select([terminal.fd], [terminal.fd], [], left)
        assert readable or writable, f"not read within {timeout} s: {terminal.shown[-300:]!r}"
        if readable:
            terminal.shown += os.read(terminal.fd, 65536).decode(errors="replace")
        if writable:
            with_room = os.write(terminal.fd, data[:512])
            data = data[with_room:]


@pytest.mark.integration
def test_a_terminals_lines_are_edited_whole_and_the_terminal_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    """The terminal's own line mode cut a line at 4,095 characters without a word, made each
    line of a paste a question (a model turn) of its own, and sent arrow keys to the model as
    escape sequences. Ctrl-C at the prompt, which leaves with a read still waiting, leaves the
    terminal's modes as they were and bracketed paste off."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": f"answer {n}"} for n in range(1, 5)]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.assistant]\nmodel = "scripted:{script}"\n')
    state = tmp_path / "state"
    modes = _new_terminals_modes()
    options = ("--session", "s1", "--state-dir", str(state))
    process, primary, secondary = on_pty(config, "chat", *options, term="xterm")
    os.set_blocking(primary, False)
    terminal = Terminal(primary)
    long_line = "x" * 6000 + "END"
    with process:
        try:
            terminal.until("> ")
            _send(terminal, PASTE_START + b"line one\nline two\n" + PASTE_END + b"\r")
            terminal.until("> ", count=2)
            _send(terminal, long_line.encode() + b"\r")
            terminal.until("> ", count=3)
            _send(terminal, b"abc" + LEFT + LEFT + b"X\r")
            terminal.until("> ", count=4)
            _send(terminal, UP + b"\r")  # the question before, again
            terminal.until("> ", count=5)
            _send(terminal, b"half typed")
            terminal.until("half typed")
            process.send_signal(signal.SIGINT)  # Ctrl-C at the prompt leaves
            terminal.until("continues it")
            code = process.wait(timeout=30)
            left_modes = termios.tcgetattr(secondary)
            terminal.shown += read_all(primary)
        finally:
            process.kill()
            os.close(primary)
            os.close(secondary)
        assert process.stdout is not None
        out = process.stdout.read().decode()
    assert code == 130, terminal.shown
    assert out == "answer 1\nanswer 2\nanswer 3\nanswer 4\n"
    questions = [m["content"] for m in session_messages(config, state, "s1") if m["role"] == "user"]
    assert questions == ["line one\nline two", long_line, "aXbc", "aXbc"]
    assert left_modes == modes
    shown = terminal.shown
    assert shown.rindex(PASTES_OFF) > shown.rindex(PASTES_ON), shown[-300:]
    assert "Traceback" not in shown


@pytest.mark.integration
def test_an_approval_is_not_answered_by_what_was_typed_before_it_was_asked(tmp_path: Path) -> None:
    """A pasted question whose next line began with `yes`, or a `y` typed a moment after
    Enter, answered the approval question before it was asked, unseen: what was typed ahead
    is dropped as the question is asked."""
    written = tmp_path / "written.txt"
    answers = [{"tool_calls": [tool_call("write", written, "one", "w1")]}, {"content": "Not done."}]
    config = gated_config(tmp_path, answers)
    state = tmp_path / "state"
    process, primary = chat_on_pty(config, "--session", "s1", "--state-dir", str(state))
    terminal = Terminal(primary)
    with process:
        try:
            terminal.until("> ")
            os.write(primary, b"write one\nyes, go ahead\n")  # one paste
            terminal.until("allow it?")
            terminal.type("n asked now")
            terminal.until("> ", count=2)
            terminal.type("/exit")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
    assert code == 0, terminal.shown
    assert not written.exists()
    told = [m["content"] for m in session_messages(config, state, "s1") if m["role"] == "tool"]
    assert told == [
        "The user rejected the tool call to write; it did not run. The user said: asked now"
    ]


@pytest.mark.integration
def test_run_dash_on_a_terminal_takes_lines_of_any_length(tmp_path: Path) -> None:
    """`run -` on a terminal: each line typed is edited and kept whole (the terminal's line
    mode cut each at 4,095 characters), until Ctrl-D at a line's start."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "read it"}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[agents.assistant]\nmodel = "scripted:{script}"\n')
    state = tmp_path / "state"
    options = ("-", "--session", "s1", "--state-dir", str(state))
    process, primary, secondary = on_pty(config, "run", *options, term="xterm")
    os.close(secondary)
    os.set_blocking(primary, False)
    terminal = Terminal(primary)
    long_line = "y" * 5000 + "END"
    with process:
        try:
            terminal.until("end it with Ctrl-D")
            terminal.until(
                PASTES_ON
            )  # readline reads: what is typed now is its, not the line mode's
            _send(terminal, long_line.encode() + b"\rsecond line\r\x04")
            code = process.wait(timeout=60)
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        out = process.stdout.read().decode()
    assert (code, out) == (0, "read it\n"), terminal.shown[-500:]
    questions = [m["content"] for m in session_messages(config, state, "s1") if m["role"] == "user"]
    assert questions == [f"{long_line}\nsecond line"]
