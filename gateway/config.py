"""The gateway's configuration: TOML (or JSON with the same keys), validated with clear errors.

    [gateway]                       # optional settings of the gateway itself
    [mcpServers.time]               # Claude Desktop's shape, plus our keys
    command = "mcp-server-time"
    [tools.calculator]              # a built-in, or python = "module:function"
    builtin = "calculator"
    [agents.assistant]              # every agent can also be served as an MCP tool
    model = "openai:gpt-4.1-mini"
    tools = ["calculator", "time"]  # node names: servers, local tools, other agents

Every node name (server, local tool, agent) is unique across the three tables. With no file,
`DEFAULT_CONFIG` applies: the calculator, the `toolbox` MCP server shipped with the package,
and an `assistant` agent on both, with no model.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import (
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from agent import DEFAULT_SYSTEM_MESSAGE, OutputSchema
from agent.models import ModelSettings
from agent.models.spec import native_output_refused
from agent.names import did_you_mean, listed_names
from toolkits.mcp.config import McpServerConfig
from toolkits.observation import DEFAULT_MAX_CHARS

from .client_config import (
    CLIENT_FILE_NAMES,
    client_keys,
    enabled_servers,
    expand_server_variables,
    key_path,
    servers_as_nodes,
    with_env_files,
    without_the_gateway_on,
)
from .config_errors import describe
from .config_files import (
    DEFAULT_CONFIG_FILE,
    find_config_file,
    read_config_data,
    read_config_file,
)
from .errors import ConfigError
from .gateway_settings import GatewaySettings, Strict
from .home import expand_user
from .memory_config import MemoryConfig
from .store_config import StoreSettings

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_AGENT",
    "DEFAULT_CONFIG",
    "DEFAULT_CONFIG_FILE",
    "TOOLBOX_SERVER",
    "AgentConfig",
    "Config",
    "GatewaySettings",
    "LocalToolConfig",
    "find_config_file",
    "load_config",
    "parse_config",
    "read_config_data",
    "with_default_agent",
]

DEFAULT_AGENT = "assistant"
BUILTIN_TOOLS = ("calculator",)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NODES_LISTED = 20
"""Node names an error lists (a config of 100 servers made a 776-character line)."""


class LocalToolConfig(Strict):
    builtin: str | None = None
    python: str | None = None
    """`module:function`, a typed function (or a `FunctionTool`) to offer as a tool; the
    module is looked for on the Python path, then beside the config file (`directory`)."""
    description: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    """Seconds a call may take; then the model is told it timed out. An async function is
    cancelled; a plain one's thread cannot be stopped and is left to finish alone."""
    max_output: int = Field(default=DEFAULT_MAX_CHARS, gt=0)
    """Characters of observation text the agent reads from one result, as an MCP server's."""
    _directory: Path | None = PrivateAttr(default=None)

    @property
    def directory(self) -> Path | None:
        """The directory of the config file this tool was read from."""
        return self._directory

    def beside(self, directory: Path) -> LocalToolConfig:
        copy = self.model_copy()
        copy._directory = directory
        return copy

    @model_validator(mode="after")
    def _one_source(self) -> LocalToolConfig:
        if (self.builtin is None) == (self.python is None):
            raise ValueError("set exactly one of `builtin` or `python`")
        if self.builtin is not None and self.builtin not in BUILTIN_TOOLS:
            raise ValueError(f"unknown builtin {self.builtin!r}; available: {list(BUILTIN_TOOLS)}")
        if self.python is not None and not re.fullmatch(r"[\w.]+:\w+", self.python):
            raise ValueError(
                f"`python` must look like 'package.module:function', not {self.python!r}"
            )
        return self


class AgentConfig(Strict):
    model: str | list[str] | None = None
    """A model spec, or a list of them tried in order (fallback)."""
    system: str = DEFAULT_SYSTEM_MESSAGE
    tools: list[str] = Field(default_factory=list[str])
    handoffs: list[str] = Field(default_factory=list[str])
    """Agents this one may hand the conversation to: their answer is its answer (README,
    "Handoffs"). Offered as its tools, listed in `tools` or not."""
    handoff_history: bool = True
    """Whether the agents it hands the conversation to read the conversation's earlier turns
    and this agent's calls of the turn (false: the user's message alone, with the `context`
    this agent adds)."""
    max_iterations: int = Field(default=10, ge=1)
    max_output: int = Field(default=DEFAULT_MAX_CHARS, gt=0)
    """Characters of its answer a calling agent's model reads, as of a tool's result."""
    return_intermediate_steps: bool = False
    description: str = ""
    token_budget: int | None = Field(default=None, ge=1)
    """Tokens a run of this agent may spend, counting every agent it calls."""
    memory: MemoryConfig | None = None
    """This agent's chat memory, instead of the gateway's."""
    require_approval: list[str] = Field(default_factory=list[str])
    """fnmatch globs over this agent's tools (`fs__write_*`): a person is asked before such a
    call runs. A glob matches the name the model sees, the server's own name or
    `SERVER__TOOL`, so it holds whichever servers are up (see `gateway.approval`)."""
    require_approval_if_destructive: bool = False
    """A person is asked before any call of a tool its server marks `destructiveHint`."""
    batch_size: int = Field(default=1, ge=1)
    """Items of a run that run at once."""
    delay_between_batches: float = Field(default=0.0, ge=0)
    """Seconds between batches of items."""
    fail_fast: bool = False
    """End a run of several items at the first that fails."""
    context_window: int | None = Field(default=None, ge=1)
    """Tokens the model's context holds (for providers that do not report it): a call that
    would not fit fails with a clear error before it is sent."""
    temperature: float | None = Field(default=None, ge=0, le=2)
    """Sent with every request of this agent's model (default: the provider's)."""
    max_tokens: int | None = Field(default=None, ge=1)
    """The most tokens one answer may have (Anthropic requires one: 4096 when unset)."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Nucleus sampling, sent with every request of this agent's model."""
    extra_body: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])
    """Provider-specific fields merged into every request body of this agent's model (objects
    key by key): Anthropic `thinking`, OpenAI `reasoning_effort`, Gemini
    `generationConfig.thinkingConfig`, a server's own options."""
    model_timeout: float | None = Field(default=None, gt=0)
    """Seconds to wait for the model's answer (or the next piece of its stream) before the
    call fails, not retried (default 300: reasoning models think long before their first
    token); a fallback list then moves on to its next model."""

    @property
    def model_settings(self) -> ModelSettings:
        return ModelSettings(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_p=self.top_p,
            timeout=self.model_timeout,
            extra_body=self.extra_body,
        )

    output_schema: dict[str, JsonValue] | None = None
    """A JSON Schema every answer must fit (given through a `final_result` tool)."""
    output_retries: int = Field(default=1, ge=0)
    """Answers that do not fit `output_schema` (or that `output_validator` refused) sent back
    to the model before the item fails."""
    output_validator: str | None = None
    output_mode: Literal["tool", "native"] = "tool"
    """How answers are held to `output_schema`: a `final_result` tool, or the provider's own
    structured output (OpenAI `response_format`, Gemini `responseSchema`)."""
    """`module:function` checking each answer (see `agent.output_validator`); the module is
    looked for as a `python` tool's is."""
    _directory: Path | None = PrivateAttr(default=None)

    @property
    def directory(self) -> Path | None:
        """The directory of the config file this agent was read from."""
        return self._directory

    def beside(self, directory: Path) -> AgentConfig:
        copy = self.model_copy()
        copy._directory = directory
        return copy

    @field_validator("output_validator")
    @classmethod
    def _a_function(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[\w.]+:\w+", value):
            raise ValueError(f"must look like 'package.module:function', not {value!r}")
        return value

    @model_validator(mode="after")
    def _native_output_possible(self) -> AgentConfig:
        if self.output_mode == "tool":
            return self
        if self.output_schema is None:
            raise ValueError('output_mode = "native" needs an output_schema')
        try:
            schema = OutputSchema.from_json_schema(self.output_schema).native_schema()
        except ValueError as exc:
            raise ValueError(f"output_schema cannot be held natively: {exc}") from None
        specs = self.model if isinstance(self.model, list) else [self.model or ""]
        for spec in filter(None, specs):
            refused = native_output_refused(spec, with_tools=bool(self.tools), schema=schema)
            if refused is not None:
                raise ValueError(f'output_mode = "native": {refused}')
        return self

    @field_validator("output_schema")
    @classmethod
    def _a_json_schema(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if value is not None:
            OutputSchema.from_json_schema(value)  # raises ValueError, with the reason
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model_specs(cls, value: object) -> object:
        # Checked here, before pydantic tries each type of the union and reports each.
        if value is None:
            return value
        specs = cast(list[object], value) if isinstance(value, list) else [value]
        if not all(isinstance(spec, str) for spec in specs):
            raise ValueError(
                f'must be a model spec ("openai:gpt-4.1-mini") or a list of them, not {value!r}'
            )
        if not specs:
            raise ValueError("an empty list of models; give at least one spec or leave it out")
        for spec in cast(list[str], specs):
            if "${" in spec:
                raise ValueError(
                    f"{spec!r}: ${{VAR}} is expanded only in the mcpServers' launch keys "
                    "(command, args, env, cwd, url, headers); write the spec itself, or pass "
                    "--model SPEC"
                )
        stripped = [cast(str, spec).strip() for spec in specs]  # a stray space is no model
        return stripped if isinstance(value, list) else stripped[0]


class Config(Strict):
    gateway: GatewaySettings = GatewaySettings()
    mcp_servers: dict[str, McpServerConfig] = Field(
        default_factory=dict[str, McpServerConfig], alias="mcpServers"
    )
    tools: dict[str, LocalToolConfig] = Field(default_factory=dict[str, LocalToolConfig])
    agents: dict[str, AgentConfig] = Field(default_factory=dict[str, AgentConfig])
    store: StoreSettings = StoreSettings()
    """Where runs are kept (see `gateway.store_config`)."""
    _source: Path | None = PrivateAttr(default=None)
    _in_json: bool = PrivateAttr(default=False)

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )

    @property
    def source(self) -> Path | None:
        """The file this config was read from, for errors found after loading it."""
        return self._source

    @property
    def in_json(self) -> bool:
        """Whether its file is JSON (an MCP client's, say): advice writes its keys so."""
        return self._in_json

    def reached_from(self, roots: Sequence[str]) -> dict[str, AgentConfig]:
        """The agents `roots` name and every agent they call, in config order."""
        reached: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            if name in reached or name not in self.agents:
                continue
            reached.add(name)
            todo += [*self.agents[name].tools, *self.agents[name].handoffs]
        return {name: spec for name, spec in self.agents.items() if name in reached}

    def nodes_of(self, agent: str) -> set[str]:
        """The MCP servers and local tools `agent` uses, itself or through agents it calls."""
        used = {
            tool
            for spec in self.reached_from([agent]).values()
            for tool in [*spec.tools, *spec.handoffs]
        }
        return used - set(self.agents)

    def read_from(self, path: Path, *, in_json: bool = False) -> Config:
        """This config, noted as read from `path` (a JSON file with `in_json`)."""
        copy = self.model_copy()
        copy._source = path
        copy._in_json = in_json
        return copy

    @model_validator(mode="after")
    def _names_resolve(self) -> Config:
        seen: dict[str, str] = {}
        for table, names in (
            ("mcpServers", self.mcp_servers),
            ("tools", self.tools),
            ("agents", self.agents),
        ):
            for name in names:
                where = key_path(table, name)
                if not _NAME.fullmatch(name):
                    raise ValueError(
                        f"{where}: names may use letters, digits, '_' and '-' (1-64)"
                        + _server_hint(table, name)
                    )
                if name in seen:
                    raise ValueError(f"{where}: the name is already used in {seen[name]}")
                seen[name] = table
        for agent, spec in self.agents.items():
            for node in spec.tools:
                if node not in seen:
                    guess = did_you_mean(node, seen)
                    known = listed_names(sorted(seen), most=_NODES_LISTED)
                    raise ValueError(
                        f"agents.{agent}.tools: no node named {node!r}{guess} (known: {known})"
                    )
            for other in spec.handoffs:
                _check_handoff(agent, spec, other, self.agents)
        return self


def _check_handoff(
    agent: str, spec: AgentConfig, other: str, agents: Mapping[str, AgentConfig]
) -> None:
    """A handoff names another agent; a lead whose answers fit a schema hands off only to an
    agent whose answers fit the same one (its answer becomes the lead's)."""
    where = f"agents.{agent}.handoffs"
    if other not in agents:
        guess = did_you_mean(other, agents)
        known = listed_names(sorted(agents), most=_NODES_LISTED)
        raise ValueError(f"{where}: no agent named {other!r}{guess} (known agents: {known})")
    if other == agent:
        raise ValueError(f"{where}: an agent cannot hand the conversation to itself")
    if spec.output_schema is not None and agents[other].output_schema != spec.output_schema:
        raise ValueError(
            f"{where}: {other!r} answers without this agent's output_schema, and its answer "
            f"would be this agent's: give {other!r} the same output_schema"
        )


def _server_hint(table: str, name: str) -> str:
    """How a server key of ours that is no node name can be one (a client's file renames it)."""
    if table != "mcpServers":
        return ""
    suggested = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "server"
    return (
        f": name it {suggested!r} (a tool prefix a model takes); a client's .json file may keep "
        "its own key, its other characters become '_'"
    )


TOOLBOX_SERVER = McpServerConfig(
    # `-P`: the script's folder (this package) is not put on sys.path, where its modules would
    # shadow the standard library's (`trace`); the toolbox needs only the MCP SDK.
    command=sys.executable,
    args=["-P", str(Path(__file__).with_name("toolbox.py"))],
)
"""`gateway/toolbox.py`, the example MCP server shipped with the package, over stdio."""

DEFAULT_CONFIG = Config(
    mcpServers={"toolbox": TOOLBOX_SERVER},
    tools={"calculator": LocalToolConfig(builtin="calculator")},
    agents={
        "assistant": AgentConfig(
            tools=["calculator", "toolbox"],
            description=(
                "A helpful assistant with a calculator, unit conversion, text statistics, "
                "times and dates."
            ),
        )
    },
)


def load_config(
    path: str | Path | None = None, *, environ: Mapping[str, str] | None = None
) -> Config:
    """Read `path`; without one, `agent-gateway.toml` in the working directory, else a client's
    `.mcp.json` there, else the built-in default. `${VAR}`s expand from `environ` (default:
    this process's environment).

    A `.json` file may be our shape or an MCP client's config (`{"mcpServers": ...}`, with the
    client's own keys beside it). Raises `ConfigError` naming the file and the key at fault.
    """
    if path is None:
        path = find_config_file()
        if path is None:
            return DEFAULT_CONFIG
    path = Path(path)
    # Only JSON files are MCP clients' own (TOML is ours alone: every key of it counts).
    data, client_file = read_config_file(path)
    folder = _folder_of(path)
    if client_file:
        data = without_the_gateway_on(data, path)
    config = parse_config(data, source=str(path), environ=environ, client_file=client_file)
    config = _relative_to(config, path.parent, folder)
    if path.name not in CLIENT_FILE_NAMES:  # a client's keeps the client's meaning
        config = _servers_beside(config, folder)
    return config.read_from(path, in_json=client_file)


def _folder_of(path: Path) -> Path:
    """The config file's folder, absolute. Raises `ConfigError` for a relative `path` once the
    working directory is gone (deleted under the shell): nothing is relative to it then."""
    try:
        return path.parent.absolute()
    except FileNotFoundError:  # os.getcwd()
        raise ConfigError(
            f"{path}: a path relative to the working directory, which is gone (deleted?): name "
            "the config by its absolute path, or run from a directory that exists"
        ) from None


def parse_config(
    data: Any,
    *,
    source: str = "config",
    environ: Mapping[str, str] | None = None,
    client_file: bool = True,
) -> Config:
    """Validate already-parsed config data; `source` names it in errors.

    With `client_file`, data with `mcpServers` may be an MCP client's file, with the client's
    own settings beside it: they are ignored. Variables in the servers' launch keys are
    expanded from `environ` (default: this process's environment; `client_config`).
    """
    as_written: dict[str, str] = {}  # a client's server keys, by the node names they became
    if isinstance(data, dict):
        table = dict(cast(dict[str, Any], data))
        for key in client_keys(table, source=source) if client_file else []:
            del table[key]
        if isinstance(table.get("mcpServers"), dict):
            servers = cast(dict[str, Any], table["mcpServers"])
            if client_file:  # a disabled server's variables need not be set
                servers = enabled_servers(table, source=source)
            servers = expand_server_variables(servers, source=source, environ=environ)
            if client_file:
                servers = with_env_files(servers, source=source)
                servers, as_written = servers_as_nodes(table, servers, source=source)
            table["mcpServers"] = servers
        data = table
    try:
        # Strict: TOML and JSON are typed, so `true` for a number or "10" for one is a slip,
        # not what the user meant (an int is still a float).
        return Config.model_validate(data, strict=True)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {describe(exc, Config, as_written)}") from exc


def with_default_agent(config: Config) -> Config:
    """`config`, or with no agent configured, with an `assistant` agent on every node: what
    a client's config (servers only) needs to be run as it is. Where a node has that name (a
    client's server `assistant`), the agent is `assistant_2` (or the next number free)."""
    nodes = [*config.mcp_servers, *config.tools]
    if config.agents or not nodes:
        return config
    name, number = DEFAULT_AGENT, 1
    while name in nodes:
        number += 1
        name = f"{DEFAULT_AGENT}_{number}"
    agent = AgentConfig(
        tools=nodes, description=f"An assistant with the tools of: {', '.join(nodes)}."
    )
    return config.model_copy(update={"agents": {name: agent}})


def _relative_to(config: Config, base: Path, folder: Path) -> Config:
    """Paths in a config file (script files of `scripted:` models, SQLite files) are relative
    to the file (`base`, its folder as given; `folder`, absolute), and a local tool's module
    (and an agent's output validator's) is looked for there too."""

    def resolve(spec: str) -> str:
        kind, _, rest = spec.partition(":")
        if kind != "scripted" or not rest or Path(rest).is_absolute():
            return spec
        return f"scripted:{base / rest}"

    def sqlite(url: str | None) -> str | None:
        # sqlite:///relative.db is relative to the file too; sqlite:///~/runs.db, the home's.
        if url is None or not url.startswith("sqlite:///"):
            return url
        path = Path(url.removeprefix("sqlite:///"))
        return url if path.is_absolute() else f"sqlite:///{folder / expand_user(path)}"

    def memory(settings: MemoryConfig | None) -> MemoryConfig | None:
        if settings is None:
            return None
        return settings.model_copy(update={"url": sqlite(settings.url)})

    agents = {
        name: agent.model_copy(
            update={
                "model": [resolve(m) for m in agent.model]
                if isinstance(agent.model, list)
                else agent.model and resolve(agent.model),
                "memory": memory(agent.memory),
            }
        ).beside(folder)
        for name, agent in config.agents.items()
    }
    gateway = config.gateway.model_copy(update={"memory": memory(config.gateway.memory)})
    store = config.store.model_copy(update={"url": sqlite(config.store.url)})
    tools = {name: tool.beside(folder) for name, tool in config.tools.items()}
    return config.model_copy(
        update={"agents": agents, "gateway": gateway, "store": store, "tools": tools}
    )


def _servers_beside(config: Config, folder: Path) -> Config:
    """A stdio server of our own file starts beside the file, wherever the gateway is run
    from: a relative `cwd` is the file's folder's, no `cwd` is that folder (so are relative
    paths in `args`: they are the server's own, passed as written), and a `command` that is
    a relative path (`./run.sh`, `bin/server`) is found there; a bare command is looked up on
    PATH. An MCP client's own file (`CLIENT_FILE_NAMES`) keeps the client's meaning: paths
    are the gateway's working directory's, as the client's are its own. `folder`: the file's,
    absolute."""
    servers: dict[str, McpServerConfig] = {}
    for name, server in config.mcp_servers.items():
        if server.kind != "stdio" or server.command is None:
            servers[name] = server
            continue
        command = server.command
        if "/" in command and not Path(command).is_absolute():
            command = str(folder / command)
        cwd = folder / server.cwd if server.cwd is not None else folder
        servers[name] = server.model_copy(update={"command": command, "cwd": str(cwd)})
    return config.model_copy(update={"mcp_servers": servers})
