"""`chat` (and `call AGENT`) asking the person at the terminal about a call that needs
approval, in place; piped, refusing it with a remedy that fits the command."""

from __future__ import annotations

import io
import json
import os
import pty
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import JsonValue
from rich.console import Console

from gateway import TraceEvent
from gateway.approval import NOBODY_TO_ASK, ApprovalRequest, Decision
from gateway.cli import main
from gateway.cli.ask_here import SHOWN_INPUT, answer, question
from gateway.console import open_console
from tests.chat_terminal import (
    EXECUTABLE,
    REPO,
    chat_on_pty,
    gated_config,
    session_messages,
    tool_call,
)
from tests.screen import ANSI, Screen, Terminal


@pytest.mark.integration
def test_chat_on_a_terminal_asks_about_a_gated_call_and_runs_it_or_tells_the_model_no(
    tmp_path: Path,
) -> None:
    """A gated call in `chat` was always refused, the model told to use a run store that chat
    does not have. Now the person is asked: `y MESSAGE` runs the tool, and the model is told
    the message after its result; `n MESSAGE` does not, and the model is told the message; the
    step's other call ran while the question waited."""
    written, fifo = tmp_path / "written.txt", tmp_path / "fifo"
    os.mkfifo(fifo)
    waits = {"name": "wait", "arguments": {"fifo": str(fifo)}, "id": "n1"}
    answers: list[dict[str, object]] = [
        {"tool_calls": [tool_call("write", written, "one", "w1"), waits]},
        {"content": "Written."},
        {"tool_calls": [tool_call("write", written, "two", "w2")]},
        {"content": "Not written."},
    ]
    config = gated_config(tmp_path, answers)
    state = tmp_path / "state"
    process, primary = chat_on_pty(config, "--session", "s1", "--state-dir", str(state))
    terminal = Terminal(primary)
    with process:
        try:
            terminal.until("> ")
            terminal.type("write one")
            terminal.until("allow it?")
            terminal.until("released_by: started")  # the step's other call goes on meanwhile
            with fifo.open("w") as release:
                release.write("released\n")
            assert not written.exists()
            terminal.type("y only this once")
            terminal.until("> ", count=2)
            assert written.read_text() == "one\n"
            terminal.type("write two")
            terminal.until("allow it?", count=2)
            terminal.type("n the other account, please")
            terminal.until("> ", count=3)
            terminal.type("/exit")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        out = process.stdout.read().decode()
    assert code == 0, terminal.shown
    assert out == "Written.\nNot written.\n"
    assert written.read_text() == "one\n"  # the denied call did not run
    question = f'assistant: the call write {{"path": "{written}", "line": "one"}} needs approval'
    assert (
        f"{question}\r\nallow it? [y/n, and a message for the model if you like] " in terminal.shown
    )
    told = [m["content"] for m in session_messages(config, state, "s1") if m["role"] == "tool"]
    assert told == [
        "appended 'one'\n\nThe user approved this call and said: only this once",
        "released",
        "The user rejected the tool call to write; it did not run. "
        "The user said: the other account, please",
    ]
    assert "Traceback" not in terminal.shown


@pytest.mark.integration
def test_ctrl_c_at_the_question_cancels_the_answer_and_a_handoffs_call_names_its_agents(
    tmp_path: Path,
) -> None:
    """Ctrl-C at the question cancels the answer in flight, as it does anywhere in it: the
    call does not run, the prompt comes back, and the next line typed is the next question
    (not taken by the read the question left). A call of the agent a conversation was handed
    to is asked the same way, naming the agents down to it."""
    written = tmp_path / "written.txt"
    handoff: dict[str, object] = {"tool_calls": [{"name": "assistant", "arguments": {}}]}
    triage = tmp_path / "triage.json"
    triage.write_text(json.dumps([handoff, handoff]))
    answers: list[dict[str, object]] = [
        {"tool_calls": [tool_call("write", written, "one", "w1")]},
        {"tool_calls": [tool_call("write", written, "two", "w2")]},
        {"content": "Written."},
    ]
    triaging = f'[agents.triage]\nmodel = "scripted:{triage}"\nhandoffs = ["assistant"]\n'
    config = gated_config(tmp_path, answers, agents=triaging)
    process, primary = chat_on_pty(config, "--agent", "triage", "--session", "s2")
    terminal = Terminal(primary)
    with process:
        try:
            terminal.until("> ")
            terminal.type("write one")
            terminal.until("allow it?")
            process.send_signal(signal.SIGINT)
            terminal.until("(interrupted: the answer was cancelled")
            terminal.until("> ", count=2)
            terminal.type("write two")
            terminal.until("allow it?", count=2)
            terminal.type("yes")
            terminal.until("> ", count=3)
            os.write(primary, b"\x04")  # Ctrl-D
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        out = process.stdout.read().decode()
    assert code == 0, terminal.shown
    assert out == "Written.\n"
    assert written.read_text() == "two\n"  # the call asked when Ctrl-C came never ran
    asked = f'triage -> assistant: the call write {{"path": "{written}", "line": "one"}}'
    assert f"{asked} needs approval\r\n" in terminal.shown
    assert "Traceback" not in terminal.shown


def test_piped_chat_refuses_a_gated_call_saying_what_would_ask_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped, nobody can be asked: the call is refused as before, but the model is no longer
    told to use a run store "not --no-store" (chat has neither): it is told what asks."""
    written = tmp_path / "written.txt"
    answers: list[dict[str, object]] = [
        {"tool_calls": [tool_call("write", written, "one", "w1")]},
        {"content": "Not written."},
    ]
    config = gated_config(tmp_path, answers)
    state = tmp_path / "state"
    monkeypatch.setattr(sys, "stdin", io.StringIO("write one\n"))
    chat = ["chat", "--config", str(config), "--session", "p1", "--state-dir", str(state)]
    assert main([*chat, "--trace"]) == 0
    out, err = capsys.readouterr()
    assert out == "Not written.\n"
    assert 'write        out={"approval":"refused","call":"tool 0 w1"}' in err
    assert not written.exists()
    assert main(["sessions", "show", "p1", "--state-dir", str(state), "--json"]) == 0
    turns = json.loads(capsys.readouterr().out)["turns"]
    told = [m["content"] for t in turns for m in t["messages"] if m["role"] == "tool"]
    assert told == [
        "Error: this tool call needs a person's approval, and this chat cannot ask for it: its "
        "input is not a terminal. Chat on a terminal to be asked about each call, or use "
        "`agent-gateway run` (it keeps the run in the run store, where the call waits for "
        "`agent-gateway runs approve` or `runs deny`)"
    ]


def test_run_without_a_store_refuses_a_gated_call_saying_what_would_wait_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`run --no-store` is told its commands' remedy; a program's run given no approver is
    told another (`NO_APPROVER_GIVEN`: no flags in Python)."""
    written = tmp_path / "written.txt"
    answers: list[dict[str, object]] = [
        {"tool_calls": [tool_call("write", written, "one", "w1")]},
        {"content": "Not written."},
    ]
    config = gated_config(tmp_path, answers)
    run = ["run", "write one", "--config", str(config), "--no-store", "--json"]
    assert main(run) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [step["observation"] for step in steps] == [f"Error: {NOBODY_TO_ASK}"]
    assert "--no-store" in NOBODY_TO_ASK
    assert not written.exists()


def test_call_of_an_agent_without_a_terminal_refuses_a_gated_call_saying_what_would_ask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    written = tmp_path / "written.txt"
    answers: list[dict[str, object]] = [
        {"tool_calls": [tool_call("write", written, "one", "w1")]},
        {"content": "Not written."},
    ]
    config = gated_config(tmp_path, answers)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    args = json.dumps({"prompt": "write one"})
    assert main(["call", "assistant", "--args", args, "--config", str(config), "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert [step["observation"] for step in steps] == [
        "Error: this tool call needs a person's approval, and `call` cannot ask for it without "
        "a terminal. Call assistant on a terminal to be asked about each call, or use "
        "`agent-gateway run --agent assistant` (it keeps the run in the run store, where the "
        "call waits for `agent-gateway runs approve` or `runs deny`)"
    ]
    assert not written.exists()


@pytest.mark.integration
def test_call_of_an_agent_on_a_terminal_asks_as_chat_does(tmp_path: Path) -> None:
    written = tmp_path / "written.txt"
    answers: list[dict[str, object]] = [
        {"tool_calls": [tool_call("write", written, "one", "w1")]},
        {"content": "Not written."},
    ]
    config = gated_config(tmp_path, answers)
    assert EXECUTABLE is not None
    primary, secondary = pty.openpty()
    args = json.dumps({"prompt": "write one"})
    with subprocess.Popen(
        [EXECUTABLE, "call", "assistant", "--args", args, "--config", str(config), "--json"],
        cwd=tmp_path,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "PYTHONPATH": str(REPO), "TERM": "dumb"},
    ) as process:
        terminal = Terminal(primary)
        try:
            os.close(secondary)
            terminal.until("allow it?")
            terminal.type("n not this one")
            code = process.wait(timeout=30)
        finally:
            process.kill()
            os.close(primary)
        assert process.stdout is not None
        shown = json.loads(process.stdout.read())
    assert code == 0, terminal.shown
    assert "assistant: the call write" in terminal.shown
    assert [step["observation"] for step in shown["steps"]] == [
        "The user rejected the tool call to write; it did not run. The user said: not this one"
    ]
    assert not written.exists()


def _request(tool: str, arguments: dict[str, object], *agents: str) -> ApprovalRequest:
    return ApprovalRequest.model_validate(
        {"call": "tool 0 c1", "tool": tool, "input": arguments, "agents": agents, "item": 0}
    )


def test_the_question_shows_the_call_on_one_line_its_control_characters_written_out() -> None:
    """A model's arguments and a server's tool name reach the terminal as text: an escape
    sequence (a window title), a bidi override and a newline are shown, never obeyed."""
    request = _request("fs\x1b]0;x\x07__write", {"text": "a\u202eb\x9bc", "n": 1}, "a", "b")
    shown = question(request, io.StringIO())
    assert shown == (
        'a -> b: the call fs\\x1b]0;x\\x07__write {"text": "a\\u202eb\\x9bc", "n": 1} '
        "needs approval"
    )
    long = question(_request("t", {"text": "x" * 1000}, "a"), io.StringIO())
    assert long.endswith(f"... ({len(json.dumps({'text': 'x' * 1000}))} characters) needs approval")
    assert len(long) < SHOWN_INPUT + 80


@pytest.mark.parametrize(
    ("typed", "decision"),
    [
        ("y", Decision(approved=True)),
        (" Yes \n", Decision(approved=True)),
        ("n", Decision(approved=False)),
        ("no, the other account", Decision(approved=False, message="the other account")),
        ("n   not today  ", Decision(approved=False, message="not today")),
        ("y only this once", Decision(approved=True, message="only this once")),
        ("yes, use the staging DB", Decision(approved=True, message="use the staging DB")),
        ("", None),
        ("sure", None),
    ],
)
def test_what_the_person_types_decides_the_call(typed: str, decision: Decision | None) -> None:
    assert answer(typed) == decision


def _event(
    phase: str, name: str, span: str, parent: str | None, kind: str = "tool", **output: JsonValue
) -> TraceEvent:
    return TraceEvent.model_validate(
        {"kind": kind if parent else "run", "phase": phase, "name": name, "id": span,
         "parent_id": parent, "run_id": "r1", "at_ms": 0, "output": output or None}
    )  # fmt: skip


@pytest.mark.anyio
async def test_nothing_is_written_into_a_question_on_the_terminal() -> None:
    """While the person is asked, the status is erased and what comes meanwhile (a trace
    line, a call starting and ending, a handoff's note) waits for the answer: nothing lands
    inside the question or the answer being typed. Also with no status to draw (`TERM=dumb`),
    where trace lines went straight to stderr."""
    for status in (True, False):
        screen = io.StringIO()
        err = Console(file=screen, force_terminal=True, width=100) if status else None
        async with open_console(None, err, asks=True) as console:
            trace = console.stream(screen)
            await console(_event("start", "a", "r1", None))
            await console(_event("start", "slow", "t1", "r1"))
            before = len(screen.getvalue())
            with console.asking() as asking:
                assert asking is (screen if status else sys.stderr)
                screen.write("allow it? ")
                trace.write("[  1 ms] tool fast\n")
                await console(_event("start", "fast", "t2", "r1"))
                await console(_event("end", "fast", "t2", "r1"))
                await console(_event("note", "a", "g1", "r1", "agent", handed_off_to="b"))
                asked = screen.getvalue()[before:]
                screen.write("y\n")
            trace.write("[  2 ms] after\n")
        assert ANSI.sub("", asked).endswith("allow it? "), asked
        assert "fast" not in asked
        if status:
            assert "slow" in screen.getvalue()[:before]  # the status was drawn, then erased
            lines = Screen().feed(screen.getvalue()).lines
            assert lines == [
                "allow it? y",
                "[  1 ms] tool fast",
                "a handed off to b",
                "[  2 ms] after",
            ]
