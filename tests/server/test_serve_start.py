"""`serve` answers while a slow MCP server is still starting (after `start_wait`), and the
server joins once ready: its tools appear and the client is told the list changed. A real
`agent-gateway serve --stdio` with two real stdio servers; the slow one waits on a FIFO the
test opens."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from .processes import REPO, SCRIPT, http_server, untimed, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PIPED = REPO / "tests" / "servers" / "piped.py"
LATE = (
    "import runpy, sys; open(sys.argv[1]).close(); "  # blocks until the test opens the FIFO
    "runpy.run_path(sys.argv[2], run_name='__main__')"
)


def _config(directory: Path, fifo: Path, *, quick: bool = True) -> Path:
    config = directory / "agent-gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\nstart_wait = 1\n"
        + (
            f'[mcpServers.quick]\ncommand = "{sys.executable}"\nargs = ["{PIPED}"]\n'
            'prefix = "always"\n'
        )
        * quick
        + f'[mcpServers.late]\ncommand = "{sys.executable}"\n'
        f'args = ["-c", "{LATE}", "{fifo}", "{PIPED}"]\nprefix = "always"\n'
    )
    return config


async def test_serving_nothing_yet_says_which_servers_are_still_starting(tmp_path: Path) -> None:
    fifo = tmp_path / "start"
    os.mkfifo(fifo)  # never opened: the server stays starting
    config = _config(tmp_path, fifo, quick=False)
    command = [str(SCRIPT), "serve", "--stdio", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with anyio.fail_after(30):  # the late server's connect_timeout is 60 s
        async with await anyio.open_process(command, env=env) as process:
            assert process.stderr is not None
            lines = BufferedByteReceiveStream(process.stderr)
            said = b""
            while b"agent-gateway: warning: serving nothing" not in said:
                said += await lines.receive_until(b"\n", 1 << 16) + b"\n"
            assert b"still starting: late" in said
            assert process.stdin is not None
            await process.stdin.aclose()  # the end of stdin: the gateway stops, its server too
            assert await process.wait() == 0


async def test_a_slow_server_does_not_hold_the_others_back(tmp_path: Path) -> None:
    fifo = tmp_path / "start"
    os.mkfifo(fifo)
    command = [str(SCRIPT), "serve", "--stdio", "--config", str(_config(tmp_path, fifo))]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = await anyio.open_process(command, env=env, stderr=subprocess.DEVNULL)
    assert process.stdin is not None
    assert process.stdout is not None
    lines = BufferedByteReceiveStream(process.stdout)

    async def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        await process.stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    changes = 0  # list_changed notifications read so far, wherever they came

    async def receive() -> dict[str, Any]:
        nonlocal changes
        message = json.loads(await lines.receive_until(b"\n", 1 << 20))
        changes += message.get("method") == "notifications/tools/list_changed"
        return message

    async def tool_names(request: int) -> set[str]:
        await send({"id": request, "method": "tools/list"})
        answer = await receive()
        while answer.get("id") != request:
            answer = await receive()
        return {tool["name"].split("__")[0] for tool in answer["result"]["tools"]}

    async def listed_once_changed(request: int, seen: int, expected: set[str]) -> set[str]:
        """The tools listed after a change told since `seen` changes (the notification may
        come before the answer to a listing the change was too late for), until `expected`."""
        names: set[str] = set()
        for attempt in range(request, request + 10):
            while changes <= seen:
                await receive()
            seen = changes
            names = await tool_names(attempt)
            if names == expected:
                break
        return names

    try:
        with anyio.fail_after(30):  # the late server's connect_timeout is 60 s
            client = {"name": "test", "version": "1"}
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
            await send({"id": 1, "method": "initialize", "params": params})
            assert (await receive())["id"] == 1
            await send({"method": "notifications/initialized"})
            quick = await tool_names(2)
            if not quick:  # a loaded host: quick too joined after `start_wait`, announced
                quick = await listed_once_changed(20, 0, {"quick"})
            assert quick == {"quick"}
            # Its tools are not known yet: a call names the server that is not ready.
            call = {"name": "late__echo", "arguments": {"message": "hi"}}
            await send({"id": 10, "method": "tools/call", "params": call})
            answer = await receive()
            while answer.get("id") != 10:
                answer = await receive()
            assert answer["result"]["isError"]
            said = answer["result"]["content"][0]["text"]
            assert said.startswith(
                "tool 'late__echo' is not offered now: its server is not ready (late: connecting"
            ), said

            seen = changes
            await anyio.to_thread.run_sync(lambda: fifo.open("w").close())  # late may start
            assert await listed_once_changed(30, seen, {"quick", "late"}) == {"quick", "late"}
    finally:
        await process.stdin.aclose()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


async def test_serve_agent_neither_starts_nor_waits_for_servers_the_agent_does_not_use(
    tmp_path: Path,
) -> None:
    """`serve --agent calc` serves `calc` alone: the server only `other` uses is not started,
    so `initialize` is answered at once, not after `start_wait` (10 minutes here)."""
    fifo = tmp_path / "start"
    os.mkfifo(fifo)  # its server, if started, would stay starting until the FIFO is opened
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        "[gateway]\nstart_wait = 600\n"
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[mcpServers.late]\ncommand = "{sys.executable}"\n'
        f'args = ["-c", "{LATE}", "{fifo}", "{PIPED}"]\nconnect_timeout = 600\n'
        '[agents.calc]\ntools = ["calculator"]\n'
        '[agents.other]\ntools = ["late"]\n'
    )
    command = [str(SCRIPT), "serve", "--stdio", "--agent", "calc", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = await anyio.open_process(command, env=env, stderr=subprocess.DEVNULL)
    assert process.stdin is not None
    assert process.stdout is not None
    lines = BufferedByteReceiveStream(process.stdout)

    async def ask(request: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert process.stdin is not None
        message = {"jsonrpc": "2.0", "id": request, "method": method, "params": params}
        await process.stdin.send(json.dumps(message).encode() + b"\n")
        answer = json.loads(await lines.receive_until(b"\n", 1 << 20))
        while answer.get("id") != request:
            answer = json.loads(await lines.receive_until(b"\n", 1 << 20))
        return answer["result"]

    try:
        with anyio.fail_after(30):
            client = {"name": "test", "version": "1"}
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
            await ask(1, "initialize", params)
            listed = await ask(2, "tools/list", {})
            assert [tool["name"] for tool in listed["tools"]] == ["calc"]
        # Nobody reads the FIFO: `late`'s process was never started (ENXIO, "no reader").
        with pytest.raises(OSError, match="No such device or address") as caught:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        assert caught.value.errno == errno.ENXIO
    finally:
        await process.stdin.aclose()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


async def test_a_port_in_use_is_said_before_any_server_starts(tmp_path: Path) -> None:
    """`serve --http` on a port another program listens on fails at once (exit 2), saying
    what to do, with none of its MCP servers started: not after they all had `start_wait`."""
    launched = tmp_path / "launched"
    marks = "import sys; open(sys.argv[1], 'w').close(); sys.stdin.read()"  # never answers
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\nstart_wait = 1\n"
        f'[mcpServers.slow]\ncommand = "{sys.executable}"\n'
        f'args = ["-c", "{marks}", "{launched}"]\n'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        command = [str(SCRIPT), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config)]
        with anyio.fail_after(30):
            done = await anyio.run_process(command, env=env, check=False)
    said = done.stderr.decode()
    assert done.returncode == 2, said
    assert f"error: cannot serve on 127.0.0.1:{port}: Address already in use: " in said
    assert "serve on another port (--http 127.0.0.1:0 takes a free one" in said
    assert not launched.exists()  # the server was never started


@pytest.mark.parametrize(
    ("named", "said"),
    [
        ([], "serving HTTP without bearer tokens (--token-env AGENT_GATEWAY_TOKENS or"),
        (["--token-env", "OTHER_TOKENS"], "the tokens are read from OTHER_TOKENS"),
        (["--token-env", "AGENT_GATEWAY_TOKENS"], None),
    ],
)
async def test_tokens_in_the_usual_variable_but_not_named_are_warned_of(
    tmp_path: Path, named: list[str], said: str | None
) -> None:
    """`AGENT_GATEWAY_TOKENS` exported, but neither `--token-env` nor `tokens_env` naming it:
    on loopback the gateway served without tokens and said nothing (a wrong one got in)."""
    config = write_config(tmp_path, [{"content": "hi"}])
    env = {"AGENT_GATEWAY_TOKENS": "t" * 32, "OTHER_TOKENS": "o" * 32}
    async with http_server(config, *named, env=env) as served:
        warned = [
            untimed(line)
            for line in served.stderr
            if "AGENT_GATEWAY_TOKENS is set but not used" in line
        ]
    if said is None:
        assert warned == []
    else:
        assert len(warned) == 1, served.stderr
        assert warned[0].startswith(
            f"agent-gateway: warning: AGENT_GATEWAY_TOKENS is set but not used: {said}"
        )
