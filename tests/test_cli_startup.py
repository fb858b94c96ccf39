"""The installed command started in a hostile way: stdin, stdout or stderr closed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gateway.config import TOOLBOX_SERVER
from tests.durable.cli_runs import REPO, SCRIPT, cli_env

TOOLBOX = TOOLBOX_SERVER.model_dump(exclude_defaults=True)
CLOSED = {0: "<&-", 1: ">&-", 2: "2>&-"}
"""How a shell starts a command with that file descriptor closed."""


def run_closed(fd: int, *args: str) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS` started with `fd` closed, as `agent-gateway ARGS >&-` does."""
    return subprocess.run(
        ["sh", "-c", f'exec "$0" "$@" {CLOSED[fd]}', str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(),
        timeout=60,
    )


@pytest.mark.integration
@pytest.mark.parametrize("fd", [0, 1, 2])
def test_a_closed_stdin_stdout_or_stderr_neither_aborts_a_command_nor_fails_its_servers(
    tmp_path: Path, fd: int
) -> None:
    """On uvloop, each aborted the command (`uv__close: Assertion 'fd > STDERR_FILENO'`, exit
    134), and the stdio servers failed to start: the next file opened took the closed number."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"mcpServers": {"toolbox": TOOLBOX}}))
    listed = run_closed(fd, "tools", "--config", str(config))
    assert listed.returncode == 0, listed.stderr  # 1: a server is down
    if fd != 1:
        assert "server toolbox: ready since" in listed.stdout
        assert "toolbox__convert_units" in listed.stdout
    arguments = json.dumps({"value": 2, "from_unit": "km", "to_unit": "m"})
    called = run_closed(
        fd, "call", "toolbox__convert_units", "--args", arguments, "--config", str(config)
    )
    assert called.returncode == 0, called.stderr
    if fd != 1:
        assert json.loads(called.stdout) == {"value": 2000.0, "unit": "m"}
    assert "Assertion" not in listed.stderr + called.stderr
