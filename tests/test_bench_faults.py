"""The peer benchmark when an arm's front dies during a workload: that arm is recorded as
failed, with its error, and nothing else is lost: the other arms of the workload are measured,
and so are the round's later workloads (bench/RESULTS.md, item 53: opened in the round's task,
a client failing inside once ended every later workload of the round without a word).

The fronts here are SDK servers in this process, served over HTTP on 127.0.0.1; one of them
is cut off after a few calls, as a front that crashes would be.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc
import pytest
from mcp import Client
from mcp.server import MCPServer

from bench.peers import calls
from bench.peers.arms import Arm, Env, Stack
from bench.peers.measure import Figures, Together
from bench.peers.sizes import QUICK
from tests.servers.asgi import serve_on_loopback

pytestmark = pytest.mark.anyio


def echo_server(calls_before_dying: int | None, dying: anyio.Event) -> MCPServer:
    server = MCPServer("front")
    answered = 0

    @server.tool()
    def echo(message: str) -> str:
        nonlocal answered
        answered += 1
        if calls_before_dying is not None and answered >= calls_before_dying:
            dying.set()
        return message

    return server


@asynccontextmanager
async def front(name: str, calls_before_dying: int | None = None) -> AsyncGenerator[Stack]:
    """A stack of arm `name`; with `calls_before_dying`, it dies once its server has answered
    that many calls: its connections are cut and nothing listens any more."""
    dying = anyio.Event()
    app = echo_server(calls_before_dying, dying).streamable_http_app()
    async with serve_on_loopback(app) as base, anyio.create_task_group() as tg:
        # A relay in front, cut to kill the front: stopping the server itself would end the
        # other server's event streams too (sse-starlette stops every stream of the thread
        # when one uvicorn in it shuts down).
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        target = urlsplit(base).port
        assert target is not None
        relay = anyio.CancelScope()  # not the task group's: that one holds the caller's block
        tg.start_soon(_relay, listener, target, relay, dying)
        address = f"http://127.0.0.1:{port}/mcp"
        async with Client(address, cache=None) as client:
            arm = Arm(name=name, kind="direct", stdio=False)
            yield Stack(arm, client, os.getpid(), address, {"echo": "echo"})
        relay.cancel()


async def _relay(
    listener: anyio.abc.Listener[anyio.abc.SocketStream],
    port: int,
    scope: anyio.CancelScope,
    dying: anyio.Event,
) -> None:
    """Relay connections to `port` until `scope` is cancelled, or `dying` set."""

    async def pipe(source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream) -> None:
        with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for chunk in source:
                await sink.send(chunk)
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await sink.send_eof()

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with (
            client,
            await anyio.connect_tcp("127.0.0.1", port) as server,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(pipe, client, server)
            await pipe(server, client)

    with scope:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, serve)
            await dying.wait()
            tg.cancel_scope.cancel()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("workload", "figure"),
    [(calls.clients(4), "calls_per_s"), (calls.asking("legacy"), "p50_ms")],
    ids=["clients", "asking"],
)
async def test_a_front_dying_during_a_workload_fails_its_arm_only(
    tmp_path: Path, workload: Together, figure: str
) -> None:
    sizes = replace(QUICK, seconds=1.0, window=0.1, asking_calls=200, timeout=20)
    env = Env(sizes, tmp_path)
    found: dict[str, Figures | Exception] = {}
    after: dict[str, Figures | Exception] = {}
    with anyio.fail_after(50):
        async with front("steady") as steady, front("dies", calls_before_dying=30) as dies:
            stacks = [steady, dies]
            found = await workload(stacks, env)
            # The round goes on in the same task, as `run_rounds` does.
            after = await calls.sequential([steady], env)
    # Before the fix, the dying front's clients cancelled this task: the `with` block ended
    # here, both workloads unfinished, without an error.
    assert found, "the workload was cut short without an error"
    assert after, "the next workload was cut short without an error"
    assert isinstance(found["dies"], Exception), found
    steady_figures = found["steady"]
    assert isinstance(steady_figures, dict), steady_figures
    measured = steady_figures[figure]
    assert measured is not None
    assert measured > 0
    later = after["steady"]
    assert isinstance(later, dict), later
    p50 = later["p50_ms"]
    assert p50 is not None
    assert p50 > 0
