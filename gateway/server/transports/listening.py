"""The socket `serve --http` serves on: bound first, listening once the gateway is ready.

`serve` binds it before it starts any MCP server, so a port another program holds is said at
once, not after every server had its `start_wait` (10 s) to start. It listens only when the
gateway serves: until then a client is refused, as by a port nobody holds, rather than left
waiting in the backlog. A replica leaving stops listening at once (`stop_listening`).
"""

from __future__ import annotations

import errno
import socket

import uvicorn

from ...errors import GatewayError

__all__ = ["bind_socket", "listen_on", "stop_listening"]

_BACKLOG = 128  # connections wait in the backlog until uvicorn accepts


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` (0: a free port), not listening yet.

    Raises `GatewayError` saying why it cannot be bound, and what to do."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio only sets TCP_NODELAY on connections of such sockets, and
    # without it Nagle's algorithm adds ~40 ms to each 2026-07-28 response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise _cannot_serve(host, port, exc) from exc
    return sock


def listen_on(sock: socket.socket, host: str, port: int) -> None:
    """Listen on `sock`, bound by `bind_socket`. Raises `GatewayError` as it does: two
    processes may bind one port (neither listening yet), and only one can listen on it."""
    try:
        sock.listen(_BACKLOG)
    except OSError as exc:
        raise _cannot_serve(host, port, exc) from exc


def stop_listening(server: uvicorn.Server, sock: socket.socket) -> None:
    """A replica leaving: its port closed, so a load balancer's connect is refused and it
    sends the request to another replica (a POST too: nothing was sent); the idle connections
    closed, the busy ones once their answer is out (`Connection: close`). uvicorn's own
    shutdown, later, does the same again, harmlessly."""
    if not server.started:  # still starting: its stop (`should_exit`) is enough
        return
    for listening in server.servers:
        listening.close()
    sock.close()  # uvloop listens on its own copy of the socket: both closed
    for connection in list(server.server_state.connections):
        connection.shutdown()


def _cannot_serve(host: str, port: int, exc: OSError) -> GatewayError:
    said = f"cannot serve on {host}:{port}: {exc.strerror or exc}"
    if exc.errno == errno.EADDRINUSE:
        said += (
            ": another program listens on that port; stop it, or serve on another port "
            f"(--http {host}:0 takes a free one and names it)"
        )
    elif exc.errno == errno.EADDRNOTAVAIL:
        said += ": no network interface of this machine has that address (127.0.0.1 is this one)"
    elif exc.errno == errno.EACCES and 0 < port < 1024:
        said += ": ports below 1024 need privileges; serve on a port above 1023"
    return GatewayError(said)
