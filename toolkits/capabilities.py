"""What only some nodes offer, each as a small Protocol beside the core `Toolkit`.

A caller checks a node with `isinstance(node, Capability)` (they are runtime-checkable) and
never asks what kind of node it holds. An MCP server's node (`McpToolkit`) offers them all; a
node of local functions none.

    HasHealth                 a connection whose state can be shown and waited on
    ListsAtHand               its tools told without waiting, while it need not wait
    HasOutputCap              its own cap on the characters of a result a model reads
    HasIdleTimeout            how long a call may go without a sign of life
    HasSamplingCap            its own cap on the sampling requests of one call a model answers
    HasCallRules              its own limit on calls at once, and the calls a person approves
    AsksCaller                calls that may ask their caller (`CallContext.answer`) mid-call
    HasCatalog                resources, resource templates, prompts, completions (`Catalog`)
    FollowsChanges            says when its tools, prompts or resources changed
    HasResourceSubscriptions  says when a resource it serves was updated
    HasServerLogs             says what its server logs outside any call
    KnowsRenames              tells the name a tool it renamed has now
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import mcp_types

from .base import CallContext, Tool
from .health import NodeHealth

if TYPE_CHECKING:  # the MCP package imports this module
    from .mcp.config import PrefixPolicy

__all__ = [
    "AsksCaller",
    "CallRules",
    "Catalog",
    "FollowsChanges",
    "HasCallRules",
    "HasCatalog",
    "HasHealth",
    "HasIdleTimeout",
    "HasOutputCap",
    "HasResourceSubscriptions",
    "HasSamplingCap",
    "HasServerLogs",
    "KnowsRenames",
    "ListChangedCallback",
    "ListsAtHand",
    "ResourceUpdatedCallback",
    "ServerLogCallback",
    "SetsServerLogLevel",
    "Unsubscribe",
]

ListChangedCallback = Callable[[str], Awaitable[None]]
"""Called with the node's name after one of its lists changed."""

ResourceUpdatedCallback = Callable[[str], Awaitable[None]]
"""Called with the URI the server says was updated (the subscribed one, or one under it)."""

ServerLogCallback = Callable[[str, mcp_types.LoggingMessageNotificationParams], Awaitable[None]]
"""Called with the node's name and a log message its server sent outside any call."""

Unsubscribe = Callable[[], Awaitable[None]]
"""Ends one subscription (again: nothing)."""


@runtime_checkable
class HasHealth(Protocol):
    @property
    def health(self) -> NodeHealth:
        """How the node's connection is doing now."""
        ...


@runtime_checkable
class ListsAtHand(Protocol):
    def tools_at_hand(self) -> Sequence[Tool] | None:
        """What `list_tools` would return now, if it would not have to wait (None if it
        would): a caller listing many nodes reads them without a task each."""
        ...


@runtime_checkable
class HasOutputCap(Protocol):
    @property
    def max_output(self) -> int:
        """Characters of a result the model reads (`result_data(result, max_chars=...)`)."""
        ...


@runtime_checkable
class HasIdleTimeout(Protocol):
    @property
    def idle_timeout(self) -> float:
        """Seconds a call may go without a result or a sign of life: also what a call may
        wait before it is made (for a slot: `gateway.limits`)."""
        ...


@runtime_checkable
class HasSamplingCap(Protocol):
    @property
    def max_sampling(self) -> int:
        """Sampling requests of one call an agent's model answers; further ones are refused."""
        ...


@dataclass(frozen=True, slots=True)
class CallRules:
    """How a node's own settings bound the calls of its tools (an MCP server's keys)."""

    max_concurrency: int | None = None
    """Calls the node takes at once, from all clients together (None: the gateway's default)."""
    require_approval: bool | Sequence[str] = False
    """Tools a person approves each call of: all (True), or fnmatch globs on their names."""
    require_approval_if_destructive: bool = False
    """Also each tool marked `destructiveHint`."""


@runtime_checkable
class HasCallRules(Protocol):
    @property
    def call_rules(self) -> CallRules:
        """What the gateway the node joins applies to its calls (`gateway.node_rules`), however
        that gateway is built: these settings are the node's, not its builder's to repeat."""
        ...


@runtime_checkable
class AsksCaller(Protocol):
    @property
    def asks_caller(self) -> bool:
        """Whether a call may ask its caller mid-call (`CallContext.answer`), so the caller
        must be able to wait for an answer from its own client."""
        ...


class Catalog(Protocol):
    """What a server offers besides tools, fetched live. Errors: the server's own answers as
    the `MCPError` it sent; a server that is down as `ServerUnavailable`."""

    @property
    def instructions(self) -> str | None:
        """What the server tells its clients about using it (its handshake's or discovery's
        `instructions`), as it said it on the live connection; None when it said nothing or
        is not connected now (no waiting)."""
        ...

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities | None:
        """What the server said it offers (its handshake's or discovery's capabilities) on
        its last session, kept while it reconnects; None before its first. All empty when
        they are unknown (`protocol = "modern"`: no discovery)."""
        ...

    async def list_resources(self) -> list[mcp_types.Resource]: ...

    async def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]: ...

    async def list_prompts(self) -> list[mcp_types.Prompt]: ...

    async def read_resource(
        self, uri: str, *, context: CallContext | None = None
    ) -> mcp_types.ReadResourceResult:
        """Read `uri`; the server's requests meanwhile go to `context.answer`."""
        ...

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        context: CallContext | None = None,
    ) -> mcp_types.GetPromptResult:
        """The prompt the server calls `name`; its requests meanwhile go to `context.answer`."""
        ...

    async def complete(
        self,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference,
        argument: mcp_types.CompletionArgument,
        context_arguments: Mapping[str, str] | None = None,
    ) -> mcp_types.CompleteResult:
        """Completions for one argument of a prompt (by the server's name) or a template."""
        ...


@runtime_checkable
class HasCatalog(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def prefix(self) -> PrefixPolicy:
        """How names the node offers are prefixed with its own (tools and prompts)."""
        ...

    @property
    def catalog(self) -> Catalog: ...


@runtime_checkable
class FollowsChanges(Protocol):
    def subscribe(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever the offered tools change; returns unsubscribe."""
        ...

    def subscribe_prompts(self, callback: ListChangedCallback) -> Callable[[], None]: ...

    def subscribe_resources(self, callback: ListChangedCallback) -> Callable[[], None]: ...


@runtime_checkable
class HasResourceSubscriptions(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def offers_resource_subscriptions(self) -> bool:
        """Whether the server, connected now, offers resource subscriptions."""
        ...

    async def subscribe_resource(
        self, uri: str, on_updated: ResourceUpdatedCallback
    ) -> Unsubscribe:
        """Call `on_updated(uri)` whenever the resource at `uri` is updated; returns the
        coroutine function that ends it. Raises `NotOffered` or `ServerUnavailable`."""
        ...


@runtime_checkable
class HasServerLogs(Protocol):
    def subscribe_logs(self, callback: ServerLogCallback) -> Callable[[], None]:
        """Call `callback(node_name, params)` for each log message the server sends while no
        call is in flight (a call's go to its caller, `CallContext.on_log`); returns
        unsubscribe. The callback must not wait on anyone: the node's session waits on it."""
        ...


@runtime_checkable
class SetsServerLogLevel(Protocol):
    async def set_log_level(self, level: mcp_types.LoggingLevel) -> None:
        """Ask the server for log messages from `level` up, from now on (also after a
        reconnect). Never raises: a server that cannot be told keeps its own level."""
        ...


@runtime_checkable
class KnowsRenames(Protocol):
    def now_named(self, name: str) -> str | None:
        """The name a tool this node offered as `name` has now, if it was renamed (an MCP
        server's `prefix="auto"`/`"never"` names follow which servers are up); else None."""
        ...
