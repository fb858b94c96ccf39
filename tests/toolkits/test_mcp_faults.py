"""Real servers misbehaving: killed mid-call, hung, never starting. The node copes and says so."""

from __future__ import annotations

import logging
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import ErrorData, InputRequest

from tests.servers.real import everything_stdio, killable_everything_stdio, read_pid, time_stdio
from toolkits import CallContext
from toolkits.errors import (
    AuthorizationRequired,
    ConnectionLost,
    NodeStopped,
    NotOffered,
    ToolkitError,
    ToolTimeout,
)
from toolkits.mcp import Backoff, McpServerConfig, McpToolkit, McpToolkitGroup
from toolkits.mcp.answer_ids import AskedIds
from toolkits.mcp.reconnects import Reconnects
from toolkits.mcp.stderr_tail import StderrTail
from toolkits.mcp.transport import _pump_stderr  # pyright: ignore[reportPrivateUsage]
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

LOGGED_SERVER = Path(__file__).parents[1] / "servers" / "logged_stdio.py"
LONG_RUN = "everything__trigger-long-running-operation"


async def test_a_server_killed_mid_call_fails_the_call_and_the_next_call_works(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    first_progress = anyio.Event()

    async def on_progress(_progress: float, _total: float | None, _message: str | None) -> None:
        first_progress.set()

    async def kill_at_first_progress() -> None:
        await first_progress.wait()
        os.kill(await read_pid(pid_file), signal.SIGKILL)

    async with McpToolkit("everything", killable_everything_stdio(pid_file)) as node:
        first_pid = await read_pid(pid_file)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(kill_at_first_progress)
                with pytest.raises(
                    ConnectionLost, match=r"'everything' went away: .*; it was killed by SIGKILL;"
                ):
                    await node.call_tool(
                        LONG_RUN,
                        {"duration": 20, "steps": 20},
                        context=CallContext(on_progress=on_progress),
                    )
            echo = await node.call_tool("everything__echo", {"message": "back"})
        assert result_text(echo) == "Echo: back"
        assert await read_pid(pid_file) != first_pid
        assert node.health.state == "ready"


async def test_a_hung_server_times_out_and_the_node_stays_usable(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # A call times out after 1 s; starting may take longer on a loaded machine.
    config = killable_everything_stdio(pid_file, timeout=1, connect_timeout=30)
    async with McpToolkit("everything", config) as node:
        pid = await read_pid(pid_file)
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(ToolTimeout, match=r"no result or progress for 1 s"):
                await node.call_tool("everything__echo", {"message": "anyone?"})
        finally:
            os.kill(pid, signal.SIGCONT)
        assert node.health.state == "ready"
        echo = await node.call_tool("everything__echo", {"message": "awake"})
        assert result_text(echo) == "Echo: awake"


async def test_a_silent_tool_times_out_and_the_session_survives() -> None:
    async with McpToolkit("everything", everything_stdio(timeout=1, connect_timeout=30)) as node:
        # One step over 30 s: no progress before the 1 s timeout.
        with pytest.raises(ToolTimeout, match=LONG_RUN):
            await node.call_tool(LONG_RUN, {"duration": 30, "steps": 1})
        echo = await node.call_tool("everything__echo", {"message": "still here"})
        assert result_text(echo) == "Echo: still here"


async def test_servers_that_never_start_leave_the_others_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp")
    exits = "import sys; print('boom: bad config', file=sys.stderr); sys.exit(3)"
    configs = {
        "missing": McpServerConfig(command="/nonexistent/mcp-server"),
        "exits": McpServerConfig(command=sys.executable, args=["-c", exits]),
        # Reads the handshake and never answers; exits when its stdin closes.
        "silent": McpServerConfig(command="bash", args=["-c", "cat > /dev/null"], timeout=1),
        "time": time_stdio(),
    }
    with anyio.fail_after(30):
        async with McpToolkitGroup(configs, backoff=Backoff(initial=60)) as group:
            assert group["time"].health.state == "ready"
            result = await group["time"].call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not result.is_error

            health = group.health
            assert all(health[name].state == "failed" for name in ("missing", "exits", "silent"))
            assert health["missing"].last_error == (
                "FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/mcp-server'"
            )
            assert health["exits"].last_error is not None
            assert health["exits"].last_error.endswith("(stderr: boom: bad config)")
            assert (
                health["silent"].last_error == "TimeoutError: no handshake and tool list within 1 s"
            )
            report = group.health_report().splitlines()
            assert report[0].startswith("missing: failed since ")
            assert report[0].endswith("No such file or directory: '/nonexistent/mcp-server'")
            assert report[3].startswith("time: ready since ")
    assert "stderr: boom: bad config" in caplog.messages


async def test_a_carriage_return_progress_bar_on_stderr_costs_only_its_lines_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A bar drawn with `\\r` and no newline (tqdm, npm) and a line of megabytes are cut to
    their first 2,000 characters as they come. Both were buffered whole, and copied again on
    every read (a 40 MB line took 31 s to connect)."""
    caplog.set_level(logging.INFO, logger="toolkits.mcp")
    bar = "\\r[%-50s] %3d%% downloading shard %d" + " " * 20
    script = (
        "import runpy, sys\n"
        "w = sys.stderr.write\n"
        f"for i in range(400_000): w({bar!r} % ('#' * (i % 50), i % 100, i))\n"
        "w('\\rdone: 100%\\n' + 'y' * 100_000 + '\\nready\\n')\n"
        "sys.stderr.flush()\n"
        f"runpy.run_path({str(LOGGED_SERVER)!r}, run_name='__main__')\n"
    )
    # 40 MB of bar: read in linear time it is connected in a few seconds (it took 31).
    config = McpServerConfig(command=sys.executable, args=["-c", script], timeout=12)
    with anyio.fail_after(30):
        async with McpToolkit("bar", config) as node:
            assert node.health.state == "ready", node.health.last_error
            assert {t.name for t in await node.list_tools()} == {"bar__logged"}
    said = [m.removeprefix("stderr: ") for m in caplog.messages if m.startswith("stderr: ")]
    assert said[0].startswith(r"\r[" + " " * 50 + "]   0% downloading shard 0")
    assert "done: 100%" not in said[0]  # past its first 2,000 characters
    assert said[1:3] == ["y" * 2000, "ready"]


async def _cpu_reading(lines: list[bytes], read: Callable[[int], Awaitable[None]]) -> float:
    """This thread's CPU seconds for `read(fd)` to read `lines`, written by a child to a pipe."""
    script = "import sys\nsys.stderr.buffer.writelines(eval(sys.stdin.read()))\n"
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    writer = await anyio.open_process(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=None, stderr=write_fd
    )
    os.close(write_fd)
    async with writer:
        assert writer.stdin is not None
        await writer.stdin.send(repr(lines).encode())
        await writer.stdin.aclose()
        began = time.thread_time()
        await read(read_fd)
        took = time.thread_time() - began
    return took


async def test_a_server_flooding_stderr_is_read_keeping_its_tail_logging_nothing_below_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server writing 1.2 KB lines on stderr as fast as it could kept the gateway at 65-80 %
    of a core, logging nothing (INFO off): each line was made printable for a log line not
    written, and matched against a case-blind regex. (Its cost is measured, not asserted here:
    ~5 times a bare read-and-split loop's CPU, from ~50.) Its tail, quoted when it fails, is
    still kept, and nothing is logged."""
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    log = logging.getLogger("toolkits.mcp.flood")
    lines = [b"noise " * 200 + b"%d\n" % i for i in range(20_000)]
    lines[10_000] = b"Error: the disk is full\n"
    tail = StderrTail()
    with anyio.fail_after(60):
        await _cpu_reading(lines, lambda fd: _pump_stderr(fd, log, tail))
    assert str(tail).startswith("Error: the disk is full | ... | noise noise")
    assert str(tail).endswith(" 19999")
    assert not caplog.records


async def test_a_server_that_exits_at_once_is_said_to_have_exited_with_its_status() -> None:
    # As a server does that finds its API key missing: it exits before the handshake, having
    # said so on stderr, or having said nothing at all.
    said = "import sys; print('fatal: set API_TOKEN', file=sys.stderr); sys.exit(3)"
    configs = {
        "said": McpServerConfig(command=sys.executable, args=["-c", said]),
        "silent": McpServerConfig(command=sys.executable, args=["-c", "pass"]),
    }
    with anyio.fail_after(30):
        async with McpToolkitGroup(configs, backoff=Backoff(initial=60)) as group:
            health = group.health
    assert health["said"].last_error == (
        "the server closed the connection; it exited with status 3 (stderr: fatal: set API_TOKEN)"
    )
    assert health["silent"].last_error == (
        "the server closed the connection; it exited with status 0"
    )


NPM_NOTICE = [
    "npm notice",
    "npm notice New minor version of npm available! 10.8.2 -> 10.9.3",
    "npm notice Changelog: https://github.com/npm/cli/releases/tag/v10.9.3",
    "npm notice To update run: npm install -g npm@10.9.3",
    "npm notice",
]


async def test_a_failed_start_quotes_the_error_not_npms_notices() -> None:
    # As `npx -y @modelcontextprotocol/server-filesystem /srv/notes` fails: its error and the
    # stack under it, then npm's five-line notice as npx exits.
    said = [
        "Warning: Cannot access directory /srv/notes, skipping",
        "Error: None of the specified directories are accessible",
        *(f"    at frame{n} (index.js:{n}:1)" for n in range(6)),
        *NPM_NOTICE,
        "npm warn exec The following package was not found and will be installed",
    ]
    script = f"import sys; sys.stderr.write({chr(10).join(said) + chr(10)!r}); sys.exit(1)"
    config = McpServerConfig(command=sys.executable, args=["-c", script])
    async with McpToolkit("fs", config, backoff=Backoff(initial=60)) as node:
        assert node.health.last_error is not None
        quoted = node.health.last_error.partition(" (stderr: ")[2].removesuffix(")")
    assert quoted.split(" | ") == [
        "Error: None of the specified directories are accessible",
        "...",
        *(f"    at frame{n} (index.js:{n}:1)" for n in range(1, 6)),
    ]


async def test_a_relative_working_directory_that_is_missing_says_relative_to_what(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = McpServerConfig(command=sys.executable, cwd="srv")
    async with McpToolkit("rel", config, backoff=Backoff(initial=60)) as node:
        assert node.health.last_error == (
            f"FileNotFoundError: the server's working directory 'srv' (relative to this "
            f"process's, {tmp_path}) does not exist"
        )


@pytest.mark.parametrize(
    "error",
    [
        NodeStopped("stopped", node="a"),
        ConnectionLost("lost", node="b"),
        AuthorizationRequired("c"),
        NotOffered("no", node="d"),
    ],
)
def test_a_node_error_survives_pickling_as_a_run_store_records_it(error: ToolkitError) -> None:
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.node) == (type(error), str(error), error.node)  # type: ignore[attr-defined]


STRAY_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    for n in range(4):  # a server printing its own log on stdout
        print(f"DEBUG {n}: not JSON-RPC", flush=True)
    print('{"not": "a JSON-RPC message"}', flush=True)
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "stray", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "ok", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [{"type": "text", "text": "fine"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


async def test_stray_stdout_lines_are_said_briefly_and_the_calls_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "stray.py"
    script.write_text(STRAY_SERVER)
    config = McpServerConfig(command=sys.executable, args=[str(script)], prefix="never")
    with caplog.at_level(logging.DEBUG, logger="toolkits.mcp"):
        async with McpToolkit("stray", config) as node:
            with anyio.fail_after(30):
                result = await node.call_tool("ok", {})
    assert result_text(result) == "fine"
    said = [r for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    warned = [r.getMessage() for r in said if r.levelno == logging.WARNING]
    assert warned[0] == (
        "the server wrote a line on stdout that is not JSON-RPC, ignored (servers log to "
        "stderr): 'DEBUG 0: not JSON-RPC'"
    )
    assert len(warned) == 5
    assert warned[-1].endswith("further such lines are logged at DEBUG")
    assert len(said) > 5  # the rest at DEBUG
    assert all(r.exc_info is None for r in caplog.records)  # no traceback for a stray line
    assert "transport error" not in caplog.text


LONG_LINES_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        for _ in range(2):  # two lines of 1.5 MB, written in pieces
            for _ in range(1500):
                sys.stdout.write("x" * 1000)
            print(flush=True)
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "long", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "ok", "inputSchema": {"type": "object"}}]}
    else:
        result = {"content": [{"type": "text", "text": "fine"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


async def test_a_stdout_line_over_max_message_bytes_is_dropped_unread_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line on stdout was kept whole however long (300 MB: 1.28 GB of memory); now one
    longer than the server's `max_message_bytes` is dropped as it comes, as over HTTP."""
    script = tmp_path / "long.py"
    script.write_text(LONG_LINES_SERVER)
    config = McpServerConfig(
        command=sys.executable, args=[str(script)], prefix="never", max_message_bytes=1 << 20
    )
    with caplog.at_level(logging.INFO, logger="toolkits.mcp"):
        async with McpToolkit("long", config) as node:
            with anyio.fail_after(30):
                result = await node.call_tool("ok", {})
    assert result_text(result) == "fine"  # the lines after them are read as before
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        warned
        == [
            "the server wrote a line on stdout of 1500000 bytes, longer than its "
            "max_message_bytes (1048576 bytes): dropped unread (no answer it names: a call it "
            "answers fails by its timeout)"
        ]
        * 2
    )


LONG_ANSWERS_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, key = message["method"], message["id"]
    result = {"content": [{"type": "text", "text": "fine"}]}
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "long", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": name, "inputSchema": {"type": "object"}}
                            for name in ("first", "last", "ok")]}
    elif message["params"]["name"] != "ok":
        text = {"content": [{"type": "text", "text": "x" * 1500000}]}
        # The Python SDK's order (id first), and the TypeScript SDK's (id last).
        answer = ({"jsonrpc": "2.0", "id": key, "result": text}
                  if message["params"]["name"] == "first"
                  else {"result": text, "jsonrpc": "2.0", "id": key})
        print(json.dumps(answer), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": key, "result": result}), flush=True)
"""


async def _no_progress(_progress: float, _total: float | None, _message: str | None) -> None:
    pass


async def _no_log(_params: dict[str, Any]) -> None:
    pass


async def _nobody(_request: InputRequest) -> ErrorData:
    raise AssertionError("the server asks nothing")


async def test_an_answer_line_over_max_message_bytes_fails_its_call_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The dropped line was the call's answer: the call failed only by its timeout (here
    60 s). It fails at once, naming the server, the size and the setting, on the SDK
    session's path and on the pipe's (a call passed through), and the connection reads on."""
    script = tmp_path / "long.py"
    script.write_text(LONG_ANSWERS_SERVER)
    config = McpServerConfig(
        command=sys.executable,
        args=[str(script)],
        prefix="never",
        max_message_bytes=1 << 20,
        timeout=60,
    )
    with caplog.at_level(logging.INFO, logger="toolkits.mcp"):
        async with McpToolkit("long", config) as node:
            with anyio.fail_after(15):
                first = await node.call_tool("first", {})
                last = await node.call_tool("last", {})
                forward = node.forward("last")
                assert forward is not None
                passed = await forward.call(
                    {}, meta={}, on_progress=_no_progress, on_log=_no_log, answer=_nobody
                )
                ok = await node.call_tool("ok", {})
    said = (
        "MCP server 'long' sent an answer larger than the 1048576 byte limit (15000XX bytes): "
        "raise mcpServers.long.max_message_bytes to take it"
    )
    for result in (first, last):
        assert result.is_error
        text = result_text(result)
        assert text == said.replace("15000XX", str(_answer_size(text)))
    assert passed is not None
    assert passed["isError"] is True
    assert passed["content"][0]["text"].startswith(
        "MCP server 'long' sent an answer larger than the 1048576 byte limit ("
    )
    assert result_text(ok) == "fine"  # the connection reads on
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 3
    assert all(line.endswith("dropped unread (the call it answers fails)") for line in warned)


def _answer_size(text: str) -> int:
    """The size the message says, checked to be the line's: 1.5 MB and the JSON-RPC around it
    (its id's digits grow with the requests made before)."""
    size = int(text.split("limit (")[1].split(" bytes)")[0])
    assert 1_500_000 < size < 1_500_200
    return size


MALFORMED_SERVER = """
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "malformed", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "bad", "inputSchema": {"type": "object"}}]}
    else:
        result = {"isError": False}  # no content
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
async def test_a_malformed_result_is_said_in_one_line_on_either_path(
    tmp_path: Path, raw: bool
) -> None:
    script = tmp_path / "malformed.py"
    script.write_text(MALFORMED_SERVER)
    config = McpServerConfig(command=sys.executable, args=[str(script)], prefix="never")
    async with McpToolkit("m", config) as node:
        node.raw_calls = raw
        with anyio.fail_after(30):
            result = await node.call_tool("bad", {})
    assert result.is_error
    assert result_text(result) == (
        "MCP server 'm' sent a malformed result: content: Field required"
    )


BAD_UTF8_SERVER = MALFORMED_SERVER.replace(
    """        result = {"isError": False}  # no content
    print(""",
    """        answer = '{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", '
        answer %= json.dumps(message["id"])
        sys.stdout.buffer.write(answer.encode() + b'"text": "bad \\xff\\xfe bytes"}]}}\\n')
        sys.stdout.flush()
        continue
    print(""",
)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
async def test_an_answer_that_is_not_utf8_is_read_with_replacement_characters_on_either_path(
    tmp_path: Path, raw: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """It was dropped as "not JSON-RPC", and the call waited out its timeout."""
    script = tmp_path / "latin.py"
    script.write_text(BAD_UTF8_SERVER)
    config = McpServerConfig(command=sys.executable, args=[str(script)], prefix="never", timeout=60)
    async with McpToolkit("latin", config) as node:
        node.raw_calls = raw
        with anyio.fail_after(30):
            result = await node.call_tool("bad", {})
    assert result_text(result) == "bad \ufffd\ufffd bytes"
    assert not result.is_error
    assert "not JSON-RPC" not in caplog.text


WRONG_ID_SERVER = MALFORMED_SERVER.replace(
    """        result = {"isError": False}  # no content
""",
    """        message["id"] = "nope-%s" % message["id"]
        result = {"content": [{"type": "text", "text": "lost"}]}
""",
)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
async def test_an_answer_with_an_id_no_request_has_is_warned_of_naming_the_id(
    tmp_path: Path, raw: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """It was dropped without a word, even at DEBUG on our loggers: the call timed out."""
    script = tmp_path / "wrong_id.py"
    script.write_text(WRONG_ID_SERVER)
    config = McpServerConfig(command=sys.executable, args=[str(script)], prefix="never", timeout=1)
    caplog.set_level(logging.INFO, logger="toolkits.mcp")
    async with McpToolkit("wrong", config) as node:
        node.raw_calls = raw
        with anyio.fail_after(30), pytest.raises(ToolTimeout):
            await node.call_tool("bad", {})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1
    assert re.fullmatch(
        r"the server answered with id 'nope-[^']+', which no request has: dropped \(a call it "
        r"was meant to answer waits for its timeout\)",
        warned[0],
    )


EXITING_SERVER = MALFORMED_SERVER.replace(
    'result = {"isError": False}  # no content', "sys.exit(3)"
)


@pytest.mark.parametrize("raw", [True, False], ids=["raw", "sdk"])
async def test_a_server_that_exits_mid_call_is_said_with_its_exit_status(
    tmp_path: Path, raw: bool
) -> None:
    script = tmp_path / "exiting.py"
    script.write_text(EXITING_SERVER)
    config = McpServerConfig(command=sys.executable, args=[str(script)], prefix="never")
    async with McpToolkit("x", config, backoff=Backoff(initial=60, maximum=60)) as node:
        node.raw_calls = raw
        with anyio.fail_after(30), pytest.raises(ConnectionLost) as lost:
            await node.call_tool("bad", {})
    assert str(lost.value) == (
        "MCP server 'x' went away: the connection closed during a call to 'bad'; "
        "it exited with status 3; reconnecting"
    )


# Writes its pid to the file named first; SIGTERM makes it exit with status 3.
DYING_SERVER = (
    "import os, pathlib, signal, sys\n"
    "pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))\n"
    "signal.signal(signal.SIGTERM, lambda *_: os._exit(3))\n"
) + MALFORMED_SERVER


@pytest.mark.parametrize(
    ("signum", "ended"),
    [(signal.SIGKILL, "it was killed by SIGKILL"), (signal.SIGTERM, "it exited with status 3")],
    ids=["killed", "exited"],
)
async def test_a_server_that_dies_with_no_call_in_flight_is_said_with_how_it_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, signum: signal.Signals, ended: str
) -> None:
    """Idle, its end was said as "the server closed the connection" alone, which reads as a
    clean close: a crash loop in the log looked like none, where a call in flight said how."""
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    script, pid_file = tmp_path / "dying.py", tmp_path / "pid"
    script.write_text(DYING_SERVER)
    args = [str(script), str(pid_file)]
    config = McpServerConfig(command=sys.executable, args=args, prefix="never")
    async with McpToolkit("x", config, backoff=Backoff(initial=60, maximum=60)) as node:
        with anyio.fail_after(30):
            os.kill(await read_pid(pid_file), signum)
            await node.wait_for_health(lambda health: health.last_error is not None)
        last_error = node.health.last_error
    said = f"the server closed the connection; {ended}"
    assert last_error == said
    lost = [r.getMessage() for r in caplog.records if "connection lost" in r.getMessage()]
    assert lost == [f"connection lost: {said}"]


async def test_a_server_failing_the_same_way_at_every_attempt_is_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A dead server left in a config is retried for as long as the gateway runs: one warning
    # says so, the attempts after it are INFO (a log a day holds thousands of them).
    caplog.set_level(logging.INFO, logger="toolkits.mcp")
    config = McpServerConfig(command=sys.executable, args=["-c", "raise SystemExit(3)"])
    fast = Backoff(initial=0.01, maximum=0.01)
    async with McpToolkit("dead", config, backoff=fast) as node:
        with anyio.fail_after(30):
            await node.wait_for_health(lambda health: health.failures >= 4)
    attempts = [r for r in caplog.records if "could not connect" in r.getMessage()]
    assert len(attempts) >= 4
    assert [r.levelno for r in attempts[:4]] == [logging.WARNING] + [logging.INFO] * 3
    assert attempts[0].getMessage().startswith("could not connect (attempt 1): ")


async def test_attempts_told_apart_only_by_what_was_known_of_the_exit_are_one_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server's exit status is told once its process is reaped, which a loaded machine may
    take longer for than an attempt waits: the same failure, with or without it (or another
    stderr tail), is not warned of again (the test above failed so under the full suite)."""
    log = logging.getLogger("toolkits.mcp.same")
    caplog.set_level(logging.INFO, logger=log.name)
    retries = Reconnects(Backoff(initial=0.01, maximum=0.01), log, early=False)
    closed = "the server closed the connection"
    for told in ("; it exited with status 3", "", " (stderr: boom)"):
        retries.attempt_failed(closed + told, needs_login=False, took=0.0, cause=closed)
    retries.attempt_failed("another failure", needs_login=False, took=0.0, cause=None)
    assert [r.levelno for r in caplog.records] == [logging.WARNING] + [logging.INFO] * 2 + [
        logging.WARNING
    ]


# Answers with its pid; at its second call it closes its stdout and lives on, reading stdin.
STDOUT_CLOSING_SERVER = MALFORMED_SERVER.replace(
    'result = {"isError": False}  # no content',
    """calls = globals().get("calls", 0) + 1
        if calls == 2:
            os.close(1)
            continue
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}""",
).replace("import json, sys", "import json, os, sys")


@pytest.mark.parametrize(
    "anyio_backend",
    [("asyncio", {"use_uvloop": False}), ("asyncio", {"use_uvloop": True})],
    ids=["asyncio", "uvloop"],
)
async def test_a_server_that_closes_its_stdout_and_lives_on_is_gone_at_once_on_either_loop(
    tmp_path: Path,
) -> None:
    """uvloop's spawn left the server copies of its own stdio ends (and every inheritable fd
    of ours): its stdout never ended, and each call waited out its timeout. The server has
    fds 0-2 only, under either loop, so its closed stdout ends the session at once."""
    script = tmp_path / "closing.py"
    script.write_text(STDOUT_CLOSING_SERVER)
    ours = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(ours, True)  # as a shell's fds reach the gateway: no child gets it
    config = McpServerConfig(command=sys.executable, args=[str(script)], prefix="never", timeout=60)
    try:
        async with McpToolkit("closing", config, backoff=Backoff(initial=0, maximum=0)) as node:
            with anyio.fail_after(30):
                pid = int(result_text(await node.call_tool("bad", {})))
                assert sorted(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) == [0, 1, 2]
                with pytest.raises(ConnectionLost, match="'closing' went away: the connection"):
                    await node.call_tool("bad", {})
                await node.wait_for_health(lambda health: health.state == "ready")
                again = int(result_text(await node.call_tool("bad", {})))
    finally:
        os.close(ours)
    assert again != pid


def test_answers_to_no_request_are_warned_of_the_first_few_times_then_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("toolkits.mcp.ids")
    caplog.set_level(logging.DEBUG, logger=log.name)
    ids = AskedIds(log)
    for request_id in range(AskedIds.KEPT + 1):
        ids.asked(request_id)
    ids.answered("7")  # the SDK's "7" is 7
    ids.answered(None)  # an error about a request the server could not read
    assert not caplog.records
    for _ in range(AskedIds.SAID + 2):
        ids.answered(0)  # asked too long ago to be told from none
    levels = [r.levelno for r in caplog.records]
    assert levels == [logging.WARNING] * AskedIds.SAID + [logging.DEBUG] * 2
    assert (
        caplog.records[AskedIds.SAID - 1]
        .getMessage()
        .endswith("; further such answers are logged at DEBUG")
    )
