"""What the terminal shows of a run: the streamed answer, the live status, and plain output
when piped."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pty
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from pydantic import JsonValue
from rich.console import Console

from agent import InProcessStore, ScriptedAnswer, ScriptedCall, ScriptedModel, SessionMemory
from agent.models import AnthropicModel, FallbackModel
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.cli import main
from gateway.cli.results import print_result
from gateway.console import open_console
from gateway.traced_model import note_fallback
from tests.models.support import FakeProvider, Sleeps, retry_policy
from tests.screen import ANSI, read_until
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import McpServerConfig, McpToolkit

ANSWER = "The crunch came out at 42, as expected."


def installed() -> str:
    """The `agent-gateway` console script of this environment."""
    executable = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
    assert executable is not None, "the package is not installed (pip install -e .)"
    return executable


def write_script(path: Path, answers: object) -> Path:
    path.write_text(json.dumps(answers))
    return path


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def cruncher() -> ToyServer:
    toy = ToyServer("numbers")

    async def crunch(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        for step in (1, 2):
            await ctx.session.report_progress(step, 2, f"pass {step}")
        return text_result("42")

    toy.add("crunch", crunch)
    return toy


def terminal(file: StringIO) -> Console:
    return Console(file=file, force_terminal=True, width=100)


@pytest.mark.anyio
async def test_a_terminal_sees_the_answer_stream_in_and_the_calls_in_flight() -> None:
    out, err = StringIO(), StringIO()
    seen_while_running: dict[str, str] = {}

    async def look(event: TraceEvent) -> None:
        # What the terminal showed at the moment a call ended, before the run returned.
        if event.phase == "end" and event.kind in ("model", "tool"):
            seen_while_running[f"{event.kind} {len(seen_while_running)}"] = (
                ANSI.sub("", out.getvalue()) + "|" + ANSI.sub("", err.getvalue())
            )

    model = ScriptedModel([call("crunch"), ANSWER], name="scripted-test")
    config = McpServerConfig(command="unused", prefix="never")
    async with (
        McpToolkit("numbers", config, target=cruncher().server) as node,
        open_console(terminal(out), terminal(err)) as console,
    ):
        gateway = Gateway([node], [AgentSpec("a", model, tools=["numbers"])])
        result = await gateway.run("a", "crunch it", hooks=[console, look], stream=True)

    assert result.output == ANSWER
    first_model, tool, last_model = seen_while_running.values()
    assert "model scripted-test" in first_model.split("|")[1]  # the status while it thought
    status = tool.split("|")[1]
    assert "tool crunch" in status
    assert "2/2" in status  # the tool's progress, as a bar
    assert "pass 2" in status
    assert ANSWER in last_model.split("|")[0]  # on stdout before the model call ended
    assert ANSI.sub("", out.getvalue()) == ANSWER + "\n"  # once, and nothing else
    assert console.streamed(result.output)


@pytest.mark.anyio
async def test_only_the_answer_streams_not_the_summary_of_the_older_turns() -> None:
    """With `summarise`, the summary's call (the agent's own model, in the run whose turn
    needs it) streamed its text to the terminal before the answer, as if part of it."""
    out, err = StringIO(), StringIO()
    summary = "The user said q1."
    model = ScriptedModel(["One.", "Two.", summary, "Three."], name="scripted-test")
    memory = SessionMemory(InProcessStore(), turns=1, summarise=True)
    gateway = Gateway([], [AgentSpec("a", model, memory=memory)])
    async with open_console(terminal(out), terminal(err)) as console:
        for question in ("q1", "q2", "q3"):
            await gateway.run("a", question, session_id="s", hooks=[console], stream=True)
    assert ANSI.sub("", out.getvalue()) == "One.\nTwo.\nThree.\n"
    assert (await memory.load("s")).previous_summary == summary  # it was written


@pytest.mark.anyio
async def test_a_handed_off_answer_streams_to_the_terminal_as_the_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out, err = StringIO(), StringIO()
    shown_mid_answer: list[str] = []

    async def look(event: TraceEvent) -> None:
        # The terminal as the specialist's model writes (its call not ended yet).
        if event.phase == "token" and event.name == "billing":
            shown_mid_answer.append(ANSI.sub("", out.getvalue()))

    lead = ScriptedModel([call("billing")], name="lead")
    specs = [
        AgentSpec("triage", lead, handoffs=["billing"]),
        AgentSpec("billing", ScriptedModel([ANSWER], name="billing")),
    ]
    async with open_console(terminal(out), terminal(err)) as console:
        result = await Gateway([], specs).run("triage", "go", hooks=[console, look], stream=True)
        assert print_result(result, shown=console.streamed) == 0

    assert len(shown_mid_answer) > 2
    # Word by word, as it was written, before the specialist's model call ended.
    assert shown_mid_answer[0].strip() == "The"
    assert shown_mid_answer[-1] == ANSWER
    assert ANSI.sub("", out.getvalue()) == ANSWER + "\n"  # streamed, once
    said = ANSI.sub("", err.getvalue())
    assert "triage handed off to billing\n" in said
    assert "\x1b[2m" in err.getvalue()  # dim, as the other notes
    assert capsys.readouterr().out == ""  # not printed again


@pytest.mark.anyio
async def test_an_agent_tools_text_stays_off_the_terminal_a_failed_handoffs_is_said() -> None:
    """The handoff's agent began an answer that was cut off (its item failed): the lead's
    answer follows a dim line saying the text above was not the answer; the helper's text
    (an agent tool) never reaches the terminal."""
    out, err = StringIO(), StringIO()
    lead = ScriptedModel(
        [call("helper", prompt="?"), call("billing"), "Billing is away; it is 42."], name="lead"
    )
    cut = ScriptedAnswer(content="Your invoice comes to", stop_reason="max_tokens")
    specs = [
        AgentSpec("triage", lead, tools=["helper"], handoffs=["billing"]),
        AgentSpec("billing", ScriptedModel([cut], name="billing")),
        AgentSpec("helper", ScriptedModel(["Helper words."], name="helper")),
    ]
    async with open_console(terminal(out), terminal(err)) as console:
        result = await Gateway([], specs).run("triage", "go", hooks=[console], stream=True)

    assert result.output == "Billing is away; it is 42."
    assert ANSI.sub("", out.getvalue()) == "Your invoice comes to\nBilling is away; it is 42.\n"
    said = ANSI.sub("", err.getvalue())
    assert "billing failed (" in said
    assert "that was not the answer; triage answers instead\n" in said
    assert "handed off" not in said
    assert console.streamed(result.output)


def anthropic_cut_off_after(*texts: str) -> AnthropicModel:
    """Anthropic streaming `texts` as the answer's first deltas, then the connection reset."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 12, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        *(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": text}})
          for text in texts),
    ]  # fmt: skip

    async def reset() -> AsyncIterator[bytes]:
        for name, data in events:
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        raise httpx.ReadError("connection reset by peer")

    provider = FakeProvider(
        httpx.Response(200, headers={"content-type": "text/event-stream"}, content=reset())
    )
    return AnthropicModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        http_client=provider.client(),
        retry=retry_policy(Sleeps()),  # a second request would fail the test: none is sent
    )


@pytest.mark.anyio
async def test_a_model_cut_off_mid_answer_ends_its_line_and_the_fallback_answers_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The dead model's partial text was glued to the fallback's answer, which was then
    printed a second time, and nothing said the first model failed."""
    out, err = StringIO(), StringIO()
    shown_at_note: list[str] = []

    async def look(event: TraceEvent) -> None:
        if event.phase == "note":  # after the console's hook: what it showed by then
            shown_at_note.append(ANSI.sub("", out.getvalue()) + "|" + ANSI.sub("", err.getvalue()))

    model = FallbackModel(
        [anthropic_cut_off_after("Anthropic ", "pa"), ScriptedModel([ANSWER], name="backup")],
        on_fallback=note_fallback,
    )
    async with open_console(terminal(out), terminal(err)) as console:
        gateway = Gateway([], [AgentSpec("a", model)])
        result = await gateway.run("a", "go", hooks=[console, look], stream=True)

    assert result.output == ANSWER
    assert ANSI.sub("", out.getvalue()) == "Anthropic pa\n" + ANSWER + "\n"
    streamed_then, said_then = shown_at_note[0].split("|")
    assert streamed_then == "Anthropic pa\n"  # ended before the next model's text
    assert (
        "anthropic:claude-sonnet-4-5 failed mid-answer (stream broke: ReadError: connection "
        "reset by peer); backup answers instead\n"
    ) in said_then
    assert "\x1b[2m" in err.getvalue()  # dim
    assert console.streamed(result.output)
    assert print_result(result, shown=console.streamed) == 0
    assert capsys.readouterr().out == ""  # not printed a second time


@pytest.mark.anyio
async def test_a_log_record_waits_for_the_streamed_answer_line_to_end() -> None:
    """A WARNING from a server starting in the background landed inside the answer's text."""
    screen, err = StringIO(), StringIO()  # stdout and stderr on one terminal
    handler = logging.StreamHandler(screen)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    tokens = 0

    async def log_between_tokens(event: TraceEvent) -> None:
        nonlocal tokens
        if event.phase == "token":
            tokens += 1
            if tokens == 2:
                logging.getLogger("toolkits.mcp.everything").warning("left out tools")

    try:
        async with open_console(terminal(screen), terminal(err)) as console:
            gateway = Gateway([], [AgentSpec("a", ScriptedModel([ANSWER + "\nSecond line."]))])
            await gateway.run("a", "go", hooks=[console, log_between_tokens], stream=True)
        logging.getLogger("tests").warning("after the console")
    finally:
        root.removeHandler(handler)
    assert tokens > 3
    assert ANSI.sub("", screen.getvalue()) == (
        f"{ANSWER}\nWARNING toolkits.mcp.everything: left out tools\nSecond line.\n"
        "WARNING tests: after the console\n"  # the handler writes straight again
    )
    assert handler.stream is screen


@pytest.mark.anyio
async def test_a_log_record_clears_the_status_line_first() -> None:
    """A WARNING was written right after the status (`... 0.3 sWARNING ...`)."""
    screen = StringIO()
    handler = logging.StreamHandler(screen)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        async with open_console(None, terminal(screen)) as console:
            console.waiting_for(["everything"])
            shown = ANSI.sub("", screen.getvalue())
            logging.getLogger("tests").warning("left out tools")
            console.waiting_for([])
    finally:
        root.removeHandler(handler)
    assert "waiting for 1 MCP server: everything" in shown
    # The status is erased (its line cleared), then the record has a line of its own.
    assert "\x1b[2Kleft out tools\n" in screen.getvalue()


def test_piped_output_is_plain_text_exactly_as_without_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(
        tmp_path / "answers.json",
        [
            {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
            {"content": "It is 42."},
        ],
    )
    code = main(["run", "What is 6 * 7?", "--model", f"scripted:{script}", "--trace"])
    out, err = capsys.readouterr()
    assert code == 0
    assert out == "It is 42.\n"
    lines = [re.sub(r"^\[\s*\d+ ms\]", "[t]", line) for line in err.splitlines()]
    assert lines == [
        "[t]     model scripted:answers.json out={\"tool_calls\":[{\"id\":\"call_1\",\"name\":"
        "\"calculator\",\"arguments\":{\"expression\":\"6 * 7\"}}],\"usage\":{\"input_tokens\":"
        "10,\"output_tokens\":1,\"requests\":1}}",
        "[t]     calculator   in={\"expression\":\"6 * 7\"} out={\"response\":\"42\"}",
        "[t]     model scripted:answers.json out={\"content\":\"It is 42.\",\"usage\":"
        "{\"input_tokens\":11,\"output_tokens\":3,\"requests\":1}}",
        "[t]   agent assistant out=[{\"output\":\"It is 42.\"}]",
        "[t] run assistant out=[{\"output\":\"It is 42.\"}]",
    ]  # fmt: skip


@pytest.mark.integration
def test_the_installed_command_streams_the_answer_once_into_a_real_terminal(
    tmp_path: Path,
) -> None:
    executable = installed()
    script = write_script(tmp_path / "answers.json", [{"content": ANSWER}])
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [executable, "run", "go", "--model", f"scripted:{script}", "--trace"],
            cwd=tmp_path,
            stdout=secondary,
            stderr=subprocess.PIPE,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "TERM": "xterm-256color"},
        )
        os.close(secondary)
        shown = _read_all(primary)
    finally:
        os.close(primary)
    assert done.returncode == 0, done.stderr
    assert ANSI.sub("", shown).replace("\r\n", "\n") == ANSWER + "\n"  # streamed, not repeated
    assert "\x1b" not in done.stderr  # stderr is a pipe: its trace stays plain
    assert "run assistant out=" in done.stderr


def _read_all(fd: int) -> str:
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_an_empty_final_answer_is_reported_as_such_and_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(tmp_path / "empty.json", [{"content": ""}])
    code = main(["run", "anything?", "--model", f"scripted:{script}", "--trace"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""
    assert "error: the model's final answer was empty" in err
    assert '"warning":"the model\'s final answer was empty"' in err  # in the trace too
    assert main(["demo", "anything?", "--model", f"scripted:{script}"]) == 1
    out, err = capsys.readouterr()
    assert "answer:" not in out
    assert "error: the model's final answer was empty" in err
    assert main(["run", "anything?", "--model", f"scripted:{script}", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert (printed["output"], printed["error"]) == (None, "the model's final answer was empty")


def test_an_answer_cut_off_at_the_token_limit_fails_the_run_and_keeps_its_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = write_script(
        tmp_path / "cut.json", [{"content": "The three causes are", "stop_reason": "max_tokens"}]
    )
    code = main(["run", "why?", "--model", f"scripted:{script}", "--trace"])
    out, err = capsys.readouterr()
    assert code == 1
    assert out == ""  # not printed as if it were the answer
    assert "error: the answer was cut off at the model's output token limit" in err
    assert '"stop_reason":"max_tokens"' in err  # the model span says why it stopped
    assert main(["run", "why?", "--model", f"scripted:{script}", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["output"] == "The three causes are"
    assert printed["error"].startswith("the answer was cut off at the model's output token limit")


def test_a_terminal_is_told_which_servers_the_run_waits_for(tmp_path: Path) -> None:
    executable = installed()
    script = write_script(tmp_path / "answers.json", [{"content": ANSWER}])
    # Reads the handshake and never answers: the run waits its connect_timeout for it.
    (tmp_path / "agent-gateway.toml").write_text(
        '[mcpServers.silent]\ncommand = "bash"\nargs = ["-c", "cat > /dev/null"]\n'
        "connect_timeout = 2\n"
    )
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [executable, "run", "go", "--model", f"scripted:{script}"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=secondary,
            text=True,
            timeout=30,
            check=False,
            env={**os.environ, "TERM": "xterm-256color"},
        )
        os.close(secondary)
        shown = ANSI.sub("", _read_all(primary))
    finally:
        os.close(primary)
    assert done.returncode == 0, shown
    assert done.stdout == ANSWER + "\n"
    assert "waiting for 1 MCP server: silent" in shown
    assert "no handshake and tool list within 2 s" in shown  # then it goes on without it


@pytest.mark.parametrize("store", [["--no-store"], ["--state-dir", "state"]])
def test_a_run_does_not_wait_for_a_server_its_agent_does_not_use(
    tmp_path: Path, store: list[str]
) -> None:
    """It would wait its connect_timeout (10 minutes) for it; the test's timeout is 30 s."""
    executable = installed()
    script = write_script(tmp_path / "answers.json", [{"content": ANSWER}])
    (tmp_path / "agent-gateway.toml").write_text(
        '[mcpServers.silent]\ncommand = "bash"\nargs = ["-c", "cat > /dev/null"]\n'
        "connect_timeout = 600\n"
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.sums]\ntools = ["calculator"]\n'
        '[agents.chatty]\ntools = ["silent", "sums"]\n'
    )
    done = subprocess.run(
        [executable, "run", "go", "--agent", "sums", "--model", f"scripted:{script}", *store],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER + "\n"


@pytest.mark.parametrize(
    ("tool", "args", "said"),
    [
        ("piped__echo", '{"message": "hi"}', "hi\n"),
        ("sums", '{"prompt": "go"}', ANSWER + "\n"),
    ],
    ids=["server tool", "agent"],
)
def test_call_waits_only_for_the_server_its_tool_or_agent_names(
    tmp_path: Path, tool: str, args: str, said: str
) -> None:
    """A silent server's connect_timeout (10 minutes) is not waited for; the test's is 60 s."""
    script = write_script(tmp_path / "answers.json", [{"content": ANSWER}])
    piped = Path(__file__).parent / "servers" / "piped.py"
    (tmp_path / "agent-gateway.toml").write_text(
        '[mcpServers.silent]\ncommand = "bash"\nargs = ["-c", "cat > /dev/null"]\n'
        "connect_timeout = 600\n"
        f'[mcpServers.piped]\ncommand = "{sys.executable}"\nargs = ["{piped}"]\n'
        'prefix = "always"\n'
        f'[agents.sums]\ntools = ["piped"]\nmodel = "scripted:{script}"\n'
    )
    done = subprocess.run(
        [installed(), "call", tool, "--args", args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == said


def test_call_says_its_result_before_its_servers_stop(tmp_path: Path) -> None:
    """A stdio server that outlives its stdin is stopped after a 2 s grace (the SDK's): the
    answer is out before that, not after. The server notes when it is told to stop."""
    piped = Path(__file__).parent / "servers" / "piped.py"
    marker = tmp_path / "stopped"
    on_term = f"echo stopped > {shlex.quote(str(marker))}; exit 0"
    wrapper = (
        f"trap {shlex.quote(on_term)} TERM; "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(piped))}; sleep 60 & wait"
    )
    (tmp_path / "agent-gateway.toml").write_text(
        f'[mcpServers.piped]\ncommand = "bash"\nargs = ["-c", {json.dumps(wrapper)}]\n'
    )
    with subprocess.Popen(
        [installed(), "call", "piped__echo", "--args", '{"message": "hi"}'],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as running:
        assert running.stdout is not None
        assert running.stdout.readline() == "hi\n"
        assert not marker.exists()  # the grace has 2 s to go
        assert running.wait(timeout=60) == 0
    assert marker.read_text() == "stopped\n"


def test_call_says_its_error_before_its_servers_stop(tmp_path: Path) -> None:
    """A call that timed out was said only after its server's 2 s grace (a hung server reads
    no stdin): 7 s for a 5 s timeout. Said at once now, while the server still runs."""
    piped = Path(__file__).parent / "servers" / "piped.py"
    marker = tmp_path / "stopped"
    on_term = f"echo stopped > {shlex.quote(str(marker))}; exit 0"
    wrapper = (
        f"trap {shlex.quote(on_term)} TERM; "
        f"{shlex.quote(sys.executable)} {shlex.quote(str(piped))}; sleep 60 & wait"
    )
    (tmp_path / "agent-gateway.toml").write_text(
        f'[mcpServers.piped]\ncommand = "bash"\nargs = ["-c", {json.dumps(wrapper)}]\n'
        "timeout = 1\nconnect_timeout = 30\n"
    )
    with subprocess.Popen(
        [installed(), "call", "piped__wait"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as running:
        assert running.stderr is not None
        said = running.stderr.readline()
        if said.startswith("note: using agent-gateway.toml"):
            said = running.stderr.readline()
        assert not marker.exists()  # the grace has 2 s to go
        assert running.wait(timeout=60) == 1
    assert said == (
        "error: tool 'piped__wait' of MCP server 'piped' timed out (no result or progress for "
        "1 s); "
        "the call was cancelled\n"
    )
    assert marker.read_text() == "stopped\n"


@pytest.mark.integration
@pytest.mark.parametrize("reads", [["-"], ["--items", "-"]])
def test_ctrl_c_while_a_run_waits_for_stdin_on_a_terminal_ends_it_at_once(
    tmp_path: Path, reads: list[str]
) -> None:
    """The read blocked the event loop: the first Ctrl-C went unheard, the second printed a
    traceback (exit 1)."""
    executable = installed()
    script = write_script(tmp_path / "answers.json", [{"content": ANSWER}])
    primary, secondary = pty.openpty()
    with subprocess.Popen(
        [executable, "run", *reads, "--no-store", "--model", f"scripted:{script}"],
        cwd=tmp_path,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "TERM": "xterm-256color"},
    ) as process:
        try:
            os.close(secondary)
            hint = read_until(primary, "from stdin (end it with Ctrl-D)")
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=10)
            shown = hint + _read_all(primary)
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        out = process.stdout.read()
    assert code == 130, shown
    assert "Traceback" not in shown
    assert out == b""


@pytest.mark.integration
def test_ctrl_c_while_servers_start_says_stopping_and_a_second_ends_them_at_once(
    tmp_path: Path,
) -> None:
    """The status went on ticking "waiting for MCP servers" while they stopped (seconds); a
    second Ctrl-C exited, leaving a server's child running (its own session: the terminal's
    Ctrl-C never reaches it)."""
    child_pid = tmp_path / "child.pid"
    server = tmp_path / "server.sh"
    # Never answers the handshake; outlives stdin's end and SIGTERM: a server slow to stop.
    quoted = shlex.quote(str(child_pid))
    server.write_text(f"#!/bin/sh\ntrap '' TERM\nsleep 60 &\necho $! > {quoted}\nwait\n")
    server.chmod(0o755)
    script = write_script(tmp_path / "answers.json", [{"content": ANSWER}])
    (tmp_path / "agent-gateway.toml").write_text(
        f"[mcpServers.slow]\ncommand = {json.dumps(str(server))}\nconnect_timeout = 60\n"
    )
    primary, secondary = pty.openpty()
    with subprocess.Popen(
        [installed(), "run", "go", "--no-store", "--model", f"scripted:{script}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "TERM": "xterm-256color"},
    ) as process:
        try:
            os.close(secondary)
            shown = read_until(primary, "waiting for 1 MCP server: slow")
            deadline = time.monotonic() + 30
            while not child_pid.exists() or not child_pid.read_text().strip():
                assert time.monotonic() < deadline, f"the server wrote no {child_pid}: {shown}"
                shown += read_until(primary, "\r")  # the status redrawn meanwhile
            child = os.pidfd_open(int(child_pid.read_text()))
            process.send_signal(signal.SIGINT)
            shown += read_until(primary, "stopping…")
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=10)
            ended, _, _ = select.select([child], [], [], 10)
            os.close(child)
        finally:
            process.kill()
            os.close(primary)
            if child_pid.exists() and child_pid.read_text().strip():  # none left behind
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(child_pid.read_text()), signal.SIGKILL)
        assert process.stdout is not None
        out = process.stdout.read()
    assert code == 130, shown
    assert ended, "the server's child outlived the gateway"
    assert out == b""
