"""`serve --stdio` on what a client hands it: pipes read and written on the event loop, a file
in a worker thread; at the end of stdin every request read is still answered.

A client may write its requests and close stdin (a shell pipeline, a script); the spec has a
client close stdin to stop the server. Either way an answer the server still owes is written
before it stops, unless the client cancelled that request.

Told to stop by a signal (SIGTERM, SIGHUP, Ctrl-C's SIGINT), it stops as `serve --http` does:
it says so, refuses new calls saying why, gives the calls in flight the grace, and answers one
still running at its end (or at a second signal) with an error result that says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.server.processes import REPO, SCRIPT, Served, stop, untimed
from tests.servers.inprocess import ToyServer
from toolkits.mcp import McpServerConfig

from .stdio_fronts import stdio_front

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
HANGING_SERVER = """
import os, sys
import anyio
from mcp.server import MCPServer

server = MCPServer("hang")


@server.tool()
async def hang() -> str:
    \"\"\"Never answers; writes this process's pid to the FIFO `sys.argv[1]` first.\"\"\"
    with open(sys.argv[1], "w") as fifo:
        fifo.write(str(os.getpid()))
    await anyio.sleep_forever()
    return "never"


server.run()
"""


def _call(request_id: int, name: str, **arguments: object) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


STOPPING = "agent-gateway: stopping; calls in flight get 5 s to finish"
AGAIN = "Call again once the gateway is back."


def _list(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[tools.released]\npython = "tests.sample_tools:released_by"\n'
        '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
        '[tools.shout]\npython = "tests.sample_tools:shout"\n'
    )
    return config


def _text(answer: dict[str, Any]) -> str:
    return answer["result"]["content"][0]["text"]


@asynccontextmanager
async def _front(config: Path) -> AsyncGenerator[tuple[Served, BufferedByteReceiveStream]]:
    """`serve --stdio` on pipes, its stderr read into lines; stopped on exit."""
    command = [str(SCRIPT), "serve", "--stdio", "--config", str(config)]
    process = await anyio.open_process(command, cwd=REPO)
    served = Served(url="", process=process)
    assert process.stdout is not None

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(served.follow_stderr)
            yield served, BufferedByteReceiveStream(process.stdout)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


@asynccontextmanager
async def _serving_on(
    tmp_path: Path,
    stdin: int | IO[bytes],
    stdout: int | IO[bytes],
    *,
    config: Path | None = None,
) -> AsyncGenerator[Process]:
    """`serve --stdio` reading `stdin` and writing `stdout`; stopped on exit."""
    config = config or _config(tmp_path)
    command = [str(SCRIPT), "serve", "--stdio", "--config", str(config)]
    process = await anyio.open_process(
        command, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, cwd=REPO
    )
    try:
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


async def _reply(stdout: BufferedByteReceiveStream, request_id: int) -> dict[str, Any]:
    return (await _replies(stdout, request_id))[request_id]


async def _replies(
    stdout: BufferedByteReceiveStream, *request_ids: int
) -> dict[int, dict[str, Any]]:
    """The answers to `request_ids` by id, in whatever order they come: calls run at once, so
    a later one may be answered first (under load, the 3 MB one before the small one)."""
    found: dict[int, dict[str, Any]] = {}
    while len(found) < len(request_ids):
        message = json.loads(await stdout.receive_until(b"\n", 1 << 24))
        if message.get("id") in request_ids and "method" not in message:
            found[message["id"]] = message
    return found


async def test_a_call_in_flight_when_stdin_closes_is_answered(tmp_path: Path) -> None:
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    release = os.open(fifo, os.O_RDWR)  # never blocks, and the tool's open finds a writer
    try:
        async with _front(_config(tmp_path)) as (front, stdout):
            stdin = front.process.stdin
            assert stdin is not None
            with anyio.fail_after(30):
                call = _call(2, "released", fifo=str(fifo))
                await stdin.send(_lines(INITIALIZE, INITIALIZED, call))
                await front.line_starting("released_by: started")
                await stdin.aclose()
                os.write(release, b"released after stdin closed\n")
                answer = await _reply(stdout, 2)
                assert await front.process.wait() == 0
    finally:
        os.close(release)
    assert _text(answer) == "released after stdin closed"


@pytest.mark.parametrize(
    ("then", "why"),
    [
        ("closes stdin", "the client's model failed: the client closed its input."),
        (
            "answers nonsense",
            "the client's model sent an unreadable answer: content: Field required; model: "
            "Field required; role: Field required.",
        ),
    ],
)
async def test_a_call_on_the_clients_model_it_cannot_answer_ends_saying_why(
    tmp_path: Path, then: str, why: str
) -> None:
    """An agent on the client's model asked it (sampling). The client closed stdin: no answer
    can come, so the call ends at once saying so, and the gateway exits (it waited on the
    answer until a signal came). Or its answer is no sampling result: the call says what is
    missing in a line (it said it in pydantic's pages, links and all)."""
    config = tmp_path / "gateway.toml"
    config.write_text('[agents.sampler]\nmodel = "sampling"\n')
    client = {"name": "test", "version": "1"}
    params: dict[str, Any] = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"sampling": {}},
        "clientInfo": client,
    }
    sampling: dict[str, Any] = {**INITIALIZE, "params": params}
    async with _front(config) as (front, stdout):
        stdin = front.process.stdin
        assert stdin is not None
        with anyio.fail_after(30):
            call = _call(2, "sampler", prompt="hi")
            await stdin.send(_lines(sampling, INITIALIZED, call))
            while (asked := json.loads(await stdout.receive_until(b"\n", 1 << 20))).get(
                "method"
            ) != "sampling/createMessage":
                pass
            if then == "closes stdin":
                await stdin.aclose()
            else:
                await stdin.send(_lines({"jsonrpc": "2.0", "id": asked["id"], "result": {}}))
            answer = await _reply(stdout, 2)
            if then == "closes stdin":
                assert await front.process.wait() == 0
    assert answer["result"]["isError"] is True
    assert _text(answer).startswith(f"agent 'sampler' stopped: {why}")


async def test_an_answer_bigger_than_the_pipe_goes_out_whole(tmp_path: Path) -> None:
    """Written in parts, each once the client has read enough of the last."""
    async with _front(_config(tmp_path)) as (front, stdout):
        stdin = front.process.stdin
        assert stdin is not None
        with anyio.fail_after(30):
            await stdin.send(_lines(INITIALIZE, INITIALIZED, _call(2, "shout", text="ab" * 500)))
            await stdin.send(_lines(_call(3, "shout", text="cd" * 500, times=3000)))
            # Was: the answer to 2 awaited first, and one to 3 read meanwhile dropped.
            answers = await _replies(stdout, 2, 3)
    assert _text(answers[2]) == "AB" * 500
    assert _text(answers[3]) == " ".join(["CD" * 500] * 3000)  # 3 MB, twice in the message


async def test_a_call_the_client_cancelled_does_not_hold_the_end(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled.txt"
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "changed my mind"},
    }
    async with _front(_config(tmp_path)) as (front, _stdout):
        stdin = front.process.stdin
        assert stdin is not None
        with anyio.fail_after(30):
            await stdin.send(_lines(INITIALIZE, INITIALIZED, _call(2, "wait", marker=str(marker))))
            await front.line_starting("wait_until_cancelled: started")
            await stdin.send(_lines(cancel))
            await stdin.aclose()
            assert await front.process.wait() == 0
    assert marker.read_text() == "cancelled"


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=["term", "hup", "ctrl-c"]
)
async def test_a_signal_lets_the_call_in_flight_finish_and_refuses_new_ones(
    tmp_path: Path, signum: signal.Signals
) -> None:
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    release = os.open(fifo, os.O_RDWR)  # never blocks, and the tool's open finds a writer
    try:
        async with _front(_config(tmp_path)) as (front, stdout):
            stdin = front.process.stdin
            assert stdin is not None
            with anyio.fail_after(30):
                call = _call(2, "released", fifo=str(fifo))
                await stdin.send(_lines(INITIALIZE, INITIALIZED, call))
                await front.line_starting("released_by: started")
                front.process.send_signal(signum)
                await front.line_starting("agent-gateway: stopping")
                # While it drains: a new call is refused, anything else answered.
                await stdin.send(_lines(_call(3, "released", fifo=str(fifo)), _list(4)))
                during = await _replies(stdout, 3, 4)
                os.write(release, b"finished in the grace\n")
                answer = await _reply(stdout, 2)
                code = await front.process.wait()
            await front.stderr_closed.wait()
    finally:
        os.close(release)
    assert _text(answer) == "finished in the grace"
    assert not answer["result"]["isError"]
    refused = during[3]["result"]
    assert refused["isError"]
    assert _text(during[3]) == (
        "the call to 'released' was stopped: agent-gateway is shutting down and takes no new "
        f"calls. {AGAIN}"
    )
    assert "released" in [tool["name"] for tool in during[4]["result"]["tools"]]
    assert code == 128 + signum
    assert STOPPING in map(untimed, front.stderr)
    assert not [line for line in front.stderr if "Traceback" in line or "ERROR" in line]


@pytest.mark.parametrize("second", [None, signal.SIGINT], ids=["once", "then-ctrl-c"])
async def test_a_call_still_running_when_the_grace_ends_is_answered_saying_so(
    tmp_path: Path, second: signal.Signals | None
) -> None:
    marker = tmp_path / "cancelled.txt"
    async with _front(_config(tmp_path)) as (front, stdout):
        stdin = front.process.stdin
        assert stdin is not None
        with anyio.fail_after(30):
            await stdin.send(_lines(INITIALIZE, INITIALIZED, _call(2, "wait", marker=str(marker))))
            await front.line_starting("wait_until_cancelled: started")
            front.process.send_signal(signal.SIGTERM)
            await front.line_starting("agent-gateway: stopping")
            if second is not None:
                front.process.send_signal(second)  # no more waiting
            # Cut short, well within the grace (5 s).
            with anyio.fail_after(30 if second is None else 3):
                answer = await _reply(stdout, 2)
            code = await front.process.wait()
        await front.stderr_closed.wait()
    assert answer["result"]["isError"]
    assert _text(answer) == (
        "the call to 'wait' was stopped: agent-gateway is shutting down, and the call was still "
        f"running when its time to finish ran out. {AGAIN}"
    )
    assert marker.read_text() == "cancelled"
    assert code == 128 + signal.SIGTERM
    assert STOPPING in map(untimed, front.stderr)
    assert not [line for line in front.stderr if "Traceback" in line or "ERROR" in line]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_call_passed_through_still_running_when_the_grace_ends_is_answered_saying_so(
    tmp_path: Path, era: str
) -> None:
    """A proxied call goes past the SDK's server (`stdio_shortcut`): it too is answered at the
    grace's end, not cancelled without an answer."""
    fifo, script = tmp_path / "pid", tmp_path / "hang.py"
    os.mkfifo(fifo)
    script.write_text(HANGING_SERVER)
    config = tmp_path / "gateway.json"
    server = {"command": sys.executable, "args": [str(script), str(fifo)], "timeout": 600}
    config.write_text(json.dumps({"gateway": {"expose_tools": True}, "mcpServers": {"h": server}}))
    call = _call(2, "h__hang")
    opening: list[dict[str, Any]] = [INITIALIZE, INITIALIZED]
    if era == "modern":  # no handshake: each request says what it is
        envelope: dict[str, Any] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        call["params"]["_meta"] = envelope
        # The first request is the SDK's (it tells the era); the calls after it pass through.
        opening = [{**_list(1), "params": {"_meta": envelope}}]
    pid: int | None = None
    try:
        async with _front(config) as (front, stdout):
            stdin = front.process.stdin
            assert stdin is not None
            with anyio.fail_after(50):  # two Python processes start, on a loaded machine maybe
                await stdin.send(_lines(*opening, call))
                pid = await _pid_from(fifo)
                front.process.send_signal(signal.SIGTERM)
                answer = await _reply(stdout, 2)
                code = await front.process.wait()
            await front.stderr_closed.wait()
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # an orphan this test found must not outlive it
    assert answer["result"]["isError"]
    assert _text(answer) == (
        "the call to 'h__hang' was stopped: agent-gateway is shutting down, and the call was "
        f"still running when its time to finish ran out. {AGAIN}"
    )
    assert code == 128 + signal.SIGTERM
    assert not [line for line in front.stderr if "Traceback" in line or "ERROR" in line]


async def test_what_a_tool_prints_goes_to_stderr_never_into_the_protocol(tmp_path: Path) -> None:
    """Without PYTHONUNBUFFERED (as MCP clients launch us) `sys.stdout` and C's stdio buffer
    by blocks on a pipe: what a tool printed was written at exit, into the protocol."""
    config = tmp_path / "gateway.toml"
    config.write_text(
        '[gateway]\nexpose_tools = true\n[tools.noisy]\npython = "tests.sample_tools:noisy"\n'
    )
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    command = [str(SCRIPT), "serve", "--stdio", "--config", str(config)]
    with anyio.fail_after(30):
        done = await anyio.run_process(
            command,
            input=_lines(INITIALIZE, INITIALIZED, _call(2, "noisy", x=3)),
            env=env,
            cwd=REPO,
        )
    answers = [json.loads(line) for line in done.stdout.splitlines()]  # JSON, every line
    assert [answer["id"] for answer in answers] == [1, 2]
    assert _text(answers[1]) == "quiet 3"
    printed = ["printed 3", "written to fd 1", "a child printed", "C's puts said"]
    assert all(line in done.stderr.decode().splitlines() for line in printed), done.stderr


async def test_a_file_on_stdin_and_stdout_is_served_to_its_end(tmp_path: Path) -> None:
    """Files cannot be polled: read and written in a worker thread, every line answered."""
    requests, answers = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl"
    long_expression = "1 + " * 30_000 + "1"  # one line over several reads
    requests.write_bytes(
        _lines(INITIALIZE, INITIALIZED, _call(2, "calculator", expression=long_expression))
        + b"not json\n\n"
        + json.dumps(_call(3, "calculator", expression="6 * 7")).encode()  # no newline
    )
    with requests.open("rb") as stdin, answers.open("wb") as stdout, anyio.fail_after(30):
        async with _serving_on(tmp_path, stdin, stdout) as process:
            assert await process.wait() == 0
    by_id = {m.get("id"): m for m in map(json.loads, answers.read_text().splitlines())}
    assert set(by_id) == {1, 2, 3, None}
    assert "longer than 1000 characters" in _text(by_id[2])
    assert by_id[None]["error"]["code"] == -32700
    assert _text(by_id[3]) == "42"


async def test_the_pipes_handed_over_are_left_blocking(tmp_path: Path) -> None:
    """The gateway makes its ends of the pipes non-blocking, a flag their other holders share
    (a shell's terminal, a parent's copy): it puts the flag back before it exits."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        with anyio.fail_after(30):
            async with _serving_on(tmp_path, stdin_read, stdout_write) as process:
                # Many lines in one read, the last without a newline (less than a pipe holds).
                call = _call(2, "calculator", expression="6 * 7")
                os.write(stdin_write, _lines(INITIALIZE, INITIALIZED) + json.dumps(call).encode())
                os.close(stdin_write)
                stdin_write = -1
                assert await process.wait() == 0
        assert os.get_blocking(stdin_read)
        assert os.get_blocking(stdout_write)
        if hasattr(fcntl, "F_GETPIPE_SZ"):  # Linux: widened for big messages, and left so
            assert fcntl.fcntl(stdout_write, fcntl.F_GETPIPE_SZ) == 1 << 20
        os.close(stdout_write)
        stdout_write = -1
        with os.fdopen(stdout_read, "rb") as stdout:
            stdout_read = -1
            answers = [json.loads(line) for line in stdout.read().splitlines()]
        assert [answer["id"] for answer in answers] == [1, 2]
        assert _text(answers[1]) == "42"
    finally:
        for fd in (stdin_read, stdin_write, stdout_read, stdout_write):
            if fd >= 0:
                os.close(fd)


async def test_a_listen_stream_open_at_the_end_of_stdin_does_not_keep_the_server() -> None:
    """A 2026-07-28 client's `subscriptions/listen` is answered only when its stream ends: a
    client that closes stdin with one open (it exited) must not leave the gateway, and the
    servers it started, running."""
    toy = ToyServer()
    toy.add_echo("echo")
    envelope: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    listen: dict[str, Any] = {"_meta": envelope, "notifications": {"toolsListChanged": True}}
    with anyio.fail_after(20):
        async with stdio_front(McpServerConfig(command="in-process"), target=toy.server) as front:
            discover: dict[str, Any] = {"_meta": envelope}
            await front.send(
                {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": discover}
            )
            assert (await front.receive())["id"] == 1
            await front.send(
                {"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": listen}
            )
            acknowledged = await front.receive()
            assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
            rest = await front.end()  # returns once the gateway stopped: its stdout ended
    [ended] = rest  # the stream, ended as the server stops
    assert ended["id"] == 2
    assert "error" in ended


async def _pid_from(fifo: Path) -> int:
    """What the writer of `fifo` wrote, once it closed it (a wait that can be cancelled)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # no POLLHUP before a writer came
    try:
        data = b""
        while True:
            await anyio.wait_readable(fd)
            if not (chunk := os.read(fd, 64)):
                return int(data)
            data += chunk
    finally:
        os.close(fd)


@pytest.mark.parametrize("first", ["stdin", "stdout"])
async def test_a_client_gone_mid_call_stops_the_gateway_and_its_servers(
    tmp_path: Path, first: str
) -> None:
    """A client killed mid-call closes both pipes: no answer can reach it any more, so the
    gateway cancels the call and exits, its server with it, rather than wait for the call's
    timeout (10 minutes here)."""
    fifo, script = tmp_path / "pid", tmp_path / "hang.py"
    os.mkfifo(fifo)
    script.write_text(HANGING_SERVER)
    config = tmp_path / "gateway.json"
    server = {"command": sys.executable, "args": [str(script), str(fifo)], "timeout": 600}
    config.write_text(json.dumps({"gateway": {"expose_tools": True}, "mcpServers": {"h": server}}))
    # Pipes of our own: closing a process stream of anyio's leaves its pipe open.
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    ours = {"stdin": stdin_write, "stdout": stdout_read}
    pid: int | None = None
    try:
        async with _serving_on(tmp_path, stdin_read, stdout_write, config=config) as process:
            for fd in (stdin_read, stdout_write):  # the gateway's ends
                os.close(fd)
            stdin_read = stdout_write = -1
            with anyio.fail_after(50):  # two Python processes start, on a loaded machine maybe
                os.write(stdin_write, _lines(INITIALIZE, INITIALIZED, _call(2, "h__hang")))
                pid = await _pid_from(fifo)
            hung = os.pidfd_open(pid)
            try:
                for end in sorted(ours, key=lambda name: name != first):
                    os.close(ours.pop(end))
                with anyio.fail_after(5):
                    assert await process.wait() == 0
                    await anyio.wait_readable(hung)  # readable once the server process ended
            finally:
                os.close(hung)
    finally:
        for fd in (stdin_read, stdout_write, *ours.values()):
            if fd >= 0:
                os.close(fd)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # an orphan this test found must not outlive it
