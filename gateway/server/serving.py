"""What one serving run owns: the task group of parked requests and the change relay.

A run is the server's lifespan: one stdio connection, one HTTP app, one in-process client.
Handlers reach the run's state through `serving(ctx)`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from toolkits.mcp import McpToolkit

from .parked import ParkedCalls
from .relay import ChangeRelay

__all__ = ["Serving", "lifespan_for", "register_connections", "serving"]


@dataclass(frozen=True, slots=True)
class Serving:
    parked: ParkedCalls
    relay: ChangeRelay


def serving(ctx: ServerRequestContext[Any, Any]) -> Serving | None:
    state = ctx.lifespan_context
    return state if isinstance(state, Serving) else None


def lifespan_for(
    nodes: Sequence[McpToolkit],
) -> Callable[[Server[Any]], AbstractAsyncContextManager[Serving]]:
    """The server lifespan that runs a `Serving` for `nodes` (the exposed MCP nodes)."""

    @asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncGenerator[Serving]:
        error: Exception | None = None
        relay = ChangeRelay()
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(relay.run)
                stop_watching = relay.watch(nodes)
                try:
                    yield Serving(ParkedCalls(tg), relay)
                except Exception as exc:  # re-raised below as itself, not in an ExceptionGroup
                    error = exc
                finally:
                    stop_watching()
                    tg.cancel_scope.cancel()
        finally:
            relay.close()
        if error is not None:
            raise error

    return lifespan


async def register_connections(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: hands each request's connection to its run's change relay."""
    try:
        return await call_next(ctx)
    finally:
        state = serving(ctx)
        if state is not None and ctx.request_id is not None and ctx.method != "ping":
            state.relay.register(ctx)
