"""How one MCP server is configured: Claude Desktop's `mcpServers` entry plus our own keys.

An entry copied from Claude Desktop's `claude_desktop_config.json` validates unchanged:

    {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {...}}
    {"type": "http", "url": "https://example.com/mcp", "headers": {"X-Team": "a"}}

Our keys sit beside those (`prefix`, `include`, `exclude`, `timeout`, `max_timeout`,
`tool_timeouts`, `max_output`, `max_sampling`, `resource_tools`, `forward_context`, `protocol`,
`bearer_token_env`, `secret_headers`, `url_secrets`, and the `oauth*` keys of MCP
authorization). Secrets never live in the model's repr: `env`, `headers` and `url_secrets` are
hidden, and a bearer token is read from the environment only when connecting.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..capabilities import CallRules
from ..errors import ServerConfigError

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_MAX_SAMPLING",
    "DEFAULT_TIMEOUT",
    "McpServerConfig",
    "PrefixPolicy",
    "ProtocolMode",
    "TokenEndpointAuth",
    "TransportKind",
    "load_mcp_servers",
    "secret_from_env",
]

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT = 100_000
DEFAULT_MAX_SAMPLING = 10
"""Sampling requests an agent's model answers for one call of a server's tool: a few are
what servers that sample need; each one costs a model call."""
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

PrefixPolicy = Literal["always", "never", "auto"]
"""`always`: `server__tool`; `never`: the bare name; `auto`: prefixed only on a cross-node clash."""

ProtocolMode = Literal["auto", "legacy", "modern"]
"""`auto` prefers the 2025-11-25 handshake (a server can then ask its client during a call)
and probes 2026-07-28 when the server refuses it; `legacy` forces the handshake;
`modern` speaks 2026-07-28 without probing."""

TransportKind = Literal["stdio", "http", "sse"]

TokenEndpointAuth = Literal["none", "client_secret_basic", "client_secret_post"]
"""How the client authenticates at the authorization server's token endpoint."""

_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, strict=True)]
"""A number of seconds: positive and finite (not `true`, not "120")."""


class McpServerConfig(BaseModel):
    """One MCP server: how to reach it and how its tools are offered."""

    # No NaN or infinity (TOML's `nan`, `inf`): each float is a number of seconds.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # Claude Desktop's keys.
    command: str | None = None
    """stdio: the executable to start."""
    args: list[str] = Field(default_factory=list[str])
    """stdio: its arguments."""
    env: dict[str, str] = Field(default_factory=dict[str, str], repr=False)
    """stdio: extra environment variables, over a minimal safe inherited set (PATH, HOME, ...)."""
    cwd: str | None = None
    """stdio: the working directory."""
    transport: Literal["stdio", "http", "streamable-http", "sse"] | None = None
    """Also accepted as `type` (Claude Desktop's name). Default: stdio with `command`, http with `url`."""
    url: str | None = None
    """http/sse: the endpoint, e.g. `http://127.0.0.1:3001/mcp`."""
    headers: dict[str, str] = Field(default_factory=dict[str, str], repr=False)
    """http/sse: extra request headers."""
    secret_headers: list[str] = Field(default_factory=list[str])
    """http/sse: headers whose values are secrets, shown `***` in text made of the server's
    answers, as the Authorization value always is (a config file marks each with a `${VAR}`)."""
    url_secrets: list[str] = Field(default_factory=list[str], repr=False)
    """http/sse: parts of `url` that are secrets (a key in its path), shown `***` as the
    secret headers are, and in log lines (a config file puts each `${VAR}`'s value in `url`
    here). Only adds to what is masked: a path segment that looks like a key, the URL's
    password and its query's credentials are masked without it (`sent_credentials`)."""

    # Ours.
    prefix: PrefixPolicy = "always"
    include: list[str] | None = None
    """fnmatch globs on the server's own tool names; only matching tools are offered."""
    exclude: list[str] = Field(default_factory=list[str])
    """fnmatch globs on the server's own tool names; matching tools are never offered."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    """Seconds a call may go without a result or a progress notification."""
    connect_timeout: float | None = Field(default=None, gt=0)
    """Seconds to start the server and have its handshake and tool list. Default: `timeout`."""
    max_timeout: float | None = Field(default=None, gt=0)
    """Absolute cap on one call, however much progress arrives. Default: 10 x `timeout`."""
    tool_timeouts: dict[str, _Seconds] = Field(default_factory=dict[str, float])
    """`timeout` for these tools instead of the server's: keys are the server's own tool names
    or fnmatch globs on them (an exact name first, else the first glob that matches, in the
    order written). Such a tool's cap is `max_timeout`, else 10 x its own timeout."""
    max_output: int = Field(default=DEFAULT_MAX_OUTPUT, gt=0)
    """Characters of observation text the agent reads from one result (the result itself is kept)."""
    max_sampling: int = Field(default=DEFAULT_MAX_SAMPLING, ge=0)
    """Sampling requests (`sampling/createMessage`) an agent's model answers during one call
    of this server's tools; the server's further requests in that call are refused."""
    resource_tools: bool = False
    """Offer the model two tools of this node's besides the server's: `list_resources` (its
    resources and resource templates) and `read_resource(uri)` (`resource_tools`)."""
    forward_context: bool = False
    """Fill the `context` object argument of this server's tools that take one (an agent
    served by another agent-gateway) from the calling run's context, hidden from the model
    (`context_argument`). Off by default: the context may hold what only a trusted server
    should see."""
    max_message_bytes: int = Field(default=DEFAULT_MAX_MESSAGE_BYTES, gt=0)
    """http: the largest answer taken from the server, a server-sent event (how it streams a
    result with progress) or a JSON body (how a 2026-07-28 server answers); a larger one fails
    that call only, unread. (The SDK client's own requests, the handshake, listings and calls
    during an authorization flow, take a JSON body whole.) stdio: the longest line taken from
    its stdout; a longer one is dropped unread, with a warning (a call it answers fails by
    its timeout)."""
    sse_idle_timeout: float | None = Field(default=None, gt=0)
    """sse: seconds the event stream may stay quiet (no event, no keep-alive) before the
    connection is made again. Default: no limit, as a server that sends no keep-alive is quiet
    while nobody calls it (a server host that is gone is noticed by TCP keep-alive)."""
    protocol: ProtocolMode = "auto"
    max_concurrency: int | None = Field(default=None, ge=1)
    """Calls this server takes at once, from all clients together (None: the gateway's default)."""
    require_approval: bool | list[str] = False
    """The gateway asks a person before calling these tools: all (`true`), or fnmatch globs on
    the server's own tool names (`SERVER__TOOL` and the name offered to models match too)."""
    require_approval_if_destructive: bool = False
    """The gateway asks a person before calling a tool this server marks `destructiveHint`."""
    bearer_token_env: str | None = None
    """http/sse: name of the environment variable holding a bearer token for `Authorization`."""
    oauth: bool = True
    """http/sse: answer a 401 from the server with the MCP authorization flow (OAuth 2.1)."""
    oauth_client_id: str | None = None
    """A client registered with the authorization server beforehand (else: a client ID
    metadata document, or dynamic registration)."""
    oauth_client_secret_env: str | None = None
    """The environment variable holding that client's secret."""
    oauth_token_auth: TokenEndpointAuth | None = None
    """Token endpoint authentication. Default: `client_secret_basic` for a client with a
    secret, `none` otherwise (also what a dynamically registered client asks for)."""
    oauth_client_metadata_url: str | None = None
    """An HTTPS URL serving this client's metadata document, used as its client ID where the
    authorization server supports client ID metadata documents."""
    oauth_callback_port: int | None = Field(default=None, ge=1, le=65535)
    """The loopback port receiving the authorization (`http://127.0.0.1:PORT/callback`); set
    it when a pre-registered client's redirect URI names one. Default: any free port."""

    @model_validator(mode="before")
    @classmethod
    def _accept_type_key(cls, data: object) -> object:
        # Claude Desktop spells it `type`; we keep one field and refuse contradictions.
        if not isinstance(data, Mapping):
            return data
        fields = {str(k): v for k, v in cast(Mapping[Any, Any], data).items()}
        if "type" in fields:
            kind = fields.pop("type")
            if "transport" in fields and fields["transport"] != kind:
                raise ValueError(
                    f"`type` ({kind!r}) and `transport` ({fields['transport']!r}) disagree"
                )
            fields["transport"] = kind
        return fields

    @model_validator(mode="after")
    def _check_transport(self) -> McpServerConfig:
        kind = self.kind
        if self.transport is None and bool(self.command) == bool(self.url):
            # The transport is told by which of the two is given: neither, or both, says none.
            either = "`command` (a stdio server) or `url` (an HTTP server)"
            if self.command:
                raise ValueError(f"give {either}, not both")
            raise ValueError(f"a server needs {either}")
        if kind == "stdio":
            if not self.command:
                raise ValueError("a stdio server needs `command`")
            misplaced = [
                k
                for k in ("url", "headers", "secret_headers", "url_secrets", "bearer_token_env")
                if getattr(self, k)
            ]
            misplaced += [k for k in _OAUTH_KEYS if getattr(self, k) is not None]
        else:
            if not self.url:
                raise ValueError(f"an {kind} server needs `url`")
            _check_url(self.url)
            misplaced = [k for k in ("command", "args", "env", "cwd") if getattr(self, k)]
        if kind != "sse" and self.sse_idle_timeout is not None:
            misplaced.append("sse_idle_timeout")
        if misplaced:
            keys = ", ".join(map(repr, misplaced))
            verb = "does" if len(misplaced) == 1 else "do"
            article = "a" if kind == "stdio" else "an"
            raise ValueError(f"{keys} {verb} not apply to {article} {kind} server")
        given = {name.lower() for name in self.headers}
        if unknown := [name for name in self.secret_headers if name.lower() not in given]:
            raise ValueError(
                f"`secret_headers` names {', '.join(map(repr, unknown))}, not in `headers`"
            )
        if self.oauth_client_secret_env is not None and self.oauth_client_id is None:
            raise ValueError("`oauth_client_secret_env` needs `oauth_client_id`")
        if (
            self.oauth_token_auth in ("client_secret_basic", "client_secret_post")
            and self.oauth_client_id is not None
            and self.oauth_client_secret_env is None
        ):
            raise ValueError(
                f"`oauth_token_auth = {self.oauth_token_auth!r}` needs `oauth_client_secret_env`"
            )
        if self.max_timeout is not None and self.max_timeout < self.timeout:
            raise ValueError("`max_timeout` must not be shorter than `timeout`")
        if self.max_timeout is not None and (
            longer := [k for k, v in self.tool_timeouts.items() if v > self.max_timeout]
        ):
            raise ValueError(
                f"`tool_timeouts` {', '.join(map(repr, longer))}: longer than `max_timeout` "
                f"({self.max_timeout:g} s), which caps every call"
            )
        return self

    @property
    def kind(self) -> TransportKind:
        """The transport, normalised: `streamable-http` is `http`."""
        if self.transport is None:
            return "http" if self.url and not self.command else "stdio"
        return "http" if self.transport == "streamable-http" else self.transport

    @property
    def call_rules(self) -> CallRules:
        """`max_concurrency` and the approval keys, which the gateway applies (`HasCallRules`)."""
        return CallRules(
            self.max_concurrency, self.require_approval, self.require_approval_if_destructive
        )

    @property
    def call_cap(self) -> float:
        """The absolute cap on one call, in seconds."""
        return self.max_timeout if self.max_timeout is not None else 10 * self.timeout

    def clock_of(self, tool: str) -> tuple[float, float]:
        """The idle timeout and the absolute cap of a call of `tool` (the server's own name),
        in seconds: its `tool_timeouts` entry's, else the server's."""
        timeout = self.tool_timeouts.get(tool)
        if timeout is None:
            matching = (t for glob, t in self.tool_timeouts.items() if fnmatchcase(tool, glob))
            timeout = next(matching, None)
        if timeout is None:
            return self.timeout, self.call_cap
        return timeout, self.max_timeout if self.max_timeout is not None else 10 * timeout


def _check_url(url: str) -> None:
    """Refuse a `url` the HTTP client could not connect to (`127.0.0.1:3001/mcp`: no scheme)
    now, not at the first connection as `UnsupportedProtocol`."""
    parts = urlsplit(url)
    if parts.scheme.lower() in ("http", "https") and parts.hostname:
        return
    # Shown without what may be a secret: user info, query, fragment.
    shown = url.split("?")[0].split("#")[0].rpartition("@")[2]
    raise ValueError(f"`url` must be an http(s) URL like http://127.0.0.1:3001/mcp, not {shown!r}")


_OAUTH_KEYS = (
    "oauth_client_id",
    "oauth_client_secret_env",
    "oauth_token_auth",
    "oauth_client_metadata_url",
    "oauth_callback_port",
)


class _ClaudeDesktopFile(BaseModel):
    # The real file carries other top-level settings; only `mcpServers` is ours to read.
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, McpServerConfig] = Field(default_factory=dict[str, McpServerConfig])


def load_mcp_servers(source: Mapping[str, Any] | str | Path) -> dict[str, McpServerConfig]:
    """Read the servers of a Claude Desktop style config: `{"mcpServers": {name: entry}}`.

    `source` is the parsed JSON, JSON text (a `str`), or the file's `pathlib.Path`. Raises
    `ServerConfigError` naming the server and key at fault.
    """
    data: Any
    try:
        if isinstance(source, Path):
            data = json.loads(source.read_text(encoding="utf-8"))
        elif isinstance(source, str):
            _refuse_file_name(source)
            data = json.loads(source)
        else:
            data = source
        return dict(_ClaudeDesktopFile.model_validate(data).mcpServers)
    except OSError as exc:
        raise ServerConfigError(f"cannot read MCP server config: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ServerConfigError(f"MCP server config is not valid JSON: {exc}") from exc
    except ValidationError as exc:
        raise ServerConfigError(f"invalid MCP server config: {_describe(exc)}") from exc


def _refuse_file_name(text: str) -> None:
    """A file's name given as text: say how to pass a file, not that it is not JSON."""
    stripped = text.strip()
    if stripped.startswith(("{", "[")) or "\n" in stripped:
        return
    try:
        names_a_file = Path(stripped).is_file()
    except (OSError, ValueError):  # too long a name, or a NUL in it: not a path either
        names_a_file = False
    if names_a_file or stripped.lower().endswith(".json"):
        raise ServerConfigError(
            f"MCP server config {stripped!r} looks like a file name, but a str is JSON text; "
            "pass a pathlib.Path for a file"
        )


def secret_from_env(variable: str, what: str) -> str:
    """The secret in environment variable `variable`; `ServerConfigError` naming `what` if unset."""
    value = os.environ.get(variable)
    if not value:
        raise ServerConfigError(f"environment variable {variable!r} ({what}) is not set")
    return value


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
    )
