"""The loopback redirect target of an authorization: one HTTP GET on 127.0.0.1, its query kept.

RFC 8252 §7.3: a native app receives the authorization response on a loopback port it
listens on only for the length of the authorization. `receive_callback` listens, runs
`visit()` (opens the browser, or fetches the URL itself), and returns the redirect's
`code`, `state` and `iss` once the browser (or the fetch) arrives at `/callback`.

Any local process, and any web page the user has open, can send a request there: a
callback whose `state` is not the one of the authorization under way is answered 400 and
changes nothing (RFC 6749 §10.12); only the awaited one ends the wait, a code or an error.
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Awaitable, Callable
from contextlib import suppress
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

__all__ = ["CALLBACK_PATH", "free_loopback_port", "receive_callback", "redirect_uri"]

CALLBACK_PATH = "/callback"
_MAX_REQUEST_BYTES = 16_384
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>agent-gateway</title>"
    "<p>{message}</p><p>You can close this window.</p>"
)


def redirect_uri(port: int) -> str:
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


def free_loopback_port() -> int:
    """A port free on 127.0.0.1 now (bound again when the authorization starts)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def receive_callback(
    port: int, visit: Callable[[], Awaitable[None]], *, state: str, within: float
) -> AuthorizationCodeResult:
    """Listen on 127.0.0.1:`port`, run `visit()`, and wait (up to `within` seconds) for the
    redirect that carries `state`.

    Raises `OAuthFlowError` when the authorization server redirects with an error, when the
    port is taken, or when nothing arrives in time.
    """
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    except OSError as exc:
        raise OAuthFlowError(
            f"cannot listen for the authorization callback on 127.0.0.1:{port}: {exc.strerror}"
        ) from exc
    found: list[AuthorizationCodeResult | OAuthFlowError] = []
    arrived = anyio.Event()

    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            outcome = await _read_redirect(stream)
            if outcome is None:
                await _respond(stream, 404, "Not found.")
                return
            said, outcome = outcome
            if said is None or not secrets.compare_digest(said, state):
                await _respond(stream, 400, "This is not the authorization agent-gateway awaits.")
                return
            if not arrived.is_set():
                found.append(outcome)
                arrived.set()
            ok = isinstance(outcome, AuthorizationCodeResult)
            await _respond(stream, 200, "Authorised." if ok else f"Not authorised: {outcome}")

    failed: list[Exception] = []
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        with anyio.move_on_after(within):
            try:
                await visit()
            except Exception as exc:  # raised below as itself, not in the group's wrapper
                failed.append(exc)
            else:
                await arrived.wait()
        tg.cancel_scope.cancel()
    if failed and not found:
        raise failed[0]
    if not found:
        raise OAuthFlowError(f"no authorization arrived within {within:g} s")
    outcome = found[0]
    if isinstance(outcome, OAuthFlowError):
        raise outcome
    return outcome


async def _read_redirect(
    stream: anyio.abc.SocketStream,
) -> tuple[str | None, AuthorizationCodeResult | OAuthFlowError] | None:
    """The redirect's `state` and outcome; None for a request that is not the callback."""
    data = b""
    with anyio.move_on_after(10):
        while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST_BYTES:
            try:
                data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "GET":
        return None
    target = urlsplit(parts[1])
    if target.path != CALLBACK_PATH:
        return None
    query = {key: values[0] for key, values in parse_qs(target.query).items()}
    state = query.get("state")
    if "error" in query:
        described = query.get("error_description")
        return state, OAuthFlowError(
            f"the authorization server refused: {query['error']}"
            + (f" ({described})" if described else "")
        )
    if "code" not in query:
        return state, OAuthFlowError("the authorization callback carried no code")
    return state, AuthorizationCodeResult(code=query["code"], state=state, iss=query.get("iss"))


async def _respond(stream: anyio.abc.SocketStream, status: int, message: str) -> None:
    body = _PAGE.format(message=_escape(message)).encode()
    reason = {200: "OK", 400: "Bad Request"}.get(status, "Not Found")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
    )
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head.encode() + body)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
