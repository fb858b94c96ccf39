"""A node whose server is down: calls that try it early, and what the log says of an outage.

In-process servers behind transport factories that refuse at will (the real HTTP server that
comes back is in `test_mcp_http.py`)."""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.client import Transport

from tests.servers.inprocess import CrashableTransport, ToyServer
from toolkits import result_text
from toolkits.errors import ServerUnavailable
from toolkits.mcp import Backoff, McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

REFUSED = "OSError: connection refused by test"
LATER = Backoff(initial=60, maximum=60, early=0)
"""The scheduled attempt is a minute away: only a call brings the node back sooner."""


def config() -> McpServerConfig:
    return McpServerConfig(command="in-process")  # never run: the nodes get a target


class Switchable:
    """A toy server that refuses connections while `down`."""

    def __init__(self) -> None:
        toy = ToyServer()
        toy.add_echo("echo")
        self.crashable = CrashableTransport(toy.server)
        self.down = False

    def connect(self) -> Transport:
        if self.down:
            raise OSError("connection refused by test")
        return self.crashable.connect()

    async def go_down(self, node: McpToolkit) -> None:
        self.down = True
        self.crashable.crash()
        await node.wait_for_health(lambda health: health.state == "failed")


async def test_a_call_reconnects_to_a_server_that_is_back_and_the_log_says_so_each_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.toy")
    server = Switchable()
    stable = Backoff(initial=60, maximum=60, stable_after=0, early=0)  # each outage alike
    async with McpToolkit("toy", config(), target=server.connect, backoff=stable) as node:
        with anyio.fail_after(30):
            for _outage in range(2):  # the second soon after the first: warned of all the same
                await server.go_down(node)
                with pytest.raises(ServerUnavailable, match=re.escape(REFUSED)):
                    await node.call_tool("toy__echo", {})
                server.down = False
                assert not (await node.call_tool("toy__echo", {})).is_error
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    timed = [re.sub(r"/ \d+\.\d s$", "/ T s", line) for line in warnings]
    outage = [
        "connection lost: the server closed the connection",
        f"could not connect (attempt 1): {REFUSED}",
        "reconnected (protocol 2025-11-25) after 2 failed attempts / T s",
    ]
    assert timed == outage * 2


async def test_calls_that_find_a_server_down_share_one_early_attempt() -> None:
    attempts: list[None] = []
    trying, answer = anyio.Event(), anyio.Event()

    @asynccontextmanager
    async def refused_after_a_while() -> AsyncGenerator[Any]:
        trying.set()
        await answer.wait()
        raise OSError("refused after a while")
        yield

    def connect() -> Transport:
        attempts.append(None)
        if len(attempts) == 1:
            raise OSError("connection refused by test")
        return refused_after_a_while()

    said: list[str] = []

    async def refresh() -> None:
        with pytest.raises(ServerUnavailable) as down:
            await node.refresh_tools()
        said.append(str(down.value))

    async with McpToolkit("bad", config(), target=connect, backoff=LATER) as node:
        assert node.health.failures == 1
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(refresh)
                await trying.wait()
                await anyio.wait_all_tasks_blocked()  # every call waits for the attempt
                answer.set()
        assert len(attempts) == 2
        assert node.health.failures == 2
    # Each call has the attempt's own error, not the one before it.
    assert len(said) == 20
    expected = "MCP server 'bad' is unavailable: OSError: refused after a while ("
    assert all(text.startswith(expected) for text in said), said


async def test_a_call_soon_after_an_attempt_fails_at_once_saying_how_old_the_error_is() -> None:
    def refused() -> Transport:
        raise OSError("connection refused by test")

    soon = Backoff(initial=60, maximum=60, early=30)
    async with McpToolkit("bad", config(), target=refused, backoff=soon) as node:
        with anyio.fail_after(10), pytest.raises(ServerUnavailable) as down:
            await node.refresh_tools()
        assert node.health.failures == 1  # no attempt made for the call
    assert re.fullmatch(
        rf"MCP server 'bad' is unavailable: {REFUSED} \(\d\.\d s ago\); "
        r"a call in \d\d s or later tries again",
        str(down.value),
    ), down.value


async def test_a_call_before_the_tools_were_ever_listed_says_the_server_is_unavailable() -> None:
    """Such a call said the server "has no tool named" it, sending the user after a naming
    problem while the server was not connected."""
    server = Switchable()
    server.down = True
    async with McpToolkit("toy", config(), target=server.connect, backoff=LATER) as node:
        with anyio.fail_after(10):
            assert node.health.state == "failed"
            with pytest.raises(ServerUnavailable) as down:
                await node.call_tool("toy__echo", {})
            server.down = False
            # A call tries the server early (LATER: at once); up, it has the tool.
            echoed = await node.call_tool("toy__echo", {"message": "back"})
    assert str(down.value).startswith(f"MCP server 'toy' is unavailable: {REFUSED} ("), down.value
    assert result_text(echoed) == "echo:[('message', 'back')]"


async def test_a_server_the_node_starts_is_not_started_again_early_by_calls() -> None:
    # A stdio server that cannot start fails the same way at once: a process each call.
    dead = McpServerConfig(command=sys.executable, args=["-c", "raise SystemExit(3)"])
    async with McpToolkit("dead", dead, backoff=LATER) as node:
        with anyio.fail_after(10), pytest.raises(ServerUnavailable) as down:
            await node.refresh_tools()
        assert node.health.failures == 1
    assert re.fullmatch(
        r"MCP server 'dead' is unavailable: .+ \(\d+(\.\d)? s ago\); "
        r"next attempt at \d\d:\d\d:\d\dZ",
        str(down.value),
    ), down.value
