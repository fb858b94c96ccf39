"""SIGTERM to `serve --http`: a 2025-11-25 session's calls in flight get the grace too.

The 2026-07-28 case is `test_transports.py`'s; a handshake-era call runs in a session, and
closing the sessions at shutdown must not cut the calls still running in them short.
"""

from __future__ import annotations

import signal
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.servers.asgi import serve_on_loopback

from .processes import http_server
from .test_transports import Held

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize(
    "second", [None, signal.SIGTERM, signal.SIGINT], ids=["once", "twice", "then-ctrl-c"]
)
async def test_a_signal_lets_a_sessions_calls_in_flight_finish(
    tmp_path: Path, second: signal.Signals | None
) -> None:
    down = Held()
    app = down.server.streamable_http_app(host="127.0.0.1")
    async with serve_on_loopback(app) as base, http_server(down.config(tmp_path, base)) as served:
        with anyio.fail_after(30):
            async with Client(served.url, mode="legacy") as client:
                assert client.protocol_version == "2025-11-25"
                await client.list_tools()
                results: list[types.CallToolResult] = []

                async def call() -> None:
                    results.append(await client.call_tool("d__held", {}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await down.started.wait()
                    served.process.send_signal(signal.SIGTERM)
                    await served.line_starting("agent-gateway: stopping")
                    if second is None:
                        down.release.set()  # the gateway waits: its node is still there
                    else:
                        served.process.send_signal(second)  # no more waiting
                # Well within the grace when cut short (the node stops at once).
                with anyio.fail_after(30 if second is None else 3):
                    code = await served.process.wait()
            await served.stderr_closed.wait()
    [result] = results
    if second is None:
        assert result.content == [types.TextContent(text="released")]
    else:  # cut off, and told why
        assert result.is_error
        [text] = [c.text for c in result.content if isinstance(c, types.TextContent)]
        assert "shutting down" in text
    assert code == 128 + signal.SIGTERM
    assert not [line for line in served.stderr if "Traceback" in line or "ERROR" in line]
