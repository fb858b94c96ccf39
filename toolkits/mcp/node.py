"""One configured MCP server as a toolkit node (implements `toolkits.Toolkit`).

The node offers the server's tools under model-facing names (filtered by `include`/`exclude`,
named by `naming`, routed back through a reverse map) and calls them on the session its
`OwnedSession` keeps alive: as raw JSON-RPC where the connection carries it (`forwards`), else
through the SDK client; a tool that runs only as a task as one (`task_calls`). With
`resource_tools`, two tools of its own read the server's resources (`resource_tools`); with
`forward_context`, a tool's `context` argument is the calling run's (`context_argument`). Calls
run in the caller's own task, so cancelling the caller cancels the MCP request (the SDK tells
the server with `notifications/cancelled`). The rest of what the server offers (resources, prompts,
completions) is in `node.catalog`, and updates of its resources come to `subscribe_resource`
callbacks (`subscriptions`); the requests the server sends its client during a call (sampling,
elicitation, roots) are answered by whoever made the call, and its log messages go to them
(`CallContext`, `server_requests`). The node offers every optional capability of
`toolkits.capabilities`.

Timeouts: a call may go `timeout` seconds without a result (a tool's own in `tool_timeouts`);
each progress notification restarts that clock, up to the absolute cap `max_timeout`, and the
clock stops while the server waits on our answer to one of its requests. A timeout raises
`ToolTimeout`; a server that is down raises `ServerUnavailable` (`ConnectionLost` when it died
mid-call). Tool failures, including protocol errors the server answers with, come back as
`is_error` results.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..background import InBackground
from ..base import CallContext, Tool, error_result, validation_brief
from ..capabilities import (
    CallRules,
    ListChangedCallback,
    ResourceUpdatedCallback,
    ServerLogCallback,
    Unsubscribe,
)
from ..errors import NoSuchTool, ServerUnavailable
from ..health import NodeHealth
from .backoff import DEFAULT_BACKOFF, Backoff
from .call_failures import cut_short, too_large
from .catalog import McpCatalog
from .config import McpServerConfig, PrefixPolicy
from .connection import Connection, connection_lost
from .context_argument import offered_schema, with_context_forwarded
from .deadline import Deadline, timed_out
from .error_text import error_text, protocol_error_result
from .forward import Forward, call_for, still_there
from .forwards import Forwards
from .listeners import Listeners
from .log_level import ServerLogLevel
from .long_lines import too_long_answer
from .naming import (
    NodeTools,
    invert,
    is_offered,
    resolve_tool_names,
)
from .progress import progress_in_order
from .resource_tools import ResourceTools
from .sdk_errors import SDK_TOO_LARGE, closed_by_sdk, connection_failed
from .server_requests import CallsInFlight, InFlightCall
from .session import OwnedSession, Target
from .stdio_pipe import too_deep_answer
from .subscriptions import ResourceSubscriptions
from .task_calls import TaskCalls
from .unmatched_settings import UnmatchedSettings

__all__ = ["McpToolkit"]

log = logging.getLogger(__name__)


class McpToolkit(InBackground):
    """A toolkit node serving one MCP server's tools.

    Run it with `async with McpToolkit(name, config) as node:` or start `node.run` in your own
    task group (`await tg.start(node.run)` returns once the first connection attempt settled);
    several at once with `McpToolkitGroup`. Safe to call concurrently.
    """

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        target: Target | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        resolve_names: Callable[[str], Sequence[McpToolkit]] | None = None,
    ) -> None:
        """`target` replaces the config's transport (its other keys still apply).

        `resolve_names` replaces naming this node alone: a group passes its cross-node resolver,
        which is told which node's listing changed, calls `apply_names` on its nodes and
        returns those whose tools changed.
        """
        self._name = name
        self._config = config
        self._resolve_names = resolve_names
        self._log = logging.getLogger(f"toolkits.mcp.{name}")
        self._calls = CallsInFlight(name)
        self._session = OwnedSession(
            name,
            config,
            adopt_listing=self._adopt_listing,
            on_list_changed=self._on_list_changed,
            client_options=self._calls.client_callbacks(),
            on_server_log=self._server_log,
            on_resource_updated=self._on_resource_updated,
            serve_connection=self._serve_connection,
            target=target,
            backoff=backoff,
            log=self._log,
            in_flight=self._calls,
        )
        self._catalog = McpCatalog(name, config, self._session, self._calls)
        self._subscriptions = ResourceSubscriptions(
            name, self._session, timeout=config.timeout, log=self._log
        )
        self._log_level = ServerLogLevel(self._session, timeout=config.timeout, log=self._log)
        self._listing: dict[str, mcp_types.Tool] = {}
        self._listed = False
        """Whether the server's tools were ever listed (else no name is known to be unknown)."""
        self._task_only: set[str] = set()
        """The server's tools that run only as tasks (`execution.taskSupport: required`)."""
        self._tasks = TaskCalls(name, self._calls)
        self._resource_tools = (
            ResourceTools(name, self._catalog, self._log) if config.resource_tools else None
        )
        self._own: frozenset[str] = frozenset()
        """The node's own tools offered now (`resource_tools`), by their own names."""
        self._not_plain: frozenset[str] = frozenset()
        """`_own` and `_task_only`: no plain `tools/call` of the server (the raw path asks)."""
        self._unmatched = UnmatchedSettings(name, config, self._log)
        self._clock = (config.timeout, config.call_cap)
        self._clocks: dict[str, tuple[float, float]] = {}
        """The offered tools' clocks (`clock_of`) where `tool_timeouts` is set, by original."""
        self._awaited = True
        """Whether a listing waits for the first connection (`stop_awaiting`)."""
        self._named: tuple[dict[str, mcp_types.Tool], dict[str, str]] = ({}, {})
        """The listing and names `_tools` were made of (each node's listing renames them all)."""
        self._tools: tuple[Tool, ...] = ()
        self.raw_calls = True
        """Calls go as raw JSON-RPC on the live connection where it carries them (`forward`),
        at a fifth of the SDK client's CPU, the same answers; False: through the SDK client."""
        self._routes: dict[str, str] = {}
        self._former: dict[str, str] = {}
        """Names this node's tools were offered under before a rename, to their originals."""
        self._forwards = Forwards(name, config, self._session, self._calls)
        self._listeners = {
            kind: Listeners(name, kind, self._log) for kind in ("tools", "prompts", "resources")
        }
        self._log_listeners: list[ServerLogCallback] = []

    def __repr__(self) -> str:
        return f"McpToolkit({self._name!r}, {self._config.kind}, {self._session.health.state})"

    # -- what the node offers -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def config(self) -> McpServerConfig:
        return self._config

    @property
    def prefix(self) -> PrefixPolicy:
        return self._config.prefix

    @property
    def call_rules(self) -> CallRules:
        return self._config.call_rules

    @property
    def asks_caller(self) -> bool:
        return True  # its server may ask for sampling, elicitation or roots during any call

    @property
    def max_output(self) -> int:
        """The observation cap for this node's results: pass it to `result_data(result, ...)`."""
        return self._config.max_output

    @property
    def idle_timeout(self) -> float:
        """The server's `timeout`: a call's seconds without a result or progress."""
        return self._config.timeout

    @property
    def max_sampling(self) -> int:
        """Sampling requests of one call an agent's model answers (`HasSamplingCap`)."""
        return self._config.max_sampling

    @property
    def health(self) -> NodeHealth:
        return dataclasses.replace(self._session.health, tool_count=len(self._tools))

    async def wait_for_health(self, predicate: Callable[[NodeHealth], bool]) -> NodeHealth:
        """Wait until `predicate(health)` holds (checked now and at each change); unbounded."""
        health = await self._session.wait_for_health(
            lambda state: predicate(dataclasses.replace(state, tool_count=len(self._tools)))
        )
        return dataclasses.replace(health, tool_count=len(self._tools))

    @property
    def node_tools(self) -> NodeTools:
        """The offered tools' original names and the prefix policy, for `resolve_tool_names`."""
        return NodeTools(self._name, self._config.prefix, tuple(self._listing))

    async def list_tools(self) -> Sequence[Tool]:
        """The tools offered now; while the first connection is being made, waits for it
        (unless told to stop awaiting it)."""
        if self._awaited and self._session.health.state == "connecting":
            with anyio.move_on_after(self._config.connect_timeout or self._config.timeout):
                await self._session.wait_for_health(lambda health: health.state != "connecting")
        return self._tools

    def tools_at_hand(self) -> Sequence[Tool] | None:
        """The tools offered now, unless the first connection is still being made."""
        connecting = self._awaited and self._session.health.state == "connecting"
        return None if connecting else self._tools

    def stop_awaiting(self) -> None:
        """List no tools while the first connection is still being made, as for a server that
        is down: a gateway that has waited long enough goes on without this one, which joins
        once ready (its tools appear; `subscribe` hears of it)."""
        self._awaited = False

    @property
    def catalog(self) -> McpCatalog:
        """The server's resources, resource templates, prompts and completions, fetched live."""
        return self._catalog

    def subscribe(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever the offered tools change; returns unsubscribe."""
        return self._listeners["tools"].add(callback)

    def subscribe_prompts(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever the server says its prompts changed."""
        return self._listeners["prompts"].add(callback)

    def subscribe_resources(self, callback: ListChangedCallback) -> Callable[[], None]:
        """Call `callback(node_name)` whenever the server says its resources (or resource
        templates) changed."""
        return self._listeners["resources"].add(callback)

    def subscribe_logs(self, callback: ServerLogCallback) -> Callable[[], None]:
        """Call `callback(node_name, params)` for each log message the server sends while no
        call is in flight (a call's go to its caller); returns unsubscribe."""
        self._log_listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._log_listeners:
                self._log_listeners.remove(callback)

        return unsubscribe

    async def _server_log(self, params: mcp_types.LoggingMessageNotificationParams) -> bool:
        """A log message of the server (the node's log has it): its call's caller's, or, with
        no call in flight, its listeners'."""
        if not self._calls.idle or not self._log_listeners:
            return await self._calls.relay_log(params)
        for callback in list(self._log_listeners):
            try:
                await callback(self._name, params)
            except Exception:  # a listener's bug must not touch the session
                self._log.exception("a server-log listener failed")
        return True

    async def subscribe_resource(
        self, uri: str, on_updated: ResourceUpdatedCallback
    ) -> Unsubscribe:
        """Call `on_updated(uri)` whenever the server says the resource at `uri` (or one under
        it) was updated; returns the coroutine function that ends it (see `subscriptions`).

        The server is subscribed once for every local subscriber of a URI, again after a
        reconnect. Raises `NotOffered` (the server has no resource subscriptions, or refused
        that URI), `ServerUnavailable`, or the server's `MCPError`.
        """
        return await self._subscriptions.subscribe(uri, on_updated)

    @property
    def offers_resource_subscriptions(self) -> bool:
        """Whether the server, connected now, offers resource subscriptions."""
        return self._subscriptions.offered

    def apply_names(self, names: Mapping[str, str]) -> bool:
        """Offer the listed tools under `names` (original name -> model name); True if changed.

        For whoever resolves names across nodes (`McpToolkitGroup`), which then awaits
        `notify_tools_changed()`; a map that does not cover exactly the current listing is
        ignored in favour of naming this node alone.
        """
        if set(names) != set(self._listing):
            names = resolve_tool_names([self.node_tools])[self._name]
        named = (self._listing, dict(names))
        if named[0] is self._named[0] and named[1] == self._named[1]:
            return False  # another node's listing came: ours and its names are as they were
        for orig, was in self._named[1].items():
            if names.get(orig, was) != was:
                self._former[was] = orig
        self._named = named
        tools = tuple(self._to_tool(names[orig], tool) for orig, tool in self._listing.items())
        self._routes = invert(names)
        if tools == self._tools:
            return False
        self._tools = tools
        self._log.info("offering %d tools", len(tools))
        return True

    def now_named(self, name: str) -> str | None:
        """The name a tool this node offered as `name` has now, if it is offered under another
        (`prefix="auto"`/`"never"` names follow which servers are up); else None."""
        orig = self._former.get(name)
        if orig is None or name in self._routes:
            return None
        return self._named[1].get(orig)

    async def notify_tools_changed(self) -> None:
        """Run the `subscribe`d callbacks (a failing one is logged, not raised)."""
        await self._listeners["tools"].notify()

    async def _on_list_changed(self, kind: str) -> None:
        await self._listeners[kind].notify()

    async def _on_resource_updated(self, uri: str) -> None:
        await self._subscriptions.updated(uri)

    async def set_log_level(self, level: mcp_types.LoggingLevel) -> None:
        await self._log_level.set(level)

    async def _serve_connection(self, conn: Connection, client: Client) -> None:
        await self._log_level.serve(client)
        await self._subscriptions.serve(conn, client)

    async def refresh_tools(self) -> Sequence[Tool]:
        """List the server's tools again now (they are also refreshed on its change events)."""
        await self._adopt_listing(*await self._session.on_live(self._fetch_listing))()
        return self._tools

    async def _fetch_listing(
        self, conn: Connection
    ) -> tuple[list[mcp_types.Tool], mcp_types.ServerCapabilities]:
        assert conn.client is not None
        try:
            with anyio.fail_after(self._config.timeout):
                listing = await self._session.fetch_listing(conn.client)
                return listing, conn.client.server_capabilities
        except MCPError as exc:
            if closed_by_sdk(exc) or conn.lost is not None:
                raise self._unavailable(conn, "the connection closed while listing tools") from exc
            msg = f"MCP server {self._name!r} could not list its tools: {exc}"
            raise ServerUnavailable(msg, node=self._name) from exc
        except TimeoutError as exc:
            msg = f"MCP server {self._name!r} did not list its tools within {self._config.timeout:g} s"
            raise ServerUnavailable(msg, node=self._name) from exc
        except ValidationError as exc:
            msg = f"MCP server {self._name!r} sent a malformed tool list: {exc}"
            raise ServerUnavailable(msg, node=self._name) from exc

    def _to_tool(self, name: str, tool: mcp_types.Tool) -> Tool:
        annotations = (
            tool.annotations.model_dump(by_alias=True, exclude_none=True)
            if tool.annotations
            else {}
        )
        return Tool(
            name=name,
            description=tool.description or tool.title or "",
            input_schema=offered_schema(tool.input_schema, forward=self._config.forward_context),
            source_node=self._name,
            is_from_toolkit=True,
            original_name=tool.name,
            annotations=annotations,
            # A task-only tool is a plain call here: the node makes the task (`task_calls`).
            definition=tool.model_copy(
                update={"name": name, "execution": None}
                if tool.name in self._task_only
                else {"name": name}
            ),
        )

    def _take_listing(
        self, listing: Sequence[mcp_types.Tool], capabilities: mcp_types.ServerCapabilities
    ) -> Sequence[McpToolkit]:
        """Adopt a fresh listing (of a session with `capabilities`) and name it; returns the
        nodes whose offered tools changed."""
        offered: dict[str, mcp_types.Tool] = {}
        task_only: list[str] = []
        again: dict[str, int] = {}  # a name listed more than once: how many more times
        for tool in listing:
            if tool.name in offered:
                again[tool.name] = again.get(tool.name, 0) + 1
            elif not is_offered(tool.name, self._config.include, self._config.exclude):
                continue
            else:
                offered[tool.name] = tool
                if tool.execution is not None and tool.execution.task_support == "required":
                    task_only.append(tool.name)  # called as a task (`task_calls`)
        if again:
            self._warn_repeated(again)
        self._task_only = set(task_only)
        own = self._resource_tools.offer(offered, capabilities) if self._resource_tools else []
        offered.update((tool.name, tool) for tool in own)
        self._own = frozenset(tool.name for tool in own)
        self._not_plain = self._own | self._task_only
        self._unmatched.note([tool.name for tool in listing], offered)
        self._listing = offered
        if self._config.tool_timeouts:
            self._clocks = {name: self._config.clock_of(name) for name in offered}
        self._listed = True
        if self._resolve_names is not None:
            return self._resolve_names(self._name)
        return [self] if self.apply_names(resolve_tool_names([self.node_tools])[self._name]) else []

    def _warn_repeated(self, again: Mapping[str, int]) -> None:
        """One warning for a listing's repeated names, however many (a server whose pages
        repeat would warn of each tool on each page)."""
        names = ", ".join(f"{name!r} x{count + 1}" for name, count in list(again.items())[:5])
        more = f" and {len(again) - 5} more" if len(again) > 5 else ""
        self._log.warning(
            "the server lists %d tool name%s more than once (%s%s); keeping the first of each",
            len(again),
            "" if len(again) == 1 else "s",
            names,
            more,
        )

    def _adopt_listing(
        self, listing: Sequence[mcp_types.Tool], capabilities: mcp_types.ServerCapabilities
    ) -> Callable[[], Awaitable[None]]:
        changed = self._take_listing(listing, capabilities)

        async def announce() -> None:
            for node in changed:
                await node.notify_tools_changed()

        return announce

    # -- calls --------------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        context: CallContext | None = None,
    ) -> mcp_types.CallToolResult:
        """Call the tool the model knows as `name` on the live session, for the caller
        `context` describes (its progress, `_meta`, log messages and server requests): as raw
        JSON-RPC where the connection carries it (`raw_calls`), else through the SDK client.

        Raises `NoSuchTool`, `ServerUnavailable` (for any name too while the server's tools
        were never listed; `ConnectionLost` if the server died during the call; the node
        reconnects meanwhile) or `ToolTimeout`. Everything the server answers, errors
        included, comes back as the result.
        """
        original = self._routes.get(name)
        if original is None and not self._listed:
            # No listing yet to say the name is unknown: the server is not connected (or still
            # connecting). Wait for it as a known tool's call would, or say why it is not.
            await self._session.ready_connection()
            original = self._routes.get(name)
        if original is None:
            raise NoSuchTool(f"MCP server {self._name!r} has no tool named {name!r}")
        if self._config.forward_context:  # the calling run's context, filled in
            call = partial(self._call, name, original, context=context)
            tool = self._listing.get(original)
            return await with_context_forwarded(call, tool, arguments, context)
        return await self._call(name, original, arguments, context=context)

    async def _call(
        self,
        name: str,
        original: str,
        arguments: Mapping[str, Any],
        *,
        context: CallContext | None,
    ) -> mcp_types.CallToolResult:
        """`call_tool`'s call of the server's tool `original` (`name` to the model)."""
        if original in self._own:
            assert self._resource_tools is not None
            return await self._resource_tools.call(original, arguments, context)
        if original in self._task_only:
            conn = await self._session.ready_connection()
            clock = self._clocks.get(original, self._clock)
            return await self._tasks.call(conn, name, original, arguments, context, clock)
        forward = self._raw(name)
        if forward is not None:
            result = await call_for(forward, arguments, context)
            if result is not None:
                return result  # else it never reached the server: the SDK client's way
        conn = await self._session.ready_connection()
        assert conn.client is not None
        deadline = Deadline(*self._clocks.get(original, self._clock))
        with deadline.scope:
            on_progress = context.on_progress if context else None
            meta = context.meta if context else None
            tracked: InFlightCall | None = None
            try:
                with self._calls.track(context, deadline.waiting) as tracked:
                    # Always a callback, so the SDK asks for progress (a token of its own)
                    # whether or not the caller did: progress keeps the call's clock alive.
                    async with progress_in_order(on_progress, deadline.alive) as progress:
                        return await conn.client.call_tool(
                            original,
                            dict(arguments),
                            progress_callback=progress,
                            meta=cast(mcp_types.RequestParamsMeta, dict(meta)) if meta else None,
                        )
            except MCPError as exc:
                if tracked is not None and tracked.failed_authorization is not None:
                    raise tracked.failed_authorization from exc  # what the caller must do
                if conn.lost is not None or connection_failed(exc):
                    if conn.http is not None and await still_there(conn):
                        return error_result(cut_short(self._name, name))  # as `Forward`'s
                    raise self._unavailable(
                        conn, f"the connection closed during a call to {name!r}"
                    ) from exc
                if tracked is not None and tracked.refused == exc.error and _in_rounds(conn):
                    # A question of the rounds refused: the SDK client's end of the call, no
                    # error of the server's (`Forward.call` says it so too).
                    return error_result(error_text(exc.code, exc.message))
                if exc.message.startswith(SDK_TOO_LARGE):
                    return error_result(too_large(self._name, self._config.max_message_bytes))
                if (size := too_long_answer(exc.error)) is not None:  # a line (`long_lines`)
                    limit = self._config.max_message_bytes
                    return error_result(too_large(self._name, limit, size))
                if too_deep_answer(exc.error):  # the message says how deep (`stdio_pipe`)
                    return error_result(f"MCP server {self._name!r} sent {exc.message}")
                return protocol_error_result(exc.error)
            except ValidationError as exc:
                said = validation_brief(exc, "the result")
                return error_result(f"MCP server {self._name!r} sent a malformed result: {said}")
            except RuntimeError as exc:
                # The SDK raises these for a session that closed under the call (its check of a
                # result against the tool's output schema is off: `session._results_unchecked`).
                if tracked is not None and tracked.failed_authorization is not None:
                    raise tracked.failed_authorization from exc
                if conn.lost is not None:
                    raise self._unavailable(
                        conn, f"the connection closed during a call to {name!r}"
                    ) from exc
                return error_result(str(exc))
            except anyio.get_cancelled_exc_class():
                if tracked is not None:
                    await tracked.unwound()  # its client told of its questions withdrawn first
                raise

        raise timed_out(deadline, name, self._name)

    def _raw(self, name: str) -> Forward | None:
        """`forward(name)` for a call of the node's own, unless it goes through the SDK client:
        by choice (`raw_calls`), or while an auth flow is in play (the flow's step-ups, and
        when it gives up, are the SDK client's to tell)."""
        conn = self._session.live
        if not self.raw_calls or (
            conn is not None and conn.http is not None and conn.http.authorizing()
        ):
            return None
        return self.forward(name)

    def forward(self, name: str) -> Forward | None:
        """The tool the caller knows as `name`, to call as raw JSON-RPC on the live connection
        (`forward`); None when it cannot be: no live HTTP or stdio connection now, or no such
        tool."""
        original = self._routes.get(name)
        conn = self._session.live
        if original is None or conn is None or original in self._not_plain:
            return None  # no such tool, or not a plain `tools/call` of the server's
        return self._forwards.get(name, original, conn)

    def _unavailable(self, conn: Connection, what: str) -> ServerUnavailable:
        return connection_lost(self._name, conn, what)

    # -- running ------------------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the server's session until cancelled (see `OwnedSession.run`)."""
        await self._session.run(task_status=task_status)


def _in_rounds(conn: Connection) -> bool:
    """Whether the server asks its questions in input-required rounds (2026-07-28)."""
    return conn.client is not None and conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS
