"""Helpers for the proxy tests: in-process MCP nodes, a client that answers its server, what
a client hears of list changes in either era, and a client that follows resource updates."""

from __future__ import annotations

import warnings
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext, IncomingMessage
from mcp.server import Server
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import FileUrl

from gateway import ApprovalRule, Gateway
from gateway.limits import waiting_said
from gateway.server import HttpOptions, http_app
from gateway.server.served.pass_through import PassThrough
from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from toolkits.mcp import McpServerConfig, McpToolkit

from .support import serve

__all__ = [
    "KINDS",
    "LEVELS_HEARD",
    "ClientAnswers",
    "Follower",
    "Heard",
    "answers_by_name",
    "heard_at_levels",
    "listening",
    "mcp_nodes",
    "set_log_level",
]


@asynccontextmanager
async def mcp_nodes(
    *servers: tuple[str, CatalogServer] | tuple[str, CatalogServer, dict[str, Any]],
    **keys: Any,
) -> AsyncGenerator[Sequence[McpToolkit]]:
    """A running node per `(name, server[, config keys])`; `keys` apply to every node."""
    async with AsyncExitStack() as stack:
        nodes: list[McpToolkit] = []
        for name, server, *own in servers:
            config = McpServerConfig(command="in-process", **{**keys, **(own[0] if own else {})})
            node = McpToolkit(name, config, target=server.server)
            nodes.append(await stack.enter_async_context(node))
        yield nodes


async def set_log_level(client: Client, level: types.LoggingLevel) -> None:
    """`logging/setLevel`, as a handshake-era client sends it."""
    with warnings.catch_warnings():  # logging is deprecated at 2026-07-28: not ours to act on
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.set_logging_level(level)  # pyright: ignore[reportDeprecated]


LEVELS_HEARD = [["debug: at debug", "warning: at warning"], ["warning: at warning"], []]
"""What `heard_at_levels` hears: every level before the client sets one, then what it set."""


async def heard_at_levels(client: Client, heard: list[str]) -> list[list[str]]:
    """What a handshake-era `client` (its log messages noted in `heard`) hears of a `levels`
    call (a debug and a warning message) before it sets a level, then at warning, then at
    error."""
    each: list[list[str]] = []
    for level in (None, "warning", "error"):
        if level is not None:
            await set_log_level(client, level)
        await client.call_tool("d__levels", {})
        each.append(heard[:])
        heard.clear()
    return each


class ClientAnswers:
    """The upstream client's side: answers sampling, elicitation and roots, and records them.

    Pass `**answers.callbacks()` to `Client` to declare all three capabilities.
    """

    def __init__(self) -> None:
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[types.ElicitRequestParams] = []
        self.roots_asked = 0

    def callbacks(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sample,
            "elicitation_callback": self.elicit,
            "list_roots_callback": self.roots,
        }

    async def sample(
        self, ctx: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="42"), model="upstream-model"
        )

    async def elicit(
        self, ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.elicited.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(self, ctx: ClientRequestContext) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work"), name="work")])


KINDS = {"tools", "prompts", "resources"}


class Heard:
    """The list changes our client heard, in order."""

    def __init__(self) -> None:
        self.lists: list[str] = []
        self._changed = anyio.Event()

    def note(self, kind: str) -> None:
        self.lists.append(kind)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, *, kinds: set[str] = KINDS) -> None:
        """Wait until every one of `kinds` was heard."""
        while not kinds <= set(self.lists):
            await self._changed.wait()

    async def more_than(self, count: int, kind: str | None = None) -> None:
        """Wait until more than `count` changes (of `kind`, or of any list) were heard."""
        while len([k for k in self.lists if kind in (None, k)]) <= count:
            await self._changed.wait()

    async def on_message(self, message: IncomingMessage) -> None:
        match message:
            case types.ToolListChangedNotification():
                self.note("tools")
            case types.PromptListChangedNotification():
                self.note("prompts")
            case types.ResourceListChangedNotification():
                self.note("resources")
            case _:
                pass


@asynccontextmanager
async def listening(client: Client, heard: Heard) -> AsyncGenerator[None]:
    """On 2026-07-28, hear the changes on a listen stream (it is acknowledged on entry)."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        yield
        return
    async with (
        client.listen(
            tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
        ) as subscription,
        anyio.create_task_group() as tg,
    ):

        async def hear() -> None:
            async for event in subscription:
                match event:
                    case ToolsListChanged():
                        heard.note("tools")
                    case PromptsListChanged():
                        heard.note("prompts")
                    case ResourcesListChanged():
                        heard.note("resources")
                    case _:
                        pass

        tg.start_soon(hear)
        yield
        tg.cancel_scope.cancel()


class Follower:
    """One client following resources through the gateway the way its era does, and the
    updates it heard, in order."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self._changed = anyio.Event()
        self._client: Client | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._stream: anyio.CancelScope | None = None

    @property
    def modern(self) -> bool:
        assert self._client is not None
        return self._client.protocol_version in MODERN_PROTOCOL_VERSIONS

    @asynccontextmanager
    async def connected(
        self, target: Server[Any] | str | StdioServerParameters, era: str
    ) -> AsyncGenerator[Client]:
        """A client of `target` (a gateway in-process, its URL, or its command) in `era`."""
        async with (
            Client(target, mode=era, message_handler=self._on_message) as client,
            anyio.create_task_group() as tg,
        ):
            self._client, self._tg = client, tg
            yield client
            tg.cancel_scope.cancel()

    async def follow(self, *uris: str) -> None:
        """Follow `uris` from now on (2026-07-28: a new stream naming exactly them)."""
        assert self._client is not None
        assert self._tg is not None
        if self.modern:
            old = self._stream
            self._stream = await self._tg.start(self._listen, uris)
            if old is not None:
                old.cancel()
            return
        for uri in uris:
            await self._client.session.send_request(
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)),
                types.EmptyResult,
            )

    async def stop(self, uri: str, *, still: tuple[str, ...] = ()) -> None:
        """Stop following `uri` (2026-07-28: a new stream naming `still`, or none)."""
        assert self._client is not None
        if self.modern:
            if still:
                await self.follow(*still)
            elif self._stream is not None:
                self._stream.cancel()
            return
        await self._client.session.send_request(
            types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)),
            types.EmptyResult,
        )

    async def until(self, *uris: str) -> None:
        """Wait until it heard as many updates as `uris`, and check they are exactly those."""
        while len(self.heard) < len(uris):
            await self._changed.wait()
        assert self.heard == list(uris)

    def _note(self, uri: str) -> None:
        self.heard.append(uri)
        self._changed.set()
        self._changed = anyio.Event()

    async def _on_message(self, message: IncomingMessage) -> None:
        # 2026-07-28 clients hear their stream (the SDK also tees its events here).
        if isinstance(message, types.ResourceUpdatedNotification) and not self.modern:
            self._note(message.params.uri)

    async def _listen(
        self, uris: tuple[str, ...], *, task_status: anyio.abc.TaskStatus[anyio.CancelScope]
    ) -> None:
        assert self._client is not None
        with anyio.CancelScope() as scope:
            async with self._client.listen(resource_subscriptions=uris) as subscription:
                assert subscription.honored.resource_subscriptions == list(uris)
                task_status.started(scope)
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        self._note(event.uri)


def answers_by_name(
    answers: Sequence[tuple[Any, ...]], logs: Sequence[str], *, protocol: str = "auto"
) -> dict[str, tuple[Any, Any]]:
    """The (result, progress) of each tool of a pass-through test's calls, checked for what
    every such downstream answers: `steps(3)` logs and reports each step, `fail` fails, and
    a tool that asks cannot elicit from a client that declared no elicitation. A handshake-era
    node (`protocol` auto) declared it to its server, which asks (`ask`) and is refused; a
    2026-07-28 node declares, per call, only what its caller can answer, so the server's
    resolver (`greet`) refuses before asking, with a JSON-RPC error of its own."""
    assert list(logs) == ["info: step 1 of 3", "info: step 2 of 3", "info: step 3 of 3"]
    by_name = {name: (result, progress) for name, result, progress in answers}
    assert by_name["d__steps"][1] == [
        (1.0, 3.0, "step 1"),
        (2.0, 3.0, "step 2"),
        (3.0, 3.0, "step 3"),
    ]
    assert by_name["d__fail"][0]["isError"] is True
    if protocol == "auto":
        assert "lacks elicitation" in str(by_name["d__ask"][0]["content"])
    else:
        # The server's JSON-RPC error, relayed as it sent it.
        error = by_name["d__greet"][0]["error"]
        assert error["code"] == types.MISSING_REQUIRED_CLIENT_CAPABILITY, error
        why = "did not declare the form elicitation capability required by resolver"
        assert why in error["message"]
    return by_name


@asynccontextmanager
async def gateway_front(
    config: McpServerConfig,
    *,
    pass_through: bool = True,
    options: HttpOptions | None = None,
    approvals: Mapping[str, ApprovalRule] | None = None,
    **settings: Any,
) -> AsyncGenerator[tuple[str, PassThrough | None, McpToolkit]]:
    """A gateway serving the tools of node `d` (`config`) over HTTP on 127.0.0.1: its MCP URL,
    its pass-through layer (if on), and the node; `approvals`: its nodes' approval rules;
    `settings`: more of its `[gateway]` settings."""
    async with McpToolkit("d", config) as node:
        node.raw_calls = pass_through  # off: the usual path, the SDK's at both ends
        gateway = Gateway([node], [], approvals=approvals)
        app = http_app(
            serve(gateway, expose_tools=True, pass_through=pass_through, **settings),
            options or HttpOptions("127.0.0.1", 0),
        )
        async with serve_on_loopback(app) as base:
            layers = [layer for layer in app.state.layers if isinstance(layer, PassThrough)]
            yield f"{base}/mcp", layers[0] if layers else None, node


def waiting_notice(message: object) -> bool:
    """Whether a progress `message` is the gateway's own, said while a call waited for a
    slot (`max_concurrency`): 20 calls at once meet the client's share of 16."""
    return isinstance(message, str) and message.startswith(waiting_said(""))
