"""Stdout carries a command's result alone: what a local tool writes to stdout (`print()`, file
descriptor 1, a program it starts, C's stdio) goes to stderr, said to be the tool's output."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import JsonValue

from gateway.cli import main
from gateway.cli.output import TOOL_OUTPUT, result_stdout, stdout_for_results
from gateway.cli.signals import stopping_shown
from gateway.console import open_console
from gateway.trace import Kind, Phase, TraceEvent
from tests.durable.cli_runs import SCRIPT, cli_env
from tests.test_console import ANSI, ANSWER, terminal, write_script
from tests.test_console import call as scripted_call

NOISY = '[tools.noisy]\npython = "tests.sample_tools:noisy"\n'
"""A tool that writes to stdout in every way it can (`tests.sample_tools.noisy`)."""
PRINTED = [
    f"{TOOL_OUTPUT}printed 3\n",  # print(): through sys.stdout, said to be the tool's
    "written to fd 1\n",  # the rest straight to fd 1: as written
    "a child printed\n",
    "C's puts said\n",
]


def noisy_agent(tmp_path: Path, *answers: object) -> Path:
    """A config with the noisy tool and an agent whose scripted model calls it, then answers."""
    script = write_script(
        tmp_path / "answers.json",
        [scripted_call("noisy", x=3).model_dump(exclude_none=True), *answers],
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'{NOISY}[agents.a]\nmodel = "scripted:{script}"\ntools = ["noisy"]\n')
    return config


def read_all(fd: int) -> str:
    """What a terminal's other side was sent, until it closed."""
    chunks: list[bytes] = []
    with contextlib.suppress(OSError):  # EIO: the other side is closed and drained
        while chunk := os.read(fd, 4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def said_all(err: str) -> bool:
    return all(line in err for line in PRINTED)


def test_the_json_of_call_and_run_is_alone_on_stdout(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = noisy_agent(tmp_path, {"content": "done"})
    base = ["--config", str(config)]
    assert main(["call", "noisy", "--args", '{"x": 3}', "--json", *base]) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["structuredContent"] == {"response": "quiet 3"}
    assert said_all(err), err
    for store in (["--no-store"], ["--state-dir", str(tmp_path / "state")]):
        assert main(["run", "go", "--json", *base, *store]) == 0
        out, err = capfd.readouterr()
        assert json.loads(out)["output"] == "done"
        assert said_all(err), err
        assert main(["run", "go", *base, *store]) == 0  # the answer, piped: just the answer
        out, err = capfd.readouterr()
        assert out == "done\n"
        assert said_all(err), err


def test_the_lines_of_run_items_are_alone_on_stdout_and_end_with_the_runs(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Item lines printed as items finish go to the results' stdout too, not to the stdout
    a tool's print reaches (stderr while a command runs); the run's line says its status."""
    items = tmp_path / "items.jsonl"
    items.write_text('"one"\n')
    for store, stored in ((["--no-store"], False), (["--state-dir", str(tmp_path / "s")], True)):
        config = noisy_agent(tmp_path, {"content": "done"})
        run = ["run", "--items", str(items), "--json", "--config", str(config), *store]
        assert main(run) == 0
        out, err = capfd.readouterr()
        item, ran = [json.loads(line) for line in out.splitlines()]
        assert item == {"index": 0, "output": "done", "error": None}
        assert ran["status"] == "succeeded"
        assert (ran["run_id"] is not None) == stored  # null: no run was stored
        assert said_all(err), err


def test_the_json_of_a_resumed_run_and_a_chats_answers_are_alone_on_stdout(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = noisy_agent(tmp_path)  # after the tool, nothing more to say: the run stops
    state = ["--state-dir", str(tmp_path / "state")]
    assert main(["run", "go", "--json", "--config", str(config), *state]) == 1
    out, err = capfd.readouterr()
    stopped = json.loads(out)
    assert "has 1 answers" in stopped["error"]
    assert said_all(err), err
    script = write_script(
        tmp_path / "then.json",
        [scripted_call("noisy", x=3).model_dump(exclude_none=True), {"content": "resumed"}],
    )
    resume = ["resume", stopped["run_id"], "--json", "--model", f"scripted:{script}", *state]
    assert main(resume) == 0
    out, err = capfd.readouterr()
    assert json.loads(out)["output"] == "resumed"
    assert said_all(err), err

    chatted = noisy_agent(tmp_path, {"content": "hello"})
    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\n"))
    assert main(["chat", "--config", str(chatted), *state]) == 0
    out, err = capfd.readouterr()
    assert out == "hello\n"
    assert said_all(err), err


@pytest.mark.integration
def test_the_installed_command_keeps_stdout_for_the_json_until_it_exits(tmp_path: Path) -> None:
    # A process of its own, its C stdio buffered (as without PYTHONUNBUFFERED): a buffer
    # flushed at exit would land after the JSON.
    config = noisy_agent(tmp_path, {"content": "done"})
    env = {name: value for name, value in cli_env().items() if name != "PYTHONUNBUFFERED"}
    for command in (["call", "noisy", "--args", '{"x": 3}'], ["run", "go", "--no-store"]):
        done = subprocess.run(
            [str(SCRIPT), *command, "--json", "--config", str(config)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=40,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        json.loads(done.stdout)  # one JSON document, and nothing else
        assert said_all(done.stderr), done.stderr


@pytest.mark.integration
def test_a_streamed_answer_still_reaches_the_terminal_and_the_tools_output_does_not(
    tmp_path: Path,
) -> None:
    config = noisy_agent(tmp_path, {"content": ANSWER})
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [str(SCRIPT), "run", "go", "--no-store", "--config", str(config)],
            cwd=tmp_path,
            stdout=secondary,
            stderr=subprocess.PIPE,
            text=True,
            timeout=40,
            check=False,
            env={**cli_env(), "TERM": "xterm-256color"},
        )
        os.close(secondary)
        shown = read_all(primary)
    finally:
        os.close(primary)
    assert done.returncode == 0, done.stderr
    assert ANSI.sub("", shown).replace("\r\n", "\n") == ANSWER + "\n"
    assert said_all(done.stderr), done.stderr


def test_what_is_printed_goes_to_stderr_by_whole_lines_and_the_result_to_stdout(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with stdout_for_results():
        print("half", end="")
        print(" a line\nand a last one without its end", end="")
        os.write(1, b"raw\n")
        print("the result", file=result_stdout())
        assert capfd.readouterr() == ("the result\n", f"{TOOL_OUTPUT}half a line\nraw\n")
    assert capfd.readouterr() == ("", f"{TOOL_OUTPUT}and a last one without its end\n")
    print("after")
    os.write(1, b"fd 1 after\n")
    assert capfd.readouterr().out == "after\nfd 1 after\n"  # as they were


@pytest.mark.anyio
async def test_a_line_printed_mid_answer_waits_for_the_answers_line_to_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    answer = io.StringIO()

    def event(
        phase: Phase, span: str, parent: str | None, kind: Kind, text: str = ""
    ) -> TraceEvent:
        output: JsonValue = {"text": text, "answer": True} if text else None
        return TraceEvent(
            kind=kind, phase=phase, name=kind, id=span, parent_id=parent, run_id="r", at_ms=0,
            output=output,
        )  # fmt: skip

    with stdout_for_results():
        async with stopping_shown(open_console(terminal(answer), None)) as console:
            spans: list[tuple[str, str | None, Kind]] = [
                ("r", None, "run"),
                ("a", "r", "agent"),
                ("m", "a", "model"),
            ]
            for span, parent, kind in spans:
                await console(event("start", span, parent, kind))
            await console(event("token", "t1", "m", "model", "Once upon"))
            print("NOISE")  # a tool of a sub-agent, say, prints while the answer's line is open
            assert capsys.readouterr().err == ""
            await console(event("token", "t2", "m", "model", " a time\n"))
            assert capsys.readouterr().err == f"{TOOL_OUTPUT}NOISE\n"
    assert ANSI.sub("", answer.getvalue()) == "Once upon a time\n"
