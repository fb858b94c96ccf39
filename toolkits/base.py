"""The node contract: a named node that lists tools and calls them (`Toolkit`).

A node's tools carry `source_node` (the node that runs them) and `is_from_toolkit` (a node of
many tools, told which one by name, rather than a node that is its one tool). Results are MCP
`CallToolResult`s whatever the source, so every content kind survives for relaying.

What a caller gives one call besides its arguments travels in a `CallContext`: where progress
goes, the request's `_meta`, where the server's log messages go, and who answers the requests
a server sends its client mid-call (sampling, elicitation, roots), and who and what the call
is for (`CallInfo`, for local tools). Nodes that cannot report or ask ignore what they do not
use. What only some nodes offer (health, prompts and resources,
change notifications) is in `capabilities`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from mcp_types import (
    CallToolResult,
    ErrorData,
    InputRequest,
    InputResponse,
    LoggingMessageNotificationParams,
    TextContent,
)
from mcp_types import Tool as McpTool
from pydantic import ValidationError

__all__ = [
    "CallContext",
    "CallInfo",
    "ElicitationCompleteHandler",
    "ProgressCallback",
    "ServerLogHandler",
    "ServerRequestHandler",
    "Tool",
    "Toolkit",
    "error_result",
    "validation_brief",
]

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]
"""Receives (progress, total, message) while a tool runs."""

ServerRequestHandler = Callable[[InputRequest], Awaitable[InputResponse | ErrorData]]
"""Answers one request a server sent its client during a call; an `ErrorData` refuses it."""

ServerLogHandler = Callable[[LoggingMessageNotificationParams], Awaitable[None]]
"""Takes one log message a server sent during a call."""

ElicitationCompleteHandler = Callable[[str], Awaitable[None]]
"""Told the id of a URL-mode elicitation its caller was asked during the call, which the server
says is complete (`notifications/elicitation/complete`, 2025-11-25)."""


@dataclass(frozen=True, slots=True)
class CallInfo:
    """Who and what one call is for, as plain data its caller fills (the gateway: a run's
    agent, or an MCP client's proxied call). A local function tool gets it in a parameter
    annotated `CallInfo`, which is not one of the tool's arguments (`function`)."""

    run_id: str | None = None
    """The run the call is made in; None for an MCP client's own call of the tool."""
    agent: str | None = None
    """The agent that called it (a sub-agent's name inside an agent run as a tool)."""
    session_id: str | None = None
    """The chat memory session of the item the call is for, if any."""
    subject: str | None = None
    """Who asked: the authenticated subject of the MCP client (served with OAuth or tokens)."""
    context: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """The run's context (a JSON object its caller gave), for the call's item: `{}` if none."""
    tool_call_id: str | None = None
    """The model's id of this call."""
    item: int | None = None
    """The run's item the call is for (0 for a run of one question)."""


@dataclass(frozen=True, slots=True)
class CallContext:
    """What the caller of one call gives it besides its arguments (all optional)."""

    on_progress: ProgressCallback | None = None
    meta: Mapping[str, Any] | None = None
    """For the MCP request's `_meta` (e.g. the hop count that stops gateways calling each
    other forever); nodes that are not MCP clients ignore it."""
    on_log: ServerLogHandler | None = None
    """Where the log messages the server sends during the call go."""
    answer: ServerRequestHandler | None = None
    """Who answers the requests the server sends its client during the call; without it they
    are refused."""
    owner: object | None = None
    """Calls with one owner (one upstream client connection, one run) may answer each other's
    requests and hear each other's log messages where the transport does not say which call
    they belong to; None: the call is its own owner."""
    answerable: Mapping[str, Any] | None = None
    """Which of the server's requests `answer` takes, as the client capabilities an MCP client
    declares for them (`sampling`, `elicitation`, `roots`; wire JSON, e.g. `{"elicitation":
    {"form": {}}}`); None: all that a node declares. A 2026-07-28 node tells its server, per
    call, only these (none without `answer`)."""
    on_elicitation_complete: ElicitationCompleteHandler | None = None
    """Where the server's word that a URL-mode elicitation put to `answer` is complete goes,
    while the call is in flight (after, and for other calls' elicitations, it goes nowhere)."""
    yield_after: float | None = None
    """Seconds a question of the server that `answer` is answering may hold up another caller's
    question on the same node, where the transport does not say which call that one belongs
    to (`mcp.server_requests`); past them it is refused for it. For callers that cannot say
    they gave up (a 2026-07-28 client between rounds); None: it waits as long as `answer`."""
    info: CallInfo | None = None
    """Who and what the call is for, for the nodes that tell their tools (local functions);
    MCP servers are not sent it (but as the `context` argument of a trusted server's tools
    that take one: `forward_context`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool offered by a node, under the name the model will see."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    source_node: str
    is_from_toolkit: bool
    original_name: str | None = None
    """The name at the source (an MCP server's own tool name) when it differs from `name`."""
    annotations: Mapping[str, Any] = field(default_factory=dict[str, Any])
    definition: McpTool | None = None
    """The source's own MCP definition under `name` (title, output schema, icons, `_meta`),
    for relaying the tool as its server defines it; None for tools that have none."""


@runtime_checkable
class Toolkit(Protocol):
    """A node that provides tools. Implementations must be safe to call concurrently."""

    @property
    def name(self) -> str:
        """The node name other config refers to (e.g. an agent's `tools = [...]`)."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """The tools this node offers now."""
        ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        context: CallContext | None = None,
    ) -> CallToolResult:
        """Call the tool the model knows as `name`, for the caller `context` describes.

        Tool failures come back as a result with `is_error=True`; an exception means the node
        itself could not serve the call (dead server, unknown tool name): a `ToolkitError`.
        """
        ...


def error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def validation_brief(exc: ValidationError, whole: str = "the value") -> str:
    """What pydantic found wrong, one `place: problem` per fault on one line (its own text is
    several lines with a link, not for a model or a log line)."""
    faults = [
        f"{'.'.join(str(part) for part in err['loc']) or whole}: {err['msg']}"
        for err in exc.errors()[:_FAULTS_SAID]
    ]
    more = len(exc.errors()) - _FAULTS_SAID
    return "; ".join(faults) + (f"; and {more} more" if more > 0 else "")


_FAULTS_SAID = 5
