"""Exceptions raised by the toolkits package.

    ToolkitError                   base: a node could not serve a call
    ├── ServerConfigError          a server's configuration cannot be used (bad file, unset env var)
    ├── NoSuchTool                 the node offers no tool under that name
    ├── NotOffered                 the node's server does not offer that (e.g. resource subscriptions)
    ├── ServerUnavailable          the node's server is not connected (starting, failed, restarting)
    │   ├── ConnectionLost         the connection ended while the call was in flight
    │   │   └── NodeStopped        ... because the node is being stopped (or is not running)
    │   ├── AuthorizationRequired  the server wants an OAuth authorization nobody gave yet
    │   └── AuthorizationServerFailed  its authorization server failed a token refresh (kept)
    └── ToolTimeout                no result within the timeout (or the absolute cap)

Failures *of a tool* (bad arguments, the tool's own errors, protocol errors the server answers
with) are not exceptions: they come back as a `CallToolResult` with `is_error=True`, like every
other tool outcome. Messages are written for a model to read: a gateway may pass `str(exc)` on
as the observation (`toolkits.base.error_result(str(exc))`), except `NodeStopped`: that call
had no outcome, its caller is going away too.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

__all__ = [
    "LOGIN_COMMAND",
    "AuthorizationRequired",
    "AuthorizationServerFailed",
    "ConnectionLost",
    "NoSuchTool",
    "NodeStopped",
    "NotOffered",
    "ServerConfigError",
    "ServerUnavailable",
    "ToolTimeout",
    "ToolkitError",
    "find_error",
]


class ToolkitError(Exception):
    """Base of every error the toolkits package raises."""


class ServerConfigError(ToolkitError):
    """A server's configuration cannot be used."""


class NoSuchTool(ToolkitError):
    """The node offers no tool under that name (the message names both)."""


class _OfNode(ToolkitError):
    """An error about one node (`node`), whatever its class's own arguments."""

    def __init__(self, message: str, *, node: str) -> None:
        super().__init__(message)
        self.node = node

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its message and node: a run store records a failed step's error so, and
        # the default (the class called with `args`) misses a keyword-only `node`.
        return (_rebuilt, (type(self), str(self), self.node))


def _rebuilt(kind: type[_OfNode], message: str, node: str) -> _OfNode:
    error = kind.__new__(kind)
    _OfNode.__init__(error, message, node=node)
    return error


class NotOffered(_OfNode):
    """The node's server does not offer what was asked of it (the message says what)."""


class ServerUnavailable(_OfNode):
    """The node's server is not connected, so the call was not made (or not finished)."""


class ConnectionLost(ServerUnavailable):
    """The connection ended while the call was in flight: the server went away (the node is
    reconnecting), or the node is shutting down."""


RECONNECTING = "; reconnecting"
"""How a `ConnectionLost` ends when its node reconnects: a one-shot command, which does not
stay to, leaves it out."""


class NodeStopped(ConnectionLost):
    """The node was stopped under the call (its owner is shutting down), or is not running:
    the call has no outcome, and whatever made it is being stopped as well (an agent run
    must not take this for the tool's answer)."""


LOGIN_COMMAND = "agent-gateway auth login {node}"
"""What a person runs to authorise the gateway at a server (named in `AuthorizationRequired`)."""


class AuthorizationRequired(ServerUnavailable):
    """The server asked for an authorization this process may not start on its own."""

    def __init__(self, node: str, *, why: str = "needs authorisation", login: bool = True) -> None:
        """`login`: whether `auth login` is the remedy (named in the message); not for an
        authorization server that refused what was asked of it."""
        command = LOGIN_COMMAND.format(node=node)
        then = f": run `{command}`" if login else ""
        super().__init__(f"MCP server {node!r} {why}{then}", node=node)


class AuthorizationServerFailed(ServerUnavailable):
    """The server's authorization server did not refresh the node's token and did not say the
    grant is over (a 5xx, another refusal): the stored tokens are kept, and the refresh is tried
    again when the node reconnects."""


class ToolTimeout(ToolkitError):
    """The tool gave no result within its timeout; the call was cancelled at the server."""

    def __init__(self, message: str, *, node: str, tool: str, seconds: float) -> None:
        super().__init__(message)
        self.node = node
        self.tool = tool
        self.seconds = seconds


E = TypeVar("E", bound=BaseException)


def find_error(exc: BaseException, kind: type[E]) -> E | None:
    """The first `kind` in `exc`, looking through groups (task groups wrap errors) and causes."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        if isinstance(current, BaseExceptionGroup):
            stack.extend(cast(BaseExceptionGroup[BaseException], current).exceptions)
        stack += [linked for linked in (current.__cause__, current.__context__) if linked]
    return None
