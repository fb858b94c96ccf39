"""What a server offers besides tools: resources, resource templates, prompts, completions.

Fetched live on every call (nothing is cached: the server's `list_changed`, passed on by its
node, says when to fetch again), every page of a listing followed. Names and URIs are the
server's own; naming across nodes is the caller's business.

Errors: the server's own answers (no such prompt, a resource it cannot read) come out as the
`MCPError` it sent, for relaying as they are. A server that is down or dies mid-request raises
`ServerUnavailable` (`ConnectionLost`), and so does one that gives no answer within the node's
`timeout` (time spent waiting on our client's answers to its requests does not count, within
the node's absolute cap). A server that does not offer a feature lists nothing. A request a
server refuses because it no longer knows the session (it restarted: `Connection.expired`) is
no answer of the server's: the node reconnects, and the request goes once more on the new
session.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from functools import partial
from typing import Any, TypeVar, cast

import anyio
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from ..base import CallContext, validation_brief
from ..errors import ServerUnavailable
from .config import McpServerConfig
from .connection import Connection, lost_during
from .deadline import Deadline
from .pages import every_page
from .server_requests import CallsInFlight, InFlightCall
from .session import OwnedSession

__all__ = ["McpCatalog"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_Item = TypeVar("_Item")


class McpCatalog:
    """One server's resources, resource templates, prompts and completions (see the module)."""

    def __init__(
        self, node: str, config: McpServerConfig, session: OwnedSession, calls: CallsInFlight
    ) -> None:
        self._node = node
        self._config = config
        self._session = session
        self._calls = calls

    @property
    def instructions(self) -> str | None:
        conn = self._session.live
        return conn.client.instructions if conn is not None and conn.client is not None else None

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities | None:
        return self._session.capabilities

    async def list_resources(self) -> list[mcp_types.Resource]:
        async def page(client: Client, cursor: str | None) -> tuple[list[Any], str | None]:
            result = await client.list_resources(cursor=cursor)
            return result.resources, result.next_cursor

        return await self._list("resources", page)

    async def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]:
        async def page(client: Client, cursor: str | None) -> tuple[list[Any], str | None]:
            result = await client.list_resource_templates(cursor=cursor)
            return result.resource_templates, result.next_cursor

        return await self._list("resources", page, what="resource templates")

    async def list_prompts(self) -> list[mcp_types.Prompt]:
        async def page(client: Client, cursor: str | None) -> tuple[list[Any], str | None]:
            result = await client.list_prompts(cursor=cursor)
            return result.prompts, result.next_cursor

        return await self._list("prompts", page)

    async def read_resource(
        self, uri: str, *, context: CallContext | None = None
    ) -> mcp_types.ReadResourceResult:
        """Read `uri`; the server's requests meanwhile go to the caller (`context.answer`)."""
        meta = _meta(context)
        return await self._request(
            f"resources/read {uri!r}",
            lambda client: client.read_resource(uri, meta=meta),
            track=context or CallContext(),
        )

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        context: CallContext | None = None,
    ) -> mcp_types.GetPromptResult:
        """Get the prompt the server calls `name`; its requests go to the caller
        (`context.answer`)."""
        args = dict(arguments) if arguments is not None else None
        meta = _meta(context)
        return await self._request(
            f"prompts/get {name!r}",
            lambda client: client.get_prompt(name, args, meta=meta),
            track=context or CallContext(),
        )

    async def complete(
        self,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference,
        argument: mcp_types.CompletionArgument,
        context_arguments: Mapping[str, str] | None = None,
    ) -> mcp_types.CompleteResult:
        """Completions for one argument of a prompt (by the server's name) or a template;
        none from a server that does not offer completions."""
        nothing = mcp_types.CompleteResult(completion=mcp_types.Completion(values=[]))
        if not await self._offers("completions"):
            return nothing
        context = dict(context_arguments) if context_arguments is not None else None
        try:
            return await self._request(
                "completion/complete",
                lambda client: client.complete(
                    ref, {"name": argument.name, "value": argument.value}, context
                ),
                track=None,
            )
        except MCPError as exc:
            if exc.code == mcp_types.METHOD_NOT_FOUND:
                return nothing  # capabilities were unknown (`protocol = "modern"`)
            raise

    async def _list(
        self,
        feature: str,
        page: Callable[[Client, str | None], Awaitable[tuple[list[_Item], str | None]]],
        *,
        what: str | None = None,
    ) -> list[_Item]:
        """The listing of `what` (by default, the `feature` of the server's capabilities)."""
        if not await self._offers(feature):
            return []
        what = what or feature

        async def listing(client: Client) -> list[_Item]:
            return await every_page(partial(page, client), what=f"{self._node}'s {what}", log=log)

        try:
            return await self._request(f"{what} listing", listing, track=None)
        except MCPError as exc:
            if exc.code == mcp_types.METHOD_NOT_FOUND:
                return []  # capabilities were unknown (`protocol = "modern"`): it has none
            raise

    async def _offers(self, feature: str) -> bool:
        conn = await self._session.ready_connection()
        assert conn.client is not None
        capabilities = conn.client.server_capabilities
        if capabilities == mcp_types.ServerCapabilities():
            return True  # unknown (no discovery): ask, and take "method not found" for no
        return getattr(capabilities, feature) is not None

    async def _request(
        self, what: str, send: Callable[[Client], Awaitable[_T]], *, track: CallContext | None
    ) -> _T:
        """`send` on the live session, bounded, and once more on the next session if the
        server no longer knew this one (it restarted: the request was not read); a `track`ed
        request is a call in flight for that caller (its server's requests and log messages
        go to it)."""
        return await self._session.on_live(partial(self._send_on, what, send, track))

    async def _send_on(
        self,
        what: str,
        send: Callable[[Client], Awaitable[_T]],
        track: CallContext | None,
        conn: Connection,
    ) -> _T:
        assert conn.client is not None
        deadline = Deadline(self._config.timeout, self._config.call_cap)
        with deadline.scope:
            tracked: InFlightCall | None = None
            try:
                with (
                    self._calls.track(track, deadline.waiting) if track else nullcontext()
                ) as tracked:
                    return await conn.abandonable(partial(send, conn.client))
            except anyio.get_cancelled_exc_class():
                if tracked is not None:
                    await tracked.unwound()  # its client told of its questions withdrawn first
                raise
            except MCPError as exc:
                lost = lost_during(self._node, conn, exc, what)
                if lost is not None:
                    raise lost from exc
                raise
            except ValidationError as exc:
                raise MCPError(
                    mcp_types.INTERNAL_ERROR,
                    f"MCP server {self._node!r} sent a malformed answer to {what}: "
                    f"{validation_brief(exc, 'the answer')}",
                ) from exc
        limit = (
            f"{deadline.cap:g} s, the absolute limit"
            if deadline.capped
            else f"{deadline.timeout:g} s"
        )
        raise ServerUnavailable(
            f"MCP server {self._node!r} did not answer {what} within {limit}", node=self._node
        )


def _meta(context: CallContext | None) -> mcp_types.RequestParamsMeta | None:
    meta = context.meta if context else None
    return cast(mcp_types.RequestParamsMeta, dict(meta)) if meta else None
