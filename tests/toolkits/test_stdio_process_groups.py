"""A stdio server's process group is ended whole whenever the server stops: what it started
(`npx` its node, a worker) does not outlive it, whether it was closed, crashed or exited by
itself (`toolkits/mcp/process_group.py`; real subprocesses, `tests/servers/parent_stdio.py`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.stdio import FORCE_KILL_TIMEOUT

from toolkits.errors import ConnectionLost
from toolkits.mcp import Backoff, McpServerConfig, McpToolkit
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PARENT_SERVER = str(Path(__file__).parents[1] / "servers" / "parent_stdio.py")
NO_RETRY = Backoff(initial=60, maximum=60)


def parent(pid_file: Path, mode: str = "", timeout: float = 60) -> McpServerConfig:
    args = [PARENT_SERVER, str(pid_file), *([mode] if mode else [])]
    return McpServerConfig(command=sys.executable, args=args, prefix="never", timeout=timeout)


async def started(pid_file: Path) -> tuple[int, int]:
    """The server's pid and its child's, as the server wrote them."""
    server, child = (await anyio.Path(pid_file).read_text()).split()
    return int(server), int(child)


def running(pid: int) -> bool:
    """Whether `pid` is alive: a zombie is dead (whoever its parent is may reap it late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] not in (b"Z", b"X")


async def ended(pid: int) -> None:
    """Return once `pid` has exited."""
    pidfd = os.pidfd_open(pid)
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


def ours_unreaped(pid: int) -> bool:
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return False


@pytest.mark.parametrize("mode", ["", "keep"], ids=["own-stdio", "child-keeps-stdout"])
async def test_a_server_exiting_at_its_stdins_end_leaves_no_child_when_the_node_closes(
    tmp_path: Path, mode: str
) -> None:
    with anyio.fail_after(30):
        async with McpToolkit("p", parent(tmp_path / "pids", mode), backoff=NO_RETRY) as node:
            assert result_text(await node.call_tool("hello", {})) == "hello"
            server, child = await started(tmp_path / "pids")
            assert running(child)
    assert not running(child)
    assert not running(server)
    assert not ours_unreaped(server)  # reaped once its group was ended


async def test_a_child_ignoring_sigterm_gets_sigkill_after_the_sdks_grace(tmp_path: Path) -> None:
    with anyio.fail_after(30):
        async with McpToolkit("p", parent(tmp_path / "pids", "stubborn"), backoff=NO_RETRY):
            _, child = await started(tmp_path / "pids")
            closing = anyio.current_time()
        took = anyio.current_time() - closing
    assert not running(child)
    assert FORCE_KILL_TIMEOUT <= took < FORCE_KILL_TIMEOUT + 3


async def test_a_server_crashing_mid_call_takes_its_child_along_and_the_call_fails_at_once(
    tmp_path: Path,
) -> None:
    # The child holds the server's stdout: until it goes, the connection looks open, and the
    # call would wait out its timeout (60 s) rather than say the server exited.
    config = parent(tmp_path / "pids", "keep", timeout=60)
    async with McpToolkit("p", config, backoff=NO_RETRY) as node:
        _, child = await started(tmp_path / "pids")
        with anyio.fail_after(10):
            with pytest.raises(ConnectionLost) as lost:
                await node.call_tool("crash", {})
            await ended(child)  # its stdout closed as it exits: it may not quite be gone
    assert str(lost.value) == (
        "MCP server 'p' went away: the connection closed during a call to 'crash'; "
        "it exited with status 3; reconnecting"
    )
