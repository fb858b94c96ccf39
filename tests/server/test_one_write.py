"""uvicorn's protocol with each turn's writes sent together: over a real socket on 127.0.0.1,
answers arrive whole and in order, and a part streamed after an await is not held back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import httptools
import pytest
from starlette.types import Receive, Scope, Send

from gateway.server.transports.one_write import OneWriteHttp
from tests.servers.asgi import serve_on_loopback

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

App = Callable[[Scope, Receive, Send], Awaitable[None]]


class Answer:
    """httptools callbacks: the body parts as they are parsed, and the end."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.complete = False

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Raw:
    """One keep-alive connection, read with httptools."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.answer = Answer()
        self.parser = httptools.HttpResponseParser(self.answer)

    async def get(self, path: str) -> None:
        self.answer = Answer()
        self.parser = httptools.HttpResponseParser(self.answer)
        await self.stream.send(f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n".encode())

    async def until(self, done: Callable[[Answer], bool]) -> Answer:
        while not done(self.answer):
            self.parser.feed_data(await self.stream.receive())
        return self.answer


def make_app(stream_read: anyio.Event) -> App:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # nothing to start or stop
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        start: dict[str, Any] = {"type": "http.response.start", "status": 200}
        if scope["path"] == "/json":
            headers = [(b"content-type", b"application/json"), (b"content-length", b"11")]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": b'{"ok":true}'})
        elif scope["path"] == "/big":  # 2 MB: sent as a gathered write, not joined
            await send({**start, "headers": [(b"content-length", str(len(BIG)).encode())]})
            await send({"type": "http.response.body", "body": BIG})
        else:  # /stream: a part, then the next only once the client has read it
            await send({**start, "headers": []})
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            await stream_read.wait()
            await send({"type": "http.response.body", "body": b"second"})

    return app


BIG = bytes(range(256)) * 8192


async def test_answers_arrive_whole_and_a_streamed_part_is_not_held() -> None:
    stream_read = anyio.Event()
    with anyio.fail_after(20):
        async with (
            serve_on_loopback(make_app(stream_read), http=OneWriteHttp) as base,
            await anyio.connect_tcp("127.0.0.1", int(base.rsplit(":", 1)[1])) as stream,
        ):
            raw = Raw(stream)
            for _ in range(3):  # one kept connection, answer after answer
                await raw.get("/json")
                answer = await raw.until(lambda a: a.complete)
                assert raw.parser.get_status_code() == 200
                assert b"".join(answer.parts) == b'{"ok":true}'
            await raw.get("/big")
            answer = await raw.until(lambda a: a.complete)
            assert b"".join(answer.parts) == BIG
            await raw.get("/stream")
            # The first part comes while the app waits: it was not held for the second.
            answer = await raw.until(lambda a: b"first" in b"".join(a.parts))
            assert not answer.complete
            stream_read.set()
            answer = await raw.until(lambda a: a.complete)
            assert b"".join(answer.parts) == b"firstsecond"


class Written(asyncio.Transport):
    """A transport that keeps what it is asked to write, write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes | list[bytes]] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.writes.append([bytes(d) for d in list_of_data])

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def test_writes_of_one_turn_go_out_as_one_and_close_sends_what_is_held() -> None:
    from gateway.server.transports.one_write import _OneWrite  # pyright: ignore[reportPrivateUsage]

    transport = Written()
    one = _OneWrite(transport, asyncio.get_running_loop())
    one.write(b"HTTP/1.1 200 OK\r\n\r\n")
    one.write(b"body")
    assert transport.writes == []  # held until the turn ends
    await anyio.lowlevel.checkpoint()
    assert transport.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    one.write(b"last")
    one.close()  # what is held goes first
    assert transport.writes[1:] == [b"last"]
    assert transport.closed
    await anyio.lowlevel.checkpoint()
    assert len(transport.writes) == 2  # nothing written twice, nothing after the close


async def test_a_large_write_is_not_held() -> None:
    """It reaches the transport at once, so the transport's buffer pauses the app as before."""
    from gateway.server.transports.one_write import _OneWrite  # pyright: ignore[reportPrivateUsage]

    transport = Written()
    one = _OneWrite(transport, asyncio.get_running_loop())
    one.write(b"HTTP/1.1 200 OK\r\n\r\n")
    one.write(b"x" * 100_000)
    assert transport.writes == [[b"HTTP/1.1 200 OK\r\n\r\n", b"x" * 100_000]]  # not copied
    one.write(b"y" * 100_000)
    assert transport.writes[1:] == [b"y" * 100_000]
    await anyio.lowlevel.checkpoint()
    assert len(transport.writes) == 2
