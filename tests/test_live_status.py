"""What a person sees while a command runs: a model gone quiet mid-answer, a call waiting for
approval, Ctrl-C (stopping, and what stopped), and `call`'s own live status and streaming."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
from io import StringIO
from pathlib import Path
from typing import TextIO

import pytest
from pydantic import JsonValue
from rich.console import Console

from agent import ScriptedModel
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.cli.signals import stopping_shown
from gateway.cli.tools import _call_agent  # pyright: ignore[reportPrivateUsage]
from gateway.console import RunConsole, open_console, open_terminal_console
from gateway.trace import ToolProgress
from tests.screen import ANSI, Screen, Terminal, read_all, read_until
from tests.test_console import ANSWER, installed

WIDTH = 80
REPO = Path(__file__).parents[1]


def terminal(file: StringIO) -> Console:
    return Console(file=file, force_terminal=True, width=WIDTH)


def event(
    kind: str, phase: str, span_id: str, parent_id: str | None, name: str = "x", **output: JsonValue
) -> TraceEvent:
    return TraceEvent.model_validate(
        {
            "kind": kind,
            "phase": phase,
            "name": name,
            "id": span_id if phase in ("start", "end", "error") else f"{span_id}-point",
            "parent_id": parent_id,
            "run_id": "r",
            "at_ms": 0,
            "output": output or None,
        }
    )


def token(span_id: str, text: str) -> TraceEvent:
    return event("model", "token", "t", span_id, "gpt-x", text=text, answer=True)


async def streaming(console: RunConsole, first: str) -> None:
    """A run whose own model call (`m`) has streamed `first` so far."""
    await console(event("run", "start", "r", None, "a"))
    await console(event("agent", "start", "g", "r", "a"))
    await console(event("model", "start", "m", "g", "openai:gpt-x"))
    await console(token("m", first))


@pytest.mark.anyio
async def test_a_model_quiet_mid_answer_is_said_below_the_text_which_stays_whole() -> None:
    """Once the answer began, nothing on the terminal moved while a stalled model said
    nothing (up to `model_timeout`, 300 s)."""
    screen = StringIO()  # stdout and stderr on one terminal
    console = RunConsole(out=terminal(screen), err=terminal(screen), quiet_after=0)
    await streaming(console, "Once upon")

    console.refresh()  # the ticker's call: the model has said nothing since
    shown = Screen(WIDTH).feed(screen.getvalue())
    assert shown.lines[0] == "Once upon"
    assert re.fullmatch(
        r"model openai:gpt-x  no text for \d+ s  \d+\.\d s, 9 chars", shown.lines[1]
    ), shown.lines
    assert (shown.row, shown.column) == (0, 9)  # the next text goes where the answer stops
    console.refresh()
    assert len(Screen(WIDTH).feed(screen.getvalue()).lines) == 2  # redrawn in place

    await console(token("m", " a time"))
    shown = Screen(WIDTH).feed(screen.getvalue())
    assert shown.lines == ["Once upon a time"]  # the quiet line erased, the text whole
    await console(event("model", "end", "m", "g"))
    console.close()
    shown = Screen(WIDTH).feed(screen.getvalue())
    assert shown.lines == ["Once upon a time"]
    assert (shown.row, shown.column) == (1, 0)
    assert ANSI.sub("", screen.getvalue()).count("Once upon") == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("first", "column"),
    [
        ("a" * (WIDTH - 1) + "漢字 ", 5),  # 漢 fits no more in the last column: wraps whole
        ("a" * (WIDTH - 4) + "\tb", WIDTH),  # the tab stops at the last column: the row is full
        ("x\tcafe\u0301 ", 13),  # a combining accent takes no cell
    ],
)
async def test_the_quiet_line_puts_the_cursor_back_where_the_text_stops(
    first: str, column: int
) -> None:
    """A wide character that wrapped early (and a tab near the margin) put the cursor back
    short of where the text stopped: the next text overwrote the answer's last characters."""
    screen = StringIO()
    console = RunConsole(out=terminal(screen), err=terminal(screen), quiet_after=0)
    await streaming(console, first)
    console.refresh()
    shown = Screen(WIDTH).feed(screen.getvalue())
    if column < WIDTH:
        assert "no text for" in shown.lines[-1]
        assert shown.column == column
    await console(token("m", "then MORE"))
    await console(event("model", "end", "m", "g"))
    console.close()
    shown = Screen(WIDTH).feed(screen.getvalue())
    assert shown.lines == Screen(WIDTH).feed(first + "then MORE").lines  # as if never quiet


@pytest.mark.anyio
async def test_a_model_writing_steadily_gets_no_quiet_line() -> None:
    screen = StringIO()
    console = RunConsole(out=terminal(screen), err=terminal(screen), quiet_after=3600)
    await streaming(console, "Once upon")
    written = screen.getvalue()
    console.refresh()
    assert screen.getvalue() == written


@pytest.mark.anyio
async def test_a_call_waiting_for_approval_has_a_status_line_with_its_wait() -> None:
    """The wait showed only the static message: no sign of how long it had waited."""
    err = StringIO()
    console = RunConsole(err=terminal(err))
    await console(event("run", "start", "r", None, "a"))
    await console(event("agent", "start", "g", "r", "a"))
    waiting = {"approval": "waiting", "call": "tool 0 c1"}
    await console(event("tool", "note", "n1", "g", "guarded", **waiting))
    shown = Screen(WIDTH).feed(err.getvalue()).lines
    assert re.fullmatch(
        r". approval guarded  \d+\.\d s waiting for a decision \(runs approve \| deny\)",
        shown[-1],
    ), shown
    await console(
        event("tool", "note", "n2", "g", "guarded", approval="approved", call="tool 0 c1")
    )
    assert Screen(WIDTH).feed(err.getvalue()).lines == []  # decided: the line is gone


@pytest.mark.anyio
async def test_no_wait_says_it_returns_once_the_calls_in_flight_end() -> None:
    """`--no-wait` stops waiting for the person, and waits for the step's other calls: the
    status says so, above those calls, and no longer shows a wait for a decision."""
    err = StringIO()
    console = RunConsole(err=terminal(err))
    await console(event("run", "start", "r", None, "a"))
    await console(event("agent", "start", "g", "r", "a"))
    await console(event("tool", "start", "t1", "g", "fetch"))
    waiting = {"approval": "waiting", "call": "tool 0 c1"}
    await console(event("tool", "note", "n1", "g", "guarded", **waiting))
    console.leaving()
    await console(event("tool", "note", "n2", "g", "other", approval="waiting", call="tool 0 c2"))
    shown = Screen(WIDTH).feed(err.getvalue()).lines
    assert shown[0] == "--no-wait: returns once these end (Ctrl-C: now)"
    assert re.fullmatch(r". tool fetch  \d+\.\d s", shown[1]), shown
    assert len(shown) == 2  # neither call waiting for a decision
    await console(event("tool", "end", "t1", "g", "fetch"))
    assert Screen(WIDTH).feed(err.getvalue()).lines == []  # nothing left in flight


@pytest.mark.anyio
@pytest.mark.parametrize("width", [40, 100])
async def test_each_call_in_flight_is_one_line_cut_to_the_terminals_width(width: int) -> None:
    """A server's long progress message (or a long tool name) wrapped its call's row: 11 rows
    at 100 columns, over 25 at 40; a status taller than the terminal then left a copy of
    itself in the scrollback at every log line."""
    err = StringIO()
    console = RunConsole(err=Console(file=err, force_terminal=True, width=width))
    await console(event("run", "start", "r", None, "a"))
    await console(event("agent", "start", "g", "r", "a"))
    await console(event("tool", "start", "t1", "g", "prog__work"))
    await console(event("tool", "start", "t2", "g", "tool_named_longer_than_a_line_" * 4))
    report = ToolProgress(progress=2, total=6, message="step 2 " + "of a long story " * 30)
    await console(
        TraceEvent(
            kind="tool",
            phase="progress",
            name="prog__work",
            id="p1",
            parent_id="t1",
            run_id="r",
            at_ms=0,
            output=report.model_dump(mode="json"),
            progress=report,
        )
    )
    console.write_line(err, "a log line\n")  # the status cleared, the line, the status again
    shown = Screen(width).feed(err.getvalue()).lines
    assert len(shown) == 3, shown
    line, work, named = shown
    assert line == "a log line"
    assert len(work) == width, work
    bar = r" [━╸╺]{20}" if width == 100 else ""  # where there is room for it
    assert re.fullmatch(rf". tool prog__work  \d+\.\d s{bar} 2/6 step 2 of .*…", work)
    assert len(named) == width, named
    assert re.fullmatch(r". tool tool_named_longer_than_a_line_.*…", named)
    console.leaving()  # its own line too, at any width
    assert Screen(width).feed(err.getvalue()).lines[1] == (
        "--no-wait: returns once these end (Ctrl-C: now)"
        if width == 100
        else "--no-wait: returns once these end (Ctrl…"
    )


@pytest.mark.anyio
async def test_ctrl_c_mid_answer_leaves_the_message_and_no_stale_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A frozen `stopping… 0.0 s` stayed above the message, a second live one below it; piped,
    the message began with a blank line."""
    screen = StringIO()
    console = RunConsole(out=terminal(screen), err=terminal(screen))
    await streaming(console, "Once upon a time there")
    console.stopping()
    said = "interrupted: run r is stored: agent-gateway resume r"
    console.say_stopped(said)
    shown = Screen(WIDTH).feed(screen.getvalue()).lines
    assert shown[:2] == ["Once upon a time there", said]
    assert re.fullmatch(r". stopping…  \d\.\d s", shown[2])  # while the servers stop
    console.close()
    assert Screen(WIDTH).feed(screen.getvalue()).lines == ["Once upon a time there", said]
    assert console.stopped_note() is None  # the run said why it stopped

    piped = RunConsole()
    piped.stopping()
    piped.say_stopped(said)
    assert capsys.readouterr().err == said + "\n"


@pytest.mark.anyio
async def test_ctrl_c_while_servers_start_says_it_stops_them_then_that_nothing_ran(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Interrupted while it waited for MCP servers, the command exited 130 saying nothing,
    after seconds of stopping them."""
    err = StringIO()
    async with stopping_shown(open_console(None, terminal(err))) as console:
        console.waiting_for(["slow"])
        console.stopping()  # what the first Ctrl-C calls
        shown = Screen(WIDTH).feed(err.getvalue()).lines
        assert shown[0] == (
            "interrupted while waiting for MCP servers to start (slow): stopping them"
        )
        assert re.fullmatch(r". stopping…  \d\.\d s", shown[1])
    assert Screen(WIDTH).feed(err.getvalue()).lines == [shown[0]]
    assert re.fullmatch(r"stopped after \d+\.\d s: nothing ran\n", capsys.readouterr().err)

    async with stopping_shown(open_console(None, None)) as piped:
        piped.waiting_for(["slow"])
        piped.stopping()
    assert re.fullmatch(
        r"interrupted while waiting for MCP servers to start \(slow\): stopping them\n"
        r"stopped after \d+\.\d s: nothing ran\n",
        capsys.readouterr().err,
    )


SERVERS = [f"mini{i:02}" for i in range(105)]


@pytest.mark.anyio
async def test_the_servers_starting_take_one_line_fitted_to_the_terminal() -> None:
    """With 105 servers the status was 11 lines at 80 columns: on a shorter terminal, each log
    line cleared it and left a copy of it in the scrollback."""
    err = StringIO()
    console = RunConsole(err=terminal(err))
    console.waiting_for(SERVERS)
    shown = Screen(WIDTH).feed(err.getvalue()).lines
    assert len(shown) == 1, shown
    assert re.fullmatch(
        r". waiting for 105 MCP servers: mini00, mini01, mini02 and 102 more  \d+\.\d s",
        shown[0],
    )
    console.waiting_for(SERVERS[101:])  # those settled are no longer named
    assert re.fullmatch(
        r". waiting for 4 MCP servers: mini101, mini102, mini103, mini104  \d+\.\d s",
        Screen(WIDTH).feed(err.getvalue()).lines[0],
    )
    console.waiting_for(["a-server-whose-name-is-longer-than-the-line-" * 2])
    (line,) = Screen(WIDTH).feed(err.getvalue()).lines
    assert len(line) == WIDTH
    assert re.fullmatch(r". waiting for 1 MCP server: a-server-whose-name-.*…  \d+\.\d s", line)
    console.waiting_for([])
    assert Screen(WIDTH).feed(err.getvalue()).lines == []


@pytest.mark.anyio
async def test_ctrl_c_while_many_servers_start_names_some_and_counts_the_rest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with stopping_shown(open_console(None, None)) as piped:
        piped.waiting_for(SERVERS)
        piped.stopping()
    assert capsys.readouterr().err.startswith(
        "interrupted while waiting for MCP servers to start (mini00, mini01, mini02, mini03, "
        "mini04, mini05, mini06, mini07, mini08, mini09 and 95 more): stopping them\n"
    )


def writing(fd: int) -> TextIO:
    return open(fd, "w", closefd=False)  # closed by the caller


@pytest.mark.anyio
async def test_a_dumb_terminal_is_told_once_which_servers_the_command_waits_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TERM=dumb showed nothing at all while servers started (seconds, up to a minute)."""
    monkeypatch.setenv("TERM", "dumb")
    primary, secondary = pty.openpty()
    try:
        with writing(secondary) as stderr, StringIO() as stdout:
            async with open_terminal_console(stdout, stderr) as console:
                console.waiting_for(["slow", "fast"])
                console.waiting_for(["slow"])  # not redrawn
                console.waiting_for([])
            os.close(secondary)
            shown = read_all(primary)
    finally:
        os.close(primary)
    assert shown == "waiting for 2 MCP servers: slow, fast\r\n"  # no escape sequence

    piped = StringIO()  # a dumb terminal's output redirected: as without a terminal
    async with open_terminal_console(StringIO(), piped) as console:
        console.waiting_for(["slow"])
    assert piped.getvalue() == ""


@pytest.mark.integration
def test_the_status_names_only_the_servers_still_starting(tmp_path: Path) -> None:
    """Waiting for the first server of the config (one that never answers), the status kept
    naming the two after it, one ready and one failed within a second; so did the message
    when interrupted."""
    piped = REPO / "tests" / "servers" / "piped.py"
    (tmp_path / "answers.json").write_text(json.dumps([{"content": ANSWER}]))
    (tmp_path / "agent-gateway.toml").write_text(
        '[mcpServers.silent]\ncommand = "bash"\nargs = ["-c", "cat > /dev/null"]\n'
        "connect_timeout = 60\n"
        f'[mcpServers.piped]\ncommand = "{sys.executable}"\nargs = ["{piped}"]\n'
        '[mcpServers.missing]\ncommand = "no-such-command-here"\n'
    )
    primary, secondary = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [
            installed(),
            "run",
            "go",
            "--no-store",
            "--model",
            f"scripted:{tmp_path / 'answers.json'}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
    ) as process:
        try:
            os.close(secondary)
            shown = read_until(primary, "waiting for 3 MCP servers: silent, piped, missing")
            shown += read_until(primary, "waiting for 1 MCP server: silent")
            process.send_signal(signal.SIGINT)
            shown += read_until(primary, "stopping them")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
    assert code == 130, shown
    assert "interrupted while waiting for MCP servers to start (silent): stopping them" in (
        ANSI.sub("", shown)
    )


@pytest.mark.anyio
async def test_call_of_an_agent_streams_its_answer_and_prints_it_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`call AGENT` asked its model without streaming, and showed nothing until the end."""
    out, err = StringIO(), StringIO()
    async with open_console(terminal(out), terminal(err)) as console:
        gateway = Gateway(
            [], [AgentSpec("sums", ScriptedModel([ANSWER], name="scripted-test"))], hooks=[console]
        )
        code = await _call_agent(gateway, "sums", {"prompt": "go"}, console, as_json=False)
    assert code == 0
    assert ANSI.sub("", out.getvalue()) == ANSWER + "\n"  # streamed through the console
    assert "model scripted-test" in ANSI.sub("", err.getvalue())  # the status meanwhile
    assert capsys.readouterr().out == ""  # not printed a second time


@pytest.mark.integration
def test_call_on_a_terminal_shows_the_tool_in_flight(tmp_path: Path) -> None:
    """A blank screen for the whole call, then the result."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    (tmp_path / "agent-gateway.toml").write_text(
        '[tools.slow]\npython = "tests.sample_tools:released_by"\n'
    )
    primary, secondary = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [installed(), "call", "slow", "--args", json.dumps({"fifo": str(fifo)})],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
    ) as process:
        try:
            os.close(secondary)
            shown = read_until(primary, "tool slow")  # the status, while the tool runs
            fifo.write_text("done\n")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        out = process.stdout.read()
    assert code == 0, shown
    assert out == b"done\n"


TELLS_A_STORY = """
import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

server = MCPServer("prog")


@server.tool()
async def work(fifo: str, ctx: Context) -> str:
    \"\"\"Report a paragraph as progress, then answer the line written to `fifo`.\"\"\"
    await ctx.report_progress(2, 6, "step 2 " + "of a long story " * 30)

    def read() -> str:
        with open(fifo, encoding="utf-8") as released:
            return released.readline().strip()

    return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)


server.run("stdio")
"""
"""A stdio server whose tool's progress message is a paragraph."""


@pytest.mark.integration
@pytest.mark.parametrize("width", [40, 100])
def test_a_servers_long_progress_message_keeps_its_call_to_one_row_of_a_real_terminal(
    tmp_path: Path, width: int
) -> None:
    """The message wrapped: 11 rows at 100 columns, over 25 at 40, a copy of them left in the
    scrollback at every log line once taller than the terminal."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    (tmp_path / "story.py").write_text(TELLS_A_STORY)
    (tmp_path / "agent-gateway.toml").write_text(
        f"[mcpServers.prog]\ncommand = {json.dumps(sys.executable)}\n"
        'args = ["story.py"]\nprefix = "always"\n'
    )
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    env.pop("COLUMNS", None)  # the terminal's own width, as a person's
    with subprocess.Popen(
        [
            installed(),
            "call",
            "prog__work",
            "--args",
            json.dumps({"fifo": str(fifo)}),
            "--config",
            "agent-gateway.toml",
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
    ) as process:
        try:
            os.close(secondary)
            terminal = Terminal(primary)
            terminal.until("step 2", count=3)  # drawn with its message, twice whole at least
            fifo.write_text("done\n")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
    assert code == 0
    # Up to the last draw, which may be cut short: each draw starts by erasing the one before.
    drawn = terminal.shown[: terminal.shown.rindex("\r\x1b[2K")]
    rows = Screen(width).feed(drawn).lines
    assert [row for row in rows if "prog__work" in row or "story" in row] == rows[-1:], rows
    assert len(rows[-1]) == width, rows
    assert re.fullmatch(r". tool prog__work  \d+\.\d s.* 2/6 step 2 .*…", rows[-1]), rows


HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def _shown_so_far(fd: int) -> str:
    """What a stopped process wrote to its terminal and is not read yet (all of it is there)."""
    shown = ""
    while select.select([fd], [], [], 0)[0]:
        shown += os.read(fd, 4096).decode(errors="replace")
    return shown


@pytest.mark.integration
def test_ctrl_z_shows_the_cursor_while_stopped_and_the_status_comes_back(tmp_path: Path) -> None:
    """Ctrl-Z stopped the command with the live status line's cursor hidden: the shell the
    person went back to had none until `fg`."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    (tmp_path / "agent-gateway.toml").write_text(
        '[tools.slow]\npython = "tests.sample_tools:released_by"\n'
    )
    primary, secondary = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [installed(), "call", "slow", "--args", json.dumps({"fifo": str(fifo)})],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
    ) as process:
        try:
            os.close(secondary)
            shown = read_until(primary, "tool slow")  # the status, its cursor hidden
            process.send_signal(signal.SIGTSTP)
            _, status = os.waitpid(process.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status)
            shown += _shown_so_far(primary)
            assert SHOW_CURSOR in shown[shown.rindex(HIDE_CURSOR) :]  # shown while stopped
            assert shown.endswith("\x1b[2K")  # and the status erased
            process.send_signal(signal.SIGCONT)
            again = read_until(primary, "tool slow")  # drawn again, as it goes on
            assert HIDE_CURSOR in again
            fifo.write_text("done\n")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
    assert code == 0
