"""The gateway as an MCP server: the SDK's low-level `Server` over our tool sources.

Sources are small objects that list MCP tools and answer calls to them: the agents
(`AgentTools`) and, in proxy mode, the exposed nodes' tools (`ProxiedTools`). With nodes
exposed that offer more (`toolkits.capabilities`: an MCP server's node offers it all), the
server also serves their resources, templates, prompts and completions
(`served/`), relays their servers' requests to its client during proxied calls
(`client_requests/`), their list changes and their servers' log messages outside calls to every
client (`notifications/`) and their resource
updates to the clients that subscribed (`served/resource_subscriptions`); each serving run owns
what that takes (`serving`). The server answers both protocol eras; transports (stdio, HTTP)
only carry it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache, partial
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp

from toolkits import (
    AsksCaller,
    FollowsChanges,
    HasCatalog,
    HasServerLogs,
    Toolkit,
    error_result,
)

from ..catalog import Routes, claim, same_objects
from ..config import GatewaySettings
from ..engine import Gateway
from ..loops import Stamps
from ..run_state import RunOrigin
from .client_requests.forwarding import Here, keep_wire_state
from .client_requests.run_rounds import state_boundary
from .connection import connection_of
from .notifications.log_messages import ServersLogLevel, set_level
from .openai_api import ChatCompletions
from .request_checks import readable_trace_context, request_checks
from .running_calls import RunningCalls, stopped_result
from .served.agent_tasks import AgentTasks
from .served.agents import AgentTools
from .served.handshake_sessions import HandshakeSessions
from .served.instructions import ServedInstructions
from .served.json_answers import JsonAnswers
from .served.offered import Offered
from .served.pass_through import PassThrough
from .served.pass_through_rounds import Rounds
from .served.passing import Passing
from .served.proxied_prompts import ProxiedPrompts, completions
from .served.proxied_resources import ProxiedResources
from .served.proxied_tools import ProxiedTools, exposed_nodes
from .served.resource_subscriptions import ResourceSubscribers
from .served.run_handles import RUN_TOOLS, RunHandles
from .served.stdio_shortcut import StdioShortcut
from .served.stored_runs import StoredAgentRuns
from .served.tool_list_cache import ToolListCache
from .serving import ServingNow, lifespan_for, register_connections
from .transports.auth import ScopePolicy, scope_guard

if TYPE_CHECKING:
    from ..durable import DurableRuns

__all__ = [
    "SERVER_NAME",
    "SERVER_VERSION",
    "ToolRouter",
    "ToolSource",
    "build_server",
    "init_options",
]

SERVER_NAME = "agent-gateway"


def _version() -> str:
    try:
        return version("agent-gateway")
    except PackageNotFoundError:
        return "0.0.0"


SERVER_VERSION = _version()


class ToolSource(Protocol):
    async def tools(self) -> list[types.Tool]:
        """The tools this source serves now."""
        ...

    def node_of(self, name: str) -> str | None:
        """The node (or agent) behind a tool of the last listing, for naming a conflict."""
        ...

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Answer a call to one of this source's tools (never raises for a failed call)."""
        ...


class ToolRouter:
    """Lists the sources' tools together and sends each call to the source that serves it.

    The first source wins a name two sources serve (agents come first); `check` refuses such
    a clash outright, for startup.
    """

    def __init__(
        self,
        sources: Sequence[ToolSource],
        why_missing: Callable[[str], str | None] | None = None,
        *,
        gateway_id: str,
        running: RunningCalls | None = None,
        served_name: Callable[[str], str | None] | None = None,
    ) -> None:
        """`why_missing` says why a name that no source lists may be missing (its server is
        down), better than that no such tool exists; `served_name` gives the name a proxied
        tool called by its server's own name is served under. Each tool is served with
        `gateway_id` added to the gateways it came through (`loops`). Calls run in `running`,
        which may end them (the server is stopping)."""
        self._sources = list(sources)
        self._running = running or RunningCalls()
        self._why_missing = why_missing
        self._served_name = served_name
        self._stamps = Stamps(gateway_id)
        self._routes = Routes[ToolSource](lambda: self._listing(strict=False))
        self._schemas: dict[str, dict[str, Any]] = {}
        self._listed: tuple[list[list[types.Tool]], list[types.Tool]] = ([], [])
        """The sources' last lists, and the tools served of them (the same while they are)."""

    async def check(self) -> None:
        """Raise `ToolConflict` if two sources serve a tool under the same name."""
        await self._listing(strict=True)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await self._listing(strict=False))

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        source = await self._routes.find(params.name)
        if source is None:
            served = self._served_name(params.name) if self._served_name is not None else None
            source = self._routes.get(served) if served is not None else None
            if source is None:
                said = self._why_missing(params.name) if self._why_missing is not None else None
                return error_result(said or self._routes.unknown(params.name, "tool"))
            params = params.model_copy(update={"name": served})
        return await self._running.answer(partial(source.call, ctx, params), _ended(params.name))

    async def current(self) -> list[types.Tool]:
        """The tools served now (each source's last listing)."""
        return await self._listing(strict=False)

    def served_by(self, name: str) -> ToolSource | None:
        """The source serving `name`, as last listed (no listing here)."""
        return self._routes.get(name)

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A served tool's input schema, from the last listing (None: not listed yet)."""
        return self._schemas.get(name)

    async def _listing(self, *, strict: bool) -> list[types.Tool]:
        each = [await source.tools() for source in self._sources]
        last, served = self._listed
        if not strict and same_objects(last, each):
            return served  # the sources give the same lists while their tools are the same
        routes: dict[str, ToolSource] = {}
        listed: list[types.Tool] = []
        remedy = "rename the agent or node" if strict else None
        for source, tools in zip(self._sources, each, strict=True):
            for tool in tools:
                node_of = _node_of(tool.name)
                if claim(routes, tool.name, source, node_of=node_of, what="tool", refuse=remedy):
                    listed.append(tool)
        self._routes.update(routes)
        self._schemas = {tool.name: tool.input_schema for tool in listed}
        listed = self._stamps.stamped(listed)
        self._listed = (each, listed)
        return listed


def _node_of(name: str) -> Callable[[ToolSource], str]:
    return lambda source: source.node_of(name) or "?"


def _ended(name: str) -> Callable[[str], types.CallToolResult]:
    """The answer to a call of `name` that the server ended, saying why."""
    return lambda why: stopped_result(name, why)


class _GatewayServer(Server[Any]):
    """The SDK's server, announcing the list changes it relays to handshake-era clients too,
    and prompts, resources, their subscriptions, completions and logging only as offered
    (`served.offered`: by the exposed servers as they are when a client connects or
    discovers, and the agents).

    Transports build the handshake's options with `create_initialization_options()` and no
    arguments, so the `listChanged` flags are defaulted here.
    """

    announces = NotificationOptions()
    offers_tasks = False
    """Agent calls may run as tasks (2025-11-25 connections; with a run store)."""
    scope_policy: ScopePolicy | None = None
    http_layers: Sequence[Callable[[ASGIApp], ASGIApp]] = ()
    """Over HTTP, in front of the SDK: shorter paths for requests that need less of it
    (`served.tool_list_cache`, `served.pass_through`), innermost first."""
    """What OAuth tokens may call, when scopes are configured (HTTP answers refusals with 403)."""
    stdio_shortcut: StdioShortcut | None = None
    """Over stdio, in front of the SDK: calls passed through, listings answered again
    (`served.stdio_shortcut`)."""
    here: Here | None = None
    """Where other replicas reach this one (`serve --http`): parked requests name it."""
    running: RunningCalls | None = None
    """The tool calls (and `tasks/result` requests) being answered."""
    openai_api: ChatCompletions | None = None
    """Over HTTP, at `/v1/`: the agents as an OpenAI-compatible API (`openai_api`)."""

    offered: Offered | None = None
    """What is offered besides tools, read at each handshake."""
    told: Callable[[], str | None] | None = None
    """What a client reads as `instructions` at its handshake, asked each time (they hold the
    exposed servers' own: `served.instructions`)."""

    @property
    def instructions(self) -> str | None:  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.told() if self.told is not None else None

    @instructions.setter
    def instructions(self, value: str | None) -> None:
        # The SDK's constructor sets it; the gateway's words come from `told`.
        pass

    def refuse_calls(self, why: str) -> None:
        """Answer every call that begins from now on with an error result saying `why`; those
        in flight go on (the server is stopping: `transports.draining`)."""
        if self.running is not None:
            self.running.refuse_new(why)

    def calls_in_flight(self) -> int:
        return self.running.in_flight if self.running is not None else 0

    async def calls_ended(self) -> None:
        """Return once no call is in flight."""
        if self.running is not None:
            await self.running.wait_ended()

    def end_calls(self, why: str) -> None:
        """Answer every call still running, and every one to come, with an error result
        saying `why` (the server is stopping: `transports.http`)."""
        if self.running is not None:
            self.running.end_all(why)

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(
            notification_options,
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if self.offers_tasks and protocol_version not in MODERN_PROTOCOL_VERSIONS:
            capabilities = capabilities.model_copy(update={"tasks": _TASKS})
        return self.offered.fit(capabilities) if self.offered is not None else capabilities

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or self.announces, experimental_capabilities, extensions
        )


def build_server(
    gateway: Gateway,
    settings: GatewaySettings,
    *,
    runs: DurableRuns | None = None,
    origin: RunOrigin | None = None,
) -> tuple[Server[Any], ToolRouter]:
    """The MCP server for `gateway`, and its router (to `check` before serving). With
    `runs` (a run store this process runs workflows in, `use`d with `gateway`), agent runs
    are stored, each with `origin` (how this process serves: resumed so), and `get_run`,
    `approve_run`, `deny_run`, `cancel_run` are served.

    Raises `ConfigError` for settings that cannot be served (an unknown exposed node, a bad
    state key).
    """
    running = RunningCalls()
    stored = StoredAgentRuns(runs, origin, running=running) if runs is not None else None
    agents = AgentTools(
        gateway,
        sampling_max_tokens=settings.sampling_max_tokens,
        progress_interval=settings.progress_interval,
        stored=stored,
    )
    sources: list[ToolSource] = [agents]
    if stored is not None:
        sources.append(RunHandles(stored, progress_interval=settings.progress_interval))
    nodes = exposed_nodes(gateway, expose_all=settings.expose_tools, names=settings.expose)
    proxied = ProxiedTools(gateway, nodes) if nodes else None
    if proxied is not None:
        sources.append(proxied)
    why_missing = proxied.why_missing if proxied is not None else None
    router = ToolRouter(
        sources,
        why_missing,
        gateway_id=gateway.gateway_id,
        running=running,
        served_name=proxied.served_name if proxied is not None else None,
    )
    server = _GatewayServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        on_list_tools=router.list_tools,
        on_call_tool=router.call_tool,
        # For 2026-07-28 HTTP calls: checks Mcp-Param headers without a tools/list per call.
        get_tool_input_schema=router.input_schema,
    )
    # Registered directly: the constructor's on_set_logging_level warns (logging is
    # deprecated at 2026-07-28), but handshake-era clients still set a level before logs.
    set_log_level = partial(_set_log_level, ServersLogLevel(gateway.nodes.values()))
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_log_level)
    server.here = Here()
    server.running = running
    exposed = [gateway.nodes[name] for name in nodes]
    catalogs = [node for node in exposed if isinstance(node, HasCatalog)]
    server.offered = Offered(agents=bool(gateway.agents), nodes=catalogs)
    # Before the SDK's own (OpenTelemetry), which fails on a trace key that is no string.
    server.middleware.insert(0, readable_trace_context)
    server.middleware.append(request_checks(server))
    # What is not offered now is no method here, as it is none of the server's directly.
    server.middleware.append(server.offered.middleware)
    # Before the boundary, which replaces the sealed state a retry sent on must carry.
    server.middleware.append(keep_wire_state)
    boundary = state_boundary(SERVER_NAME, settings.state_key_env)
    server.middleware.append(boundary)
    if settings.oauth is not None and settings.oauth.scopes:
        run_tools = frozenset(RUN_TOOLS if stored is not None else ())
        server.scope_policy = ScopePolicy(settings.oauth, gateway, run_tools)
        guard = scope_guard(server.scope_policy, lambda: server.server_info_stamp)
        server.middleware.append(guard)
    server.openai_api = ChatCompletions(
        gateway,
        running=running,
        stored=stored,
        policy=server.scope_policy,
        required_scopes=settings.oauth.required_scopes if settings.oauth is not None else (),
        max_request_bytes=settings.max_request_bytes,
        keep_alive=settings.progress_interval,
    )
    now = ServingNow()
    server.told = ServedInstructions(
        agents=bool(gateway.agents), exposed=bool(exposed), nodes=catalogs
    )
    _serve_node_capabilities(server, exposed, now, settings.contended_round_timeout)
    rounds = Rounds(now, boundary)
    server.http_layers = _shortcuts(
        server, gateway, settings, router, proxied, rounds, now, running
    )
    if stored is not None:
        _serve_tasks(server, AgentTasks(agents, stored, running))
    return server, router


_TASKS = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
    ),
)


def _serve_tasks(server: _GatewayServer, tasks: AgentTasks) -> None:
    """Agent calls as tasks, for 2025-11-25 clients that ask (`served/agent_tasks`)."""
    server.offers_tasks = True
    server.middleware.append(tasks.middleware)
    add = server.add_request_handler
    add("tasks/get", types.GetTaskRequestParams, tasks.get)
    add("tasks/result", types.GetTaskPayloadRequestParams, tasks.result)
    add("tasks/cancel", types.CancelTaskRequestParams, tasks.cancel)
    add("tasks/list", types.PaginatedRequestParams, tasks.list)


def reachable_at(server: Server[Any], url: str) -> None:
    """Say where other replicas reach `server` (the requests it parks name it)."""
    here = getattr(server, "here", None)
    if isinstance(here, Here):
        here.url = url


def _shortcuts(
    server: _GatewayServer,
    gateway: Gateway,
    settings: GatewaySettings,
    router: ToolRouter,
    proxied: ProxiedTools | None,
    rounds: Rounds,
    now: ServingNow,
    running: RunningCalls,
) -> list[Callable[[ASGIApp], ASGIApp]]:
    """The HTTP layers in front of the SDK; the stdio shortcut is set on `server`."""
    if settings.oauth is not None:  # what a client may see and call depends on its scopes
        return [JsonAnswers]
    sessions = HandshakeSessions()
    server.middleware.append(sessions.track)
    layers: list[Callable[[ASGIApp], ASGIApp]] = [
        partial(JsonAnswers, sessions=sessions),
        sessions.watch_deletes,
        partial(ToolListCache, list_tools=router.current, sessions=sessions),
    ]
    passing: Passing | None = None
    if proxied is not None and settings.pass_through and not gateway.hooks:
        # One copy for every answer (the SDK deep-copies it per access, ~10 us a call): the
        # server's identity is fixed once read, and the answers only serialize it.
        stamp: Callable[[], dict[str, Any]] = cache(lambda: server.server_info_stamp)
        passing = Passing(
            gateway=gateway,
            tools=proxied,
            served_by=router.served_by,
            stamp=stamp,
            rounds=rounds,
            now=now,
            running=running,
        )
        layers.append(partial(PassThrough, passing=passing, sessions=sessions))
    server.stdio_shortcut = StdioShortcut(sessions, now, router.current, passing)
    return layers


def _serve_node_capabilities(
    server: _GatewayServer, exposed: list[Toolkit], now: ServingNow, yield_after: float
) -> None:
    """Serve what the exposed nodes offer besides tools: a serving run (told to `now` while
    it runs) for their calls that ask our client (`yield_after`: `contended_round_timeout`)
    and for their changes, their resources, prompts and completions."""
    asking = [node for node in exposed if isinstance(node, AsksCaller) and node.asks_caller]
    following = [node for node in exposed if isinstance(node, FollowsChanges)]
    catalogs = [node for node in exposed if isinstance(node, HasCatalog)]
    logging_nodes = [node for node in exposed if isinstance(node, HasServerLogs)]
    # In every configuration: each client's share of the nodes (`max_concurrency`) lives in
    # the run, for agents' calls and for exposed tools that neither ask nor change.
    server.lifespan = lifespan_for(following, now, logging_nodes, yield_after)
    if not (asking or following or catalogs):
        return
    if following:
        server.announces = NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
    if catalogs:
        _serve_catalogs(server, catalogs)
    server.middleware.append(register_connections)


def _serve_catalogs(server: _GatewayServer, nodes: Sequence[HasCatalog]) -> None:
    """Serve the nodes' resources, templates, prompts, completions and subscriptions."""
    resources = ProxiedResources(nodes)
    prompts = ProxiedPrompts(nodes)
    add = server.add_request_handler
    add("resources/list", types.PaginatedRequestParams, resources.list_resources)
    add("resources/templates/list", types.PaginatedRequestParams, resources.list_templates)
    add("resources/read", types.ReadResourceRequestParams, resources.read)
    add("prompts/list", types.PaginatedRequestParams, prompts.list_prompts)
    add("prompts/get", types.GetPromptRequestParams, prompts.get_prompt)
    add("completion/complete", types.CompleteRequestParams, completions(prompts, resources))
    subscribers = ResourceSubscribers(resources)
    add("resources/subscribe", types.SubscribeRequestParams, subscribers.subscribe)
    add("resources/unsubscribe", types.UnsubscribeRequestParams, subscribers.unsubscribe)
    add("subscriptions/listen", types.SubscriptionsListenRequestParams, subscribers.listen)


def init_options(server: Server[Any]) -> InitializationOptions:
    return server.create_initialization_options()


async def _set_log_level(
    servers: ServersLogLevel,
    ctx: ServerRequestContext[Any, Any],
    params: types.SetLevelRequestParams,
) -> types.EmptyResult:
    # Per connection: one client's level is no other's (`notifications.log_messages`).
    connection = connection_of(ctx)
    if connection is not None:
        set_level(connection, params.level)
        await servers.asked(params.level)
    return types.EmptyResult()
