"""What `chat` shows on a terminal of a question's run besides its answer: its tool calls,
the agent's warnings, and a turn's save that waits (a stalled Redis), interrupted or failed
with the command that looks in the chat's own store."""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import pytest
from redis import Redis

from gateway.cli import main
from gateway.cli.chat import _look as chat_look  # pyright: ignore[reportPrivateUsage]
from tests.chat_terminal import EXECUTABLE, REPO, chat_on_pty
from tests.screen import Terminal
from tests.servers.databases import redis_server
from tests.servers.openai_stub import OpenAIStub, openai_stub

pytestmark = pytest.mark.integration


def _config(model: OpenAIStub, directory: Path, *, memory: str | None = None) -> Path:
    config = directory / "agent-gateway.toml"
    gateway = f'[gateway]\nmemory = "{memory}"\n' if memory else ""
    config.write_text(
        f'{gateway}[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.assistant]\nmodel = "{model.spec}"\ntools = ["calculator"]\n'
    )
    return config


@contextmanager
def _stalled_redis() -> Generator[tuple[str, int]]:
    """A Redis of the test's own, and its process id (to stop it: a GC pause, a failover);
    going on again however the test ends."""
    with redis_server() as server:
        url = server.url
        with Redis.from_url(url) as admin:  # pyright: ignore[reportUnknownMemberType]
            pid = int(admin.info("server")["process_id"])  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType, reportIndexIssue]
        try:
            yield url, pid
        finally:
            os.kill(pid, signal.SIGCONT)


def test_tool_calls_leave_a_line_and_a_dumb_terminal_sees_them_start(tmp_path: Path) -> None:
    """A tool call's status line vanished as it ended, leaving no word of what ran and how
    it ended; on TERM=dumb nothing showed while a tool ran. The history left out to fit the
    context window showed only in `--trace`: now said once a chat."""
    answers = [
        {"name": "calculator", "arguments": {"expression": "6 * 7"}},
        {"name": "calculator", "arguments": {"expression": "1 +"}},
        "It is 42.",
        "Second.",
        "Third.",
    ]
    with openai_stub(answers, context_window=350) as model:
        config = _config(model, tmp_path)
        process, primary = chat_on_pty(config, "--state-dir", str(tmp_path / "state"))
        terminal = Terminal(primary)
        try:
            terminal.until("> ")
            for n, question in enumerate(["what is 6 * 7?", "again", "and again"], start=2):
                terminal.type(f"{question} {'x' * 400}")  # the window holds one turn
                terminal.until("> ", count=n)
            os.write(primary, b"\x04")  # Ctrl-D
            assert process.wait(timeout=20) == 0, terminal.shown
        finally:
            process.kill()
            os.close(primary)
            assert process.stdout is not None
            process.stdout.close()
    shown = terminal.shown.splitlines()
    calls = [line for line in shown if line.startswith("tool calculator ")]
    assert calls == [
        'tool calculator {"expression": "6 * 7"} running…',
        'tool calculator {"expression": "6 * 7"}: ok, 0.0 s',
        'tool calculator {"expression": "1 +"} running…',
        calls[3],
    ]
    assert calls[3].startswith('tool calculator {"expression": "1 +"}: failed, 0.0 s: ')
    warnings = [line for line in shown if line.startswith("warning: ")]
    assert len(warnings) == 1, terminal.shown  # the third turn left one out again: not said
    assert "did not fit the model's context window (350 tokens)" in warnings[0]
    assert "\x1b" not in terminal.shown


def test_ctrl_c_while_the_turn_is_saved_says_it_may_be_stored(tmp_path: Path) -> None:
    """Redis stalled as the answer's turn was saved: nothing on screen said the chat waited,
    and Ctrl-C said "the answer was cancelled" though Redis stores the turn once it wakes
    (the user asks again; the session holds the question twice). Now a status line says the
    turn is being saved, and Ctrl-C says it may have been saved or not, naming the command
    that looks in this chat's store."""
    with _stalled_redis() as (url, redis_pid), openai_stub(["Hello."], hold_at=1) as model:
        config = _config(model, tmp_path, memory=url)
        process, primary = chat_on_pty(config, "--session", "s1", term="xterm")
        terminal = Terminal(primary)
        try:
            terminal.until("> ")
            terminal.type("hi")
            assert model.holding.wait(timeout=30)  # the history was read: Redis stops now
            os.kill(redis_pid, signal.SIGSTOP)
            model.release()
            terminal.until("saving the turn to chat memory")
            process.send_signal(signal.SIGINT)
            terminal.until("Ctrl-D leaves)")
            os.kill(redis_pid, signal.SIGCONT)
            terminal.until("> ", count=2)
            os.write(primary, b"\x04")
            assert process.wait(timeout=20) == 0, terminal.shown
        finally:
            process.kill()
            os.close(primary)
            assert process.stdout is not None
            process.stdout.close()
    said = terminal.shown.split("(interrupted: ")[1].split("Ctrl-D leaves)")[0]
    look = f"agent-gateway sessions show s1 --config {shlex.quote(str(config))}"
    assert said == (
        "the answer was shown, its turn was being saved: it may have been saved or not: "
        f"`{look}` tells; Ctrl-C again or "
    ), terminal.shown


def test_a_save_that_may_have_happened_names_the_command_that_looks_in_the_chats_store(
    tmp_path: Path,
) -> None:
    """The error of a save Redis did not answer said "`sessions show X` tells", which looks
    in the default SQLite file, not in the store the chat used: "no session", though the
    turn is kept. It names the chat's --config now, and that command finds the turn."""
    assert EXECUTABLE is not None
    with _stalled_redis() as (url, redis_pid), openai_stub(["Hello."], hold_at=1) as model:
        config = _config(model, tmp_path, memory=f"{url}?socket_timeout=0.3")
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with subprocess.Popen(
            [EXECUTABLE, "chat", "--config", str(config), "--session", "s2"],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        ) as process:
            assert process.stdin is not None
            process.stdin.write(b"hi\n")
            process.stdin.flush()  # (communicate ends the input)
            assert model.holding.wait(timeout=30)
            os.kill(redis_pid, signal.SIGSTOP)
            model.release()
            out, err = process.communicate(timeout=60)
            os.kill(redis_pid, signal.SIGCONT)
        assert process.returncode == 1, err
        assert out == b"", err  # piped, an answer is written once its run returns it
        said = err.decode()
        look = f"agent-gateway sessions show s2 --config {shlex.quote(str(config))}"
        assert (
            f"may have been saved or not (the store may apply it once it answers): `{look}` tells"
            in said
        )
        [command] = [part for part in said.split("`") if part.startswith("agent-gateway sessions")]
        shown = subprocess.run(
            [EXECUTABLE, *shlex.split(command)[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=env,
        )
    assert shown.returncode == 0, shown.stderr  # Redis applied the save once it woke
    assert "user: hi\nassistant: Hello." in shown.stdout


@pytest.mark.parametrize("session", ["s1", "-dash"])
def test_the_sessions_show_a_chat_names_works_as_printed(
    tmp_path: Path,
    session: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command a chat gives to look at its session finds it: in the chat's store (its
    --state-dir, its agent's), and for an id that begins with `-` too (after `--`)."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[agents.a]\nmodel = "scripted:{script}"\n[agents.b]\nmodel = "scripted:{script}"\n'
    )
    state = tmp_path / "state"
    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\n"))
    chat = ["chat", f"--session={session}", "--state-dir", str(state), "--agent", "a"]
    assert main([*chat, "--config", str(config)]) == 0
    capsys.readouterr()
    given = argparse.Namespace(config=str(config), state_dir=state, store=None, agent="a")
    command = shlex.split(chat_look(given, session))
    assert command[:2] == ["agent-gateway", "sessions"]
    assert main(command[1:]) == 0
    assert capsys.readouterr().out == "--- turn 1\nuser: hi\nassistant: Hello.\n"
