"""The pooled httpx clients models call out with: one a caller makes (`new_http_client`), or
one shared per running event loop (`shared_http_client`)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import threading
import urllib.request
from collections.abc import AsyncGenerator
from dataclasses import dataclass

import httpx

from ..errors import ModelConfigError

__all__ = ["DEFAULT_TIMEOUT", "new_http_client", "shared_http_client"]

DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=30.0)
"""Reads may be long: a reasoning model can think for minutes before its first byte. A
model's `ModelSettings.timeout` replaces the read timeout for its requests."""


def new_http_client(timeout: httpx.Timeout = DEFAULT_TIMEOUT) -> httpx.AsyncClient:
    """A pooled client with bounded timeouts, suitable to share between all models.

    The environment's proxies (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`) apply as
    they do to a plain `httpx.AsyncClient()`, which ignores them once given its own transport:
    they are mounted here, each a pool made at its first request too.
    """
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=8)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else _PoolOnFirstRequest(limits, httpx.Proxy(proxy))
        for pattern, proxy in environment_proxies().items()
    }
    return httpx.AsyncClient(timeout=timeout, transport=_PoolOnFirstRequest(limits), mounts=mounts)


def environment_proxies() -> dict[str, str | None]:
    """The environment's proxies as httpx mount patterns (`https://`, `all://*.corp.example`),
    each to its proxy's URL, or to None for a `NO_PROXY` host (called directly).

    The routes a plain `httpx.AsyncClient()` mounts, read from `urllib.request.getproxies()` as
    it reads them; only the HTTP ones (`FTP_PROXY` and the like are no proxy of ours).
    `NO_PROXY` names hosts as curl does: `*` is every host, `corp.example` also its
    subdomains, `.corp.example` only them.
    """
    found = urllib.request.getproxies()
    routes: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if proxy := found.get(scheme):
            routes[f"{scheme}://"] = proxy if "://" in proxy else f"http://{proxy}"
    for host in (host.strip() for host in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if host:
            routes[_direct_route(host)] = None
    return routes


def _direct_route(host: str) -> str:
    """The mount pattern of one `NO_PROXY` entry."""
    if "://" in host:
        return host
    address = host.split("/")[0]  # a network (10.0.0.0/8) is matched as its address alone
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return f"all://{host}" if host.lower() == "localhost" else f"all://*{host}"
    return f"all://[{host}]" if ip.version == 6 else f"all://{host}"


class _PoolOnFirstRequest(httpx.AsyncBaseTransport):
    """httpx's connection pool (direct, or through `proxy`), made at the first request rather
    than with the client: making it reads the CA bundle (50-80 ms), which every start of a
    gateway paid, with or without a model that calls out."""

    def __init__(self, limits: httpx.Limits, proxy: httpx.Proxy | None = None) -> None:
        self._limits = limits
        self._proxy = proxy
        self._pool: httpx.AsyncHTTPTransport | None = None

    @property
    def proxy(self) -> httpx.Proxy | None:
        return self._proxy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._pool is None:
            self._pool = httpx.AsyncHTTPTransport(limits=self._limits, proxy=self._proxy)
        return await self._pool.handle_async_request(request)

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()


def shared_http_client() -> httpx.AsyncClient:
    """The client used by models that were given none: one for each running event loop.

    A pool's connections belong to the event loop that opened them, so one process-wide
    client failed every other `asyncio.run` (its sockets were bound to the loop before). Each
    loop gets its own, closed as the loop shuts down (`asyncio.run`, `anyio.run` and
    `asyncio.Runner` close async generators then, which is how it learns of it). A loop closed
    without `loop.shutdown_asyncgens()` leaves its client unclosed; the next call forgets it.

    Long-lived applications should create their own with `new_http_client()`, pass it to every
    model, and close it on shutdown.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise ModelConfigError(
            "a model without an http_client calls out from an asyncio event loop only: "
            "under another (trio), give it one, new_http_client()"
        ) from None
    with _loop_clients_lock:
        for ended in [known for known in _loop_clients if known.is_closed()]:
            del _loop_clients[ended]  # its sockets went with the loop: not reusable
        held = _loop_clients.get(loop)
        if held is not None and not held.client.is_closed:
            return held.client
        client = new_http_client()
        closer = _close_with_loop(loop, client)
        _loop_clients[loop] = _LoopClient(client, closer)
    # Started here, in the loop: the loop then finalizes it when it shuts down.
    with contextlib.suppress(StopIteration):  # how a first `yield` ends the step
        closer.asend(None).send(None)
    return client


@dataclass(frozen=True, slots=True)
class _LoopClient:
    client: httpx.AsyncClient
    closer: AsyncGenerator[None]
    """Kept so that it lives as long as the loop: its `finally` closes the client."""


_loop_clients: dict[asyncio.AbstractEventLoop, _LoopClient] = {}
_loop_clients_lock = threading.Lock()


async def _close_with_loop(
    loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient
) -> AsyncGenerator[None]:
    try:
        yield
    finally:
        with _loop_clients_lock:
            held = _loop_clients.get(loop)
            if held is not None and held.client is client:
                del _loop_clients[loop]
        await client.aclose()
