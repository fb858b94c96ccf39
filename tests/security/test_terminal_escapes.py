"""What an MCP server, a model or a remote caller says reaches the operator's terminal and
logs as text: its escape sequences (a window title, clear screen, a carriage return that
rewrites the line) are shown as `\\x1b...`, never obeyed. A real stdio server that puts
them in its tools' names, descriptions, errors, progress and log messages."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from rich.console import Console

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.cli import main
from gateway.console import open_console
from tests.screen import read_all
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import McpServerConfig, McpToolkit, printable

REPO = Path(__file__).parents[2]
SERVER = Path(__file__).parents[1] / "servers" / "escapes_stdio.py"
SHOWN = r"\x1b]0;PWNED-TITLE\x07\x1b[2J"
"""The start of the server's escapes, as the terminal shows them."""
OBEYED = re.compile(r"\x1b\]|\x1b\[2J|\x1b\[H|\x1b\[K|\x07|\r")
"""What a terminal would act on: a title, clear screen, cursor home, erase line, bell, CR."""


def test_control_characters_but_newline_and_tab_are_written_as_escapes() -> None:
    said = "a\x1b]0;T\x07\r\n\tb\x00\x7f\x9b\u202ec"
    assert printable(said) == "a\\x1b]0;T\\x07\\x0d\n\tb\\x00\\x7f\\x9b\\u202ec"
    assert printable(printable(said)) == printable(said)  # shown twice, the same
    assert printable("plain text, ünïcode, 漢字") == "plain text, ünïcode, 漢字"


def _config(directory: Path, answers: list[dict[str, Any]]) -> Path:
    script = directory / "answers.json"
    script.write_text(json.dumps(answers))
    config = directory / "escapes.toml"
    config.write_text(
        f"[mcpServers.escapes]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}]\n"
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["escapes"]\n'
    )
    return config


def test_tool_listings_traces_stored_runs_and_server_logs_show_escapes_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    answer = "final \x1b]0;MODEL-TITLE\x07 answer"
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "escapes__progress", "arguments": {}}]},
            {"tool_calls": [{"name": "escapes__fail", "arguments": {}}]},
            {"content": answer},
        ],
    )
    caplog.set_level(logging.INFO, logger="toolkits.mcp.escapes")  # its stderr lines
    assert main(["tools", "--config", str(config)]) == 0
    listing = capsys.readouterr().out
    assert f"desc {SHOWN}" in listing
    assert r"(bad\x1b[31mname)" in listing
    assert not OBEYED.search(listing)
    assert "\x1b" not in listing

    state = str(tmp_path / "runs")
    question = "what is \x1b]0;CALLER\x07 this?"  # as a remote MCP client may send one
    assert main(["run", question, "--config", str(config), "--trace", "--state-dir", state]) == 0
    ran = capsys.readouterr()
    assert ran.out == answer + "\n"  # piped, the answer is exactly the model's
    assert f"error=boom {SHOWN}" in ran.err
    assert "\x1b" not in ran.err
    logged = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.escapes"]
    assert any(f"server log [lg{SHOWN}" in line for line in logged), logged
    assert any(line.startswith(f"stderr: starting {SHOWN}") for line in logged), logged
    assert not any(OBEYED.search(line) for line in logged)

    assert main(["runs", "list", "--state-dir", state, "--json"]) == 0
    [run] = json.loads(capsys.readouterr().out)
    assert main(["runs", "show", run["run_id"], "--state-dir", state]) == 0
    shown = capsys.readouterr().out
    assert r"question: what is \x1b]0;CALLER\x07 this?" in shown
    assert f"error: boom {SHOWN}" in shown
    assert r"final \x1b]0;MODEL-TITLE\x07 answer" in shown
    assert "\x1b" not in shown


@pytest.mark.anyio
async def test_the_live_status_and_the_streamed_answer_on_a_terminal_show_escapes_as_text() -> None:
    toy = ToyServer("evil")

    async def crunch(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        await ctx.session.report_progress(1, 2, "prog \x1b]0;PWNED-TITLE\x07\x1b[2J\nline")
        return text_result("42")

    toy.add("crunch", crunch)
    answer = "It is \x1b]0;MODEL-TITLE\x07 42."
    model = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="crunch", arguments={})]), answer],
        name="scripted-test",
    )
    out, err = StringIO(), StringIO()

    def terminal(file: StringIO) -> Console:
        return Console(file=file, force_terminal=True, width=200)

    async with (
        McpToolkit(
            "evil", McpServerConfig(command="unused", prefix="never"), target=toy.server
        ) as node,
        open_console(terminal(out), terminal(err)) as console,
    ):
        gateway = Gateway([node], [AgentSpec("a", model, tools=["evil"])])
        result = await gateway.run("a", "crunch it", hooks=[console], stream=True)
    assert result.output == answer
    assert r"prog \x1b]0;PWNED-TITLE\x07\x1b[2J line" in err.getvalue()  # on one line
    assert r"It is \x1b]0;MODEL-TITLE\x07 42." in out.getvalue()
    for said in (out.getvalue(), err.getvalue()):
        assert not re.search(r"\x1b\]|\x1b\[2J|\x07", said)  # the console's colours alone


@pytest.mark.anyio
async def test_a_log_line_written_while_the_console_is_open_shows_escapes_as_text() -> None:
    """Any log record (a library quoting a server, say) on the run's terminal is text too."""
    screen = StringIO()
    handler = logging.StreamHandler(screen)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        async with open_console(None, Console(file=screen, force_terminal=True)):
            logging.getLogger("tests").warning("quoted %s", "\x1b]0;T\x07\x1b[2J")
    finally:
        root.removeHandler(handler)
    assert "quoted \\x1b]0;T\\x07\\x1b[2J\n" in screen.getvalue()
    assert not re.search(r"\x1b\]|\x1b\[2J|\x07", screen.getvalue())


@pytest.mark.integration
def test_a_tools_result_called_on_a_terminal_and_chats_tool_list_show_escapes_as_text(
    tmp_path: Path,
) -> None:
    """`call TOOL` printed a result raw on a terminal (its title changed, the screen cleared),
    and `chat`'s `/tools` a description, where `run` and `tools` escape them."""
    config = _config(tmp_path, [])
    command = [sys.executable, "-m", "gateway.cli"]
    primary, secondary = pty.openpty()
    try:
        called = subprocess.run(
            [*command, "call", "escapes__ansi", "--config", str(config)],
            stdout=secondary,
            stderr=subprocess.PIPE,
            cwd=REPO,
            timeout=60,
        )
        os.close(secondary)
        secondary = -1
        shown = read_all(primary, "utf-8")
    finally:
        os.close(primary)
        if secondary >= 0:
            os.close(secondary)
    assert called.returncode == 0, called.stderr
    assert f"result {SHOWN}" in shown
    assert not OBEYED.search(shown.replace("\r\n", "\n"))  # a terminal's newline is CR LF

    chat = subprocess.run(
        [*command, "chat", "--config", str(config), "--state-dir", str(tmp_path / "s")],
        input=b"/tools\n/exit\n",
        capture_output=True,
        cwd=REPO,
        timeout=60,
    )
    assert chat.returncode == 0, chat.stderr
    listed = chat.stdout.decode()
    assert f"desc {SHOWN}" in listed
    assert "\x1b" not in listed
