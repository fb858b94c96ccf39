"""No child process outlives the gateway, whatever signal ends it.

The gateway serves over stdio with one MCP server configured that is still starting (it never
reads its stdin or answers the handshake): the case where a server cannot notice on its own
that its gateway is gone. The server writes its pid to a FIFO the test reads, and the test
watches that process with a pidfd, so every wait is on an event.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.server.processes import REPO, SCRIPT

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

STARTING_SERVER = (
    "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
)


def config_with_a_starting_server(directory: Path, fifo: Path) -> Path:
    config = directory / "agent-gateway.json"
    server = {"command": sys.executable, "args": ["-c", STARTING_SERVER, str(fifo)]}
    config.write_text(json.dumps({"mcpServers": {"slow": server}}))
    return config


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGKILL])
async def test_a_starting_server_ends_with_the_gateway(
    tmp_path: Path, signum: signal.Signals
) -> None:
    fifo = tmp_path / "pid"
    os.mkfifo(fifo)
    config = config_with_a_starting_server(tmp_path, fifo)
    gateway = await anyio.open_process(
        [str(SCRIPT), "serve", "--stdio", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=REPO,
    )
    pid: int | None = None
    try:
        # Generous: two Python processes start on a machine that may be loaded.
        with anyio.fail_after(50):
            async with await anyio.open_file(fifo) as pid_file:
                pid = int(await pid_file.read())
            server = os.pidfd_open(pid)
            try:
                gateway.send_signal(signum)
                code = await gateway.wait()
                await anyio.wait_readable(server)  # readable once the server process ended
            finally:
                os.close(server)
        # As a shell reports it: killed outright, or unwound and exited with 128 + signum.
        assert code == (-signum if signum == signal.SIGKILL else 128 + signum)
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # an orphan this test found must not outlive it
        if gateway.returncode is None:
            gateway.kill()
            with anyio.CancelScope(shield=True):
                await gateway.wait()
