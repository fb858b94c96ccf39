"""FastMCP's proxy in front of the benchmark's downstream: run by the fastmcp venv, not ours.

    .bench-venvs/fastmcp/bin/python bench/peers/fastmcp_proxy.py [--fresh] [--stdio] URL [URL ...]

`create_proxy(URL)` is FastMCP's default: a fresh backend session for every request. Without
`--fresh` the proxy gets a connected `Client`, which FastMCP reuses for all requests. Several
URLs are mounted as servers `s0`, `s1`, ... (FastMCP prefixes their tools `s0_echo`, ...).
Serves streamable HTTP at /mcp on 127.0.0.1 and prints `bench-peer: serving on URL`; with
`--stdio`, serves stdin and stdout instead (`bench/stdio_front.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from typing import Any

import anyio
from fastmcp import Client, FastMCP
from fastmcp.server import create_proxy

READY = "bench-peer: serving on "


async def serve(urls: list[str], fresh: bool, stdio: bool = False) -> None:
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets' connections, as for the others.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = sock.getsockname()[1]
    async with contextlib.AsyncExitStack() as stack:
        backends: list[Any] = list(urls)
        if not fresh:
            backends = [await stack.enter_async_context(Client(url)) for url in urls]
        if len(backends) == 1:
            proxy = create_proxy(backends[0], name="bench-proxy")
        elif fresh:
            servers = {f"s{i}": {"url": url, "transport": "http"} for i, url in enumerate(urls)}
            proxy = create_proxy({"mcpServers": servers}, name="bench-proxy")
        else:
            proxy = FastMCP("bench-proxy")
            for i, backend in enumerate(backends):
                proxy.mount(create_proxy(backend), namespace=f"s{i}")
        if stdio:
            sock.close()
            await proxy.run_stdio_async(show_banner=False, log_level="WARNING")
            return
        print(f"{READY}http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
        await proxy.run_http_async(
            show_banner=False, host="127.0.0.1", port=port, log_level="WARNING", sockets=[sock]
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true", help="FastMCP's default: no reuse")
    parser.add_argument("--stdio", action="store_true", help="serve stdin and stdout")
    parser.add_argument("urls", nargs="+")
    options = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, options.urls, options.fresh, options.stdio)


if __name__ == "__main__":
    main()
