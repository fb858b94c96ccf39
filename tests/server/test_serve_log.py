"""`serve`'s log lines: each starts with its time in UTC, `-v` leaves out the lines said for
every request and every session (`-vv` has them), and none says a key in a server's URL."""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.servers.asgi import serve_on_loopback
from tests.servers.faulty_http import Fault, FaultyFront, Waiting, faulty_server
from tests.servers.inprocess import ToyServer

from .processes import TIME, TIMES_42, http_server, untimed, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("verbose", ["-v", "-vv"])
async def test_served_lines_have_their_time_and_per_request_lines_wait_for_vv(
    tmp_path: Path, verbose: str
) -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    async with serve_on_loopback(toy.server.streamable_http_app(host="127.0.0.1")) as base:
        config = write_config(tmp_path, TIMES_42)
        config.write_text(f'{config.read_text()}[mcpServers.toy]\nurl = "{base}/mcp"\n')
        # Far from UTC: a time in local time would be 9 hours off.
        async with http_server(config, verbose, env={"TZ": "Asia/Tokyo"}) as served:
            with anyio.fail_after(30):
                async with Client(served.url, mode="legacy") as client:  # a session
                    echoed = await client.call_tool("toy__echo", {"text": "hi"})
                    assert not echoed.is_error, echoed
                served.process.send_signal(signal.SIGTERM)
                await served.process.wait()
                await served.stderr_closed.wait()
    said = [line for line in served.stderr if line]
    sessions = [line for line in said if "Created new transport with session ID" in line]
    requests = [line for line in said if "HTTP Request: " in line]
    if verbose == "-vv":  # at DEBUG, the SDK's and httpx's own lines as they come
        assert sessions
        assert requests
        return
    assert not sessions
    assert not requests
    untimed = [line for line in said if not TIME.match(line)]
    assert untimed == []
    started = datetime.strptime(said[0][:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - started) < timedelta(minutes=5)
    assert any(" INFO " in line for line in said)  # -v: INFO lines, timed as the rest
    assert any(" agent-gateway: stopping; " in line for line in said)


KEY = "zk8Qm2Lp9Xw4Rt7Yv3Bn6Hc1"
PAGE = Fault(502, "text/plain", echo=lambda said: f"no route for {said[':path']}".encode())
"""A proxy's error page that repeats the request's path."""


async def test_at_vv_no_line_says_the_key_in_a_servers_url_path(tmp_path: Path) -> None:
    """`url = ".../s/${KEY}/mcp"`: the key is *** in the request lines and the SDK's (`-vv`),
    and in the error a proxied call's client gets from a page that repeats the path."""
    app = faulty_server(Waiting(), "page").streamable_http_app(
        host="127.0.0.1", streamable_http_path=f"/s/{KEY}/mcp"
    )
    async with serve_on_loopback(FaultyFront(app, calls={"page": PAGE})) as base:
        config = write_config(tmp_path, TIMES_42)
        config.write_text(f'{config.read_text()}[mcpServers.z]\nurl = "{base}/s/${{Z_KEY}}/mcp"\n')
        async with http_server(config, "-vv", env={"Z_KEY": KEY}) as served:
            with anyio.fail_after(30):
                async with Client(served.url, mode="legacy") as client:
                    with pytest.raises(MCPError) as refused:
                        await client.call_tool("z__page", {})
                served.process.send_signal(signal.SIGTERM)
                await served.process.wait()
                await served.stderr_closed.wait()
    assert refused.value.error.message == (
        "MCP server 'z' answered HTTP 502 (Bad Gateway): no route for /s/***/mcp"
    )
    requests = [untimed(line) for line in served.stderr if "HTTP Request: POST " in line]
    assert f'INFO httpx2: HTTP Request: POST {base}/s/***/mcp "HTTP/1.1 200 OK"' in requests
    assert any("Connecting to StreamableHTTP endpoint: " in line for line in served.stderr)
    assert not any(KEY in line for line in served.stderr)
