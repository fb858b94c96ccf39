"""What one passed-through call costs the front's CPU, with no socket on the way.

    python -m bench hot-path [--calls 3000] [--rounds 7] [--protocol modern|auto] [--gap MS]
                             [--blob N] [--asking] [--profile FILE] [--bytecodes]

The peer benchmark's CPU per call swings by 10-20 % between runs on a shared 2-core machine;
this figure stays within a few per cent, so a change to the hot path can be weighed in
seconds (run it on both checkouts with PYTHONPATH). The front is the real one: the app of
`agent-gateway serve --http` with `expose_tools = true`, in front of the benchmark downstream
(`bench/downstream.py`) over HTTP. Only its two sockets are replaced:

- the client's: uvicorn's own protocol is fed each request's bytes, and the answer is read
  off a transport that keeps what is written (the client: a 2026-07-28 `tools/call` of
  `d__echo` with a 200 B message, as the mcp `Client` sends it; with `--blob N`, a call of
  `d__blob` for N bytes of text; with `--asking`, from a client that declares roots, whose
  calls are parked: `pass_through_rounds`);
- the downstream's: the lean client's connections are given a transport that answers each
  request passed through with the downstream's real answer to the first one (asked over a
  socket), its id swapped in, at once or after `--gap` ms.

The node's own session (its handshake, tool list, listening) talks to the real downstream;
with `--protocol auto` it is a 2025-era session, whose answers are event streams.

CPU is the process's (user + system) per call, the minimum and median over `--rounds`.
`--bytecodes` counts what one more round runs instead of timing it: Python bytecodes per call,
and the functions that run the most. That count is the same on any host and under any load
(one run against the next differs by a few of ~7,000), so it weighs a change where the CPU
figure cannot: on a host whose hypervisor takes half the CPU (bench/RESULTS.md, item 34).
`--gap 1` shows what a real run adds: code that runs after the process sat idle (as it does
while a real server works on the call) runs slower, on this machine about 1.6-2.5x the same
code run back to back (bench/RESULTS.md, item 30).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import Any, cast

import anyio
import httptools

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bench._processes import running  # noqa: E402
from bench.downstream import READY as DOWNSTREAM_READY  # noqa: E402
from bench.downstream import blob_text  # noqa: E402
from gateway.assembly import open_gateway  # noqa: E402
from gateway.config import load_config  # noqa: E402
from gateway.server import build_server  # noqa: E402
from gateway.server.transports.http import HttpOptions, http_app  # noqa: E402
from toolkits import json_bytes  # noqa: E402
from toolkits.mcp import lean_http  # noqa: E402
from toolkits.mcp.lean_response import Connection  # noqa: E402

DOWNSTREAM = REPO / "bench" / "downstream.py"
MESSAGE = "x" * 200
_ID = re.compile(rb'"id":"([^"]+)"')
_CALL = b'"method":"tools/call"'
_FRAMING = {b"content-length", b"transfer-encoding"}


def client_request(request_id: int, blob: int = 0, asking: bool = False) -> bytes:
    """A 2026-07-28 `tools/call` of `d__echo` (or of `d__blob`, for `blob` bytes), as the mcp
    `Client` (httpx2) sends it; `asking`: from a client that declares roots."""
    tool, arguments = ("d__blob", {"n": blob}) if blob else ("d__echo", {"message": MESSAGE})
    capabilities: dict[str, object] = {"roots": {}} if asking else {}
    meta: dict[str, object] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }
    params = {"name": tool, "arguments": arguments, "_meta": meta}
    body = json_bytes(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    )
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAccept-Encoding: gzip, deflate\r\n"
        "Connection: keep-alive\r\nUser-Agent: python-httpx2/2.16.2\r\n"
        "accept: application/json, text/event-stream\r\ncontent-type: application/json\r\n"
        f"mcp-protocol-version: 2026-07-28\r\nmcp-method: tools/call\r\nmcp-name: {tool}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class _Answer:
    """httptools callbacks: one whole HTTP answer (status, headers, de-chunked body)."""

    def __init__(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = bytearray()
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True


def _ask(host: str, port: int, request: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Send `request` on a socket of its own; the whole answer."""
    answer = _Answer()
    parser = httptools.HttpResponseParser(answer)
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        while not answer.complete:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("the downstream closed the connection mid-answer")
            parser.feed_data(data)
    return parser.get_status_code(), answer.headers, bytes(answer.body)


class Recorded:
    """The downstream's real answer to the first request (asked over a socket of its own),
    given to every request after it with that request's id in place of the first one's."""

    def __init__(self, origin: tuple[str, int]) -> None:
        self.origin = origin
        self._first: tuple[bytes, bytes, bytes] | None = None
        """Head (framing headers left out), body, the id in it."""

    def answer(self, request: bytes) -> bytes:
        found = _ID.search(request)
        if found is None:
            raise RuntimeError("a request with no string id reached the downstream")
        if self._first is None:
            status, headers, body = _ask(*self.origin, request)
            kept = b"".join(b"%s: %s\r\n" % kv for kv in headers if kv[0] not in _FRAMING)
            self._first = (b"HTTP/1.1 %d OK\r\n" % status + kept, body, found.group(1))
        head, body, first_id = self._first
        body = body.replace(b'"' + first_id + b'"', b'"' + found.group(1) + b'"', 1)
        return head + b"content-length: %d\r\n\r\n" % len(body) + body


class Replayed(asyncio.Transport):
    """The downstream, for the lean client: each call passed through gets `recorded`'s
    answer (after `gap` seconds); the node's own session's requests (its listening, its
    refreshes) go to the real downstream, on a socket."""

    def __init__(self, conn: Connection, recorded: Recorded, gap: float) -> None:
        super().__init__()
        self._conn = conn
        self._recorded = recorded
        self._gap = gap
        self._closing = False
        self._real: socket.socket | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        data, loop = bytes(data), asyncio.get_running_loop()
        if _CALL not in data:
            if self._real is None:
                self._real = socket.create_connection(self._recorded.origin, timeout=30)
                loop.add_reader(self._real, self._relay)
            self._real.sendall(data)
            return
        answer = self._recorded.answer(data)
        if self._gap:
            loop.call_later(self._gap, self._conn.data_received, answer)
        else:
            loop.call_soon(self._conn.data_received, answer)

    def _relay(self) -> None:
        assert self._real is not None
        data = self._real.recv(65536)
        if data:
            self._conn.data_received(data)
        else:
            self.close()
            self._conn.connection_lost(None)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        if self._real is not None:
            asyncio.get_running_loop().remove_reader(self._real)
            self._real.close()
            self._real = None

    def abort(self) -> None:
        self.close()

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class ClientSide(asyncio.Transport):
    """What the front writes to its client, read as HTTP answers (one per request)."""

    def __init__(self) -> None:
        super().__init__()
        self._answer = _Answer()
        self._parser = httptools.HttpResponseParser(self._answer)
        self.done: asyncio.Future[bytes] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._parser.feed_data(bytes(data))
        if self._answer.complete:
            body = bytes(self._answer.body)
            self._answer = _Answer()
            self._parser = httptools.HttpResponseParser(self._answer)
            if self.done is not None and not self.done.done():
                self.done.set_result(body)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(
            name, default
        )

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        pass


@asynccontextmanager
async def front(protocol: str, gap: float) -> AsyncGenerator[asyncio.Protocol]:
    """The gateway's HTTP app behind uvicorn's protocol (no socket), its node `d` in front of
    a fresh benchmark downstream whose answers are replayed (`Replayed`)."""
    async with running([sys.executable, str(DOWNSTREAM), "--http"], ready=DOWNSTREAM_READY) as down:
        host, _, port = down.url.removeprefix("http://").partition(":")
        recorded = Recorded((host, int(port)))

        async def connect(host: str, port: int) -> Connection:
            conn = Connection()
            conn.connection_made(Replayed(conn, recorded, gap))
            return conn

        saved = lean_http.__dict__["_connect"]
        setattr(lean_http, "_connect", connect)  # noqa: B010  # a private seam, on purpose
        try:
            with tempfile.TemporaryDirectory() as tmp:
                config_file = Path(tmp) / "gateway.toml"
                config_file.write_text(
                    f'[gateway]\nexpose_tools = true\n[mcpServers.d]\nurl = "{down.url}/mcp"\n'
                    f'protocol = "{protocol}"\n'
                )
                config = load_config(config_file)
            async with open_gateway(config) as gateway:
                server, router = build_server(gateway, config.gateway, runs=None)
                await router.check()
                app = http_app(server, HttpOptions(host="127.0.0.1", port=0))
                async with app.running():
                    yield _uvicorn_protocol(app)
        finally:
            setattr(lean_http, "_connect", saved)  # noqa: B010


def _uvicorn_protocol(app: Any) -> asyncio.Protocol:
    # uvicorn's internals: its protocol is what `serve --http` feeds each connection's bytes.
    from uvicorn.config import Config
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    from uvicorn.server import ServerState

    config = Config(app, log_config=None, access_log=False, proxy_headers=False, http="httptools")
    config.load()
    return cast(
        asyncio.Protocol,
        HttpToolsProtocol(config=config, server_state=ServerState(), app_state={}),
    )


async def measure(
    *,
    calls: int,
    rounds: int,
    protocol: str,
    gap: float,
    blob: int = 0,
    asking: bool = False,
    profile: str | None = None,
    bytecodes: Counter[tuple[str, int, str]] | None = None,
) -> list[float]:
    """CPU microseconds per call, one figure per round (after a warm-up); with `bytecodes`,
    one more round counts the bytecodes each function runs into it."""
    async with front(protocol, gap) as served:
        client = ClientSide()
        served.connection_made(client)
        requests = [client_request(i, blob, asking) for i in range(calls)]
        loop = asyncio.get_running_loop()

        async def call(index: int) -> bytes:
            client.done = loop.create_future()
            served.data_received(requests[index])
            return await client.done

        answer = await call(0)
        expected = blob_text(blob).encode() if blob else MESSAGE.encode()
        if b'"isError":false' not in answer or expected not in answer:
            raise RuntimeError(f"not the answer asked for: {answer[:300]!r}")
        for index in range(min(500, calls)):
            await call(index)
        figures: list[float] = []
        for _ in range(rounds):
            started = time.process_time()
            for index in range(calls):
                await call(index)
            figures.append((time.process_time() - started) / calls * 1e6)
        if bytecodes is not None:
            sys.settrace(_counting(bytecodes))
            try:
                for index in range(calls):
                    await call(index)
            finally:
                sys.settrace(None)
        if profile is not None:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
            for index in range(calls):
                await call(index)
            profiler.disable()
            profiler.dump_stats(profile)
        served.connection_lost(None)
        return figures


def _counting(counts: Counter[tuple[str, int, str]]) -> Any:
    """A `sys.settrace` function counting each bytecode run, by its function (this file's
    stand-ins for the two sockets included: ~400 a call)."""

    def opcode(frame: FrameType, event: str, arg: object) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[(code.co_filename, code.co_firstlineno, code.co_name)] += 1
        return opcode

    def call(frame: FrameType, event: str, arg: object) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return opcode

    return call


def _print_bytecodes(counts: Counter[tuple[str, int, str]], calls: int, top: int = 25) -> None:
    print(f"bytecodes per passed-through call: {sum(counts.values()) / calls:.0f}")
    site = str(Path(httptools.__file__).parents[1]) + "/"
    for (path, line, name), count in counts.most_common(top):
        where = path.replace(site, "").replace(str(REPO) + "/", "")
        print(f"{count / calls:8.1f}  {where}:{line} {name}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench hot-path", description=__doc__)
    parser.add_argument("--calls", type=int, default=3000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--protocol", choices=["modern", "auto"], default="modern")
    parser.add_argument("--gap", type=float, default=0.0, help="ms before each answer")
    parser.add_argument("--blob", type=int, default=0, help="call blob(N) instead of the echo")
    parser.add_argument(
        "--asking", action="store_true", help="a client that declares roots (parked rounds)"
    )
    parser.add_argument("--profile", metavar="FILE", help="cProfile one more round to FILE")
    parser.add_argument(
        "--bytecodes", action="store_true", help="count one more round's bytecodes, by function"
    )
    args = parser.parse_args()
    counts: Counter[tuple[str, int, str]] | None = Counter() if args.bytecodes else None
    figures = anyio.run(
        lambda: measure(
            calls=args.calls,
            rounds=args.rounds,
            protocol=args.protocol,
            gap=args.gap / 1000,
            blob=args.blob,
            asking=args.asking,
            profile=args.profile,
            bytecodes=counts,
        ),
        backend_options={"use_uvloop": True},
    )
    print(
        f"front CPU per passed-through call ({args.protocol} node, gap {args.gap:g} ms"
        f"{f', blob {args.blob} B' if args.blob else ''}{', asking client' if args.asking else ''}): "
        f"min {min(figures):.1f} us, median {statistics.median(figures):.1f} us "
        f"({args.rounds} rounds x {args.calls} calls)"
    )
    if counts is not None:
        _print_bytecodes(counts, args.calls)


if __name__ == "__main__":
    main()
