"""The `[gateway]` table: settings of the gateway itself (serving, limits, memory, OAuth).

Its models are strict, as every table of the config is (`Strict`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .limits import DEFAULT_CLIENT_LIMIT
from .memory_config import MemoryConfig
from .resource_server import ResourceServerSettings

__all__ = ["GatewaySettings", "Strict"]


class Strict(BaseModel):
    # No NaN or infinity (TOML has `nan` and `inf`, Python's JSON reader `NaN`): a float
    # setting is a number of seconds or a bound, and `extra_body` goes out as JSON, which
    # has neither (every request of the agent failed on it).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class GatewaySettings(Strict):
    max_concurrency: int = Field(default=DEFAULT_CLIENT_LIMIT, ge=1)
    """Tool calls one client (an MCP client's connection, or a run from the command line) may
    have in flight on one node; its further calls wait in its own queue. Each node also takes
    at most its own `max_concurrency` (an MCP server's key; default 64) from all clients."""
    max_depth: int = Field(default=4, ge=1)
    """How deep agents may nest as tools of other agents (and gateways inside gateways)."""
    start_wait: float = Field(default=10.0, ge=0)
    """How long `serve` waits for its MCP servers to start before it answers (not with
    `--strict`): clients give up on `initialize` after 60 s (Claude Desktop, the TS SDK), and
    one slow server must not cost the others. One still starting joins once ready: its tools
    appear, and clients are told the list changed."""
    expose_tools: bool = False
    """Proxy mode for every node: serve its tools (and an MCP server's resources, resource
    templates, prompts and completions) beside the agents."""
    expose: list[str] = Field(default_factory=list[str])
    """Proxy mode for these nodes only."""
    pass_through: bool = True
    """Proxy mode over HTTP: a call that needs nothing of the gateway goes to its server as it
    came, past the SDK (`server.served.pass_through`); every other call of an MCP server's
    tool still goes to it as raw JSON-RPC (`McpToolkit.raw_calls`). False sends every call
    the usual way, through the SDK's server and client."""
    tokens_env: str | None = None
    """The environment variable holding the HTTP bearer tokens (comma-separated), so no secret
    is in the file. Required to serve HTTP on an address other than loopback."""
    allowed_hosts: list[str] = Field(default_factory=list[str])
    """Host headers accepted over HTTP besides the bound address: `gw.example.com`,
    `gw.example.com:8443`, or `gw.example.com:*` for any port (DNS-rebinding protection).
    Bound to a wildcard address (0.0.0.0, ::), Host and Origin are checked only when set."""
    allowed_origins: list[str] = Field(default_factory=list[str])
    """Origin headers accepted over HTTP besides the bound address's own, e.g.
    `http://localhost:6274` (a browser app on another port), `https://app.example.com:*`.
    These origins (only these) get CORS too: a browser app on one can call the gateway."""
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    """The largest HTTP request body accepted (413 beyond), and the longest stdio line (a
    -32600 error beyond, the rest of the line dropped unread)."""
    http_session_idle_timeout: float = Field(default=600, gt=0)
    """Seconds a 2025-era HTTP session may stay idle (no request, no open stream)."""
    http_max_sessions: int = Field(default=1000, ge=1)
    """2025-era HTTP sessions open at once; the least recently active idle one closes first."""
    http_keep_alive: int = Field(default=120, ge=1)
    """Seconds an idle HTTP connection stays open for its client's next request. Longer than
    the clients and proxies in front keep theirs idle (httpx 5 s, aiohttp 15 s, nginx's and
    AWS ALB's upstreams 60 s, Go 90 s): one that sends a request on a connection just as the
    server closes it gets no answer, and the mcp SDK's `Client` dies of it."""
    http_max_connections: int = Field(default=2048, ge=1)
    """HTTP connections open at once. One more closes the one waiting longest for a request
    (a head still coming in, an idle one), or is refused with 503 when all are serving. With
    the 30 s a connection has to send a request's head, what keeps a client that opens
    connections and never finishes a request from holding them all."""
    state_key_env: str | None = None
    """The environment variable holding the key (>= 32 bytes) that seals the state of
    multi-round tool calls (agents on `model = "sampling"` with 2026-07-28 clients); set the
    same key on every replica behind a load balancer. Several keys, comma- or
    whitespace-separated: the first seals, all open (rotation). Default: a key per process
    (`serve --stateless` warns that only that process takes its rounds)."""
    contended_round_timeout: float = Field(default=30.0, gt=0)
    """Seconds a question of an exposed server that waits on a 2026-07-28 client's retry (an
    input-required round) may hold up another caller's question to that server, where the
    server's transport does not say which call a question belongs to (stdio, SSE): past them
    it is refused to the server for the client, as a 2025-era client's error would be. That
    client may have given up without a word; alone, it has `ANSWER_TIMEOUT` (600 s). The
    waiting question's call keeps its clock running: keep this below the servers' `timeout`."""
    sampling_max_tokens: int = Field(default=4096, ge=1)
    """`maxTokens` of each request to the client's model (`model = "sampling"`)."""
    memory: MemoryConfig | None = None
    """Every agent's chat memory: a store URL, or a table (see `gateway.memory_config`)."""
    otel: bool = False
    """Export every run's trace as OpenTelemetry spans (GenAI semantic conventions)."""
    progress_interval: float = Field(default=15.0, gt=0)
    """Served runs: the longest a client waits for a progress notification while a model or
    tool call is in flight (and a `/v1` stream for a chunk or a keep-alive comment)."""
    oauth: ResourceServerSettings | None = None
    """Serving HTTP as an OAuth 2.1 resource server (see `resource_server`)."""
