"""`chat` on a pseudo-terminal, with an agent whose `write` tool needs approval: for the tests
of what a person at a terminal types and is asked."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "EXECUTABLE",
    "REPO",
    "chat_on_pty",
    "gated_config",
    "on_pty",
    "session_messages",
    "tool_call",
]

EXECUTABLE = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
REPO = Path(__file__).resolve().parents[1]


def gated_config(tmp_path: Path, answers: list[dict[str, Any]], *, agents: str = "") -> Path:
    """A config whose agent `assistant` has `write` (gated), which appends a line to a file,
    and `wait` (not), which answers the line written to a named pipe; `agents` adds more."""
    script = tmp_path / "answers.json"
    script.write_text(json.dumps(answers))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.write]\npython = "tests.sample_tools:append_line"\n'
        '[tools.wait]\npython = "tests.sample_tools:released_by"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["write", "wait"]\n'
        'require_approval = ["write"]\n' + agents
    )
    return config


def tool_call(tool: str, path: Path, line: str, call_id: str) -> dict[str, object]:
    return {"name": tool, "arguments": {"path": str(path), "line": line}, "id": call_id}


def chat_on_pty(
    config: Path, *options: str, term: str = "dumb"
) -> tuple[subprocess.Popen[bytes], int]:
    """`chat` on a pty (stdin and stderr; stdout piped): the process and the terminal's fd."""
    process, primary, secondary = on_pty(config, "chat", *options, term=term)
    os.close(secondary)
    return process, primary


def on_pty(
    config: Path, command: str, *options: str, term: str
) -> tuple[subprocess.Popen[bytes], int, int]:
    """`agent-gateway COMMAND --config CONFIG OPTIONS` on a pty (stdin and stderr; stdout
    piped): the process, the terminal's fd and the program's side of it (its modes are the
    terminal's; the caller closes it)."""
    assert EXECUTABLE is not None
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [EXECUTABLE, command, "--config", str(config), *options],
        cwd=config.parent,
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "PYTHONPATH": str(REPO), "TERM": term},
    )
    return process, primary, secondary


def session_messages(config: Path, state: Path, session: str) -> list[dict[str, object]]:
    """The messages chat memory keeps of `session`."""
    assert EXECUTABLE is not None
    shown = subprocess.run(
        [EXECUTABLE, "sessions", "show", session, "--state-dir", str(state), "--json"],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [message for turn in json.loads(shown.stdout)["turns"] for message in turn["messages"]]
