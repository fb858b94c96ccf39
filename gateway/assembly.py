"""Building a running `Gateway` from a `Config`."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import logging
import sys
import traceback
from collections.abc import AsyncGenerator, Callable, Collection, Generator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.client import Transport

from agent import AgentOptions, ChatModel, OutputSchema, SessionMemory
from agent.models import new_http_client
from agent.models.spec import native_output_refused
from agent.output_validator import check_validator
from toolkits import FunctionTool, FunctionToolkit, Toolkit, calculator, function_tool
from toolkits.mcp import McpServerConfig, McpToolkitGroup, Target

from .approval import ApprovalRule
from .approval_globs import UnmatchedApprovals
from .config import AgentConfig, Config, LocalToolConfig
from .engine import AgentSpec, Gateway
from .errors import ConfigError, DepthExceeded
from .loops import SPAWN_DEPTH_ENV, spawn_depth
from .memory_config import open_memories, stores_keep_days
from .memory_retention import pruning_sessions
from .model_specs import KeylessModel, NoModel, resolve_model, resolve_models
from .otel import OtelExporter
from .otel_export import configure_otel
from .trace import TraceHook

__all__ = ["open_gateway"]

"""Set for every stdio server a gateway starts: how many gateways, each started by the one
before, lead to that process. A gateway that many deep (or more) as its depth limit starts no
stdio servers: every request reaching it passed through as many gateways and is refused, and
a gateway that starts itself through others (A runs B, B runs A) would otherwise start copies
without end, before any request is made."""

_BUILTINS: dict[str, FunctionTool] = {"calculator": calculator}

log = logging.getLogger(__name__)


@asynccontextmanager
async def open_gateway(
    config: Config,
    *,
    model: str | None = None,
    hooks: Sequence[TraceHook] = (),
    state_dir: str | Path | None = None,
    http_client: httpx.AsyncClient | None = None,
    start_wait: float | None = None,
    wait_for: Collection[str] | None = None,
    on_waiting: Callable[[Sequence[str]], None] | None = None,
    served_names: Mapping[str, str] | None = None,
    model_on_trial: bool = False,
) -> AsyncGenerator[Gateway]:
    """A gateway with every configured node ready; `model` overrides every agent's model (each
    still asked with its agent's `temperature`, `max_tokens`, `top_p`, `model_timeout`).

    Chat memory is what the config says, by default the run store's database (the config's
    `[store] url`, else a SQLite file in `state_dir` or the data directory): see
    `gateway.memory_config`. The models' requests go through `http_client`
    (default: a pool of this gateway's own, closed with it). With `start_wait`, the gateway
    comes up after that many seconds at most: a server still starting then joins it once
    ready (its tools appear; their node says so to subscribers). With `wait_for`, it waits
    only for the servers named there (e.g. `Config.nodes_of` an agent); the others start in
    the background. `on_waiting` hears which servers it still waits for while it
    starts (`McpToolkitGroup`). `served_names` are tool names the caller serves beside the
    nodes' (`serve`'s run tools), each with what it is (`"run tool"`): a server's tool of
    such a name is offered prefixed, as one named like an agent is. With `model_on_trial`
    (a stored run resumed on a `model` it did not start with), that model's refusal of a
    request stops the run instead of failing its item (`AgentOptions.refusal_stops`).
    """
    with _naming_file(config):
        nodes: list[Toolkit] = [_local_node(name, tool) for name, tool in config.tools.items()]
    memory_configs = {name: spec.memory for name, spec in config.agents.items()}
    memories, stores = open_memories(
        config.gateway.memory, memory_configs, state_dir=state_dir, run_store=config.store.url
    )
    kept = stores_keep_days(
        config.gateway.memory, memory_configs, state_dir=state_dir, run_store=config.store.url
    )
    own_client = http_client is None
    client = http_client or new_http_client()  # one pool for every model of this gateway

    overrides: dict[str, ChatModel] = {}

    def model_of(name: str, spec: AgentConfig) -> ChatModel:
        settings = spec.model_settings
        if model is None:
            if not spec.model:
                return NoModel(name)
            resolved = resolve_models(spec.model, agent=name, http_client=client, settings=settings)
            if isinstance(resolved, KeylessModel) and config.source is not None:
                # The operator is told the file (past `_naming_file`, which would); a call,
                # which may be a remote client's, is not: the path is the operator's.
                reason = resolved.reason
                return KeylessModel(resolved.name, f"{config.source}: {reason}", told=reason)
            return resolved
        return overrides[settings.model_dump_json()]

    try:
        # Agents asking with the same settings share one instance of the override (a
        # scripted model's answers are one script for the whole run). Made before the
        # config's own models: an override at fault is not the config file's fault.
        for spec in config.agents.values():
            key = spec.model_settings.model_dump_json()
            refused = None
            if model is not None and spec.output_mode == "native":
                schema = OutputSchema.from_json_schema(spec.output_schema or {}).native_schema()
                refused = native_output_refused(model, with_tools=bool(spec.tools), schema=schema)
            if refused is not None:
                raise ConfigError(f"model {model}: {refused}")
            if model is not None and key not in overrides:
                try:
                    overrides[key] = resolve_model(
                        model, http_client=client, settings=spec.model_settings
                    )
                except ConfigError as exc:
                    raise ConfigError(f"model {model}: {exc}") from exc
        with _naming_file(config):  # a model spec at fault
            agents = [
                _agent_spec(
                    name, spec, model_of(name, spec), memories[name], refusal_stops=model_on_trial
                )
                for name, spec in config.agents.items()
            ]
        if config.gateway.otel:
            hooks = (*hooks, OtelExporter())
        # Every MCP server connects concurrently; one that fails to start is reported in its
        # node's health and retried, while the others serve.
        servers_config, targets = _stdio_children(config.mcp_servers, config.gateway.max_depth)
        async with McpToolkitGroup(
            servers_config,
            targets=targets,
            settle_within=start_wait,
            wait_for=wait_for,
            on_waiting=on_waiting,
            # Local tools and agents have no prefix to give: a server's tool of their name
            # is the one prefixed, so a call goes where every listing says, servers started
            # or not (`call` of a local tool does not wait for them).
            reserved_names={
                **(served_names or {}),
                **dict.fromkeys(config.tools, "local tool"),
                **dict.fromkeys(config.agents, "agent"),
            },
        ) as servers:
            for server in servers:  # "the usual way" is the SDK's at both ends
                server.raw_calls = config.gateway.pass_through
            with configure_otel() if config.gateway.otel else nullcontext():
                gateway = Gateway(
                    [*servers, *nodes],
                    agents,
                    max_concurrency=config.gateway.max_concurrency,
                    max_depth=config.gateway.max_depth,
                    hooks=hooks,
                )  # each server's `max_concurrency` and approval keys are its node's (`node_rules`)
                # A misspelt approval glob leaves its tool ungated: said now and as tools change.
                approvals = UnmatchedApprovals(gateway)
                approvals.check()
                unsubscribe = servers.subscribe(approvals.node_changed)
                try:
                    async with pruning_sessions(
                        [(stores[url], days) for url, days in kept.items()]
                    ):
                        yield gateway
                finally:
                    unsubscribe()
    finally:
        with anyio.CancelScope(shield=True):
            if own_client:
                await client.aclose()
            for store in stores.values():
                await store.aclose()


def _agent_spec(
    name: str,
    spec: AgentConfig,
    model: ChatModel,
    memory: SessionMemory,
    *,
    refusal_stops: bool = False,
) -> AgentSpec:
    validator = None
    if spec.output_validator is not None:
        where = f"agents.{name}.output_validator"
        validator = _imported(where, spec.output_validator, spec.directory)
        try:
            check_validator(validator)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
    return AgentSpec(
        name=name,
        model=model,
        tools=spec.tools,
        options=AgentOptions(
            system_message=spec.system,
            max_iterations=spec.max_iterations,
            return_intermediate_steps=spec.return_intermediate_steps,
            batch_size=spec.batch_size,
            delay_between_batches=spec.delay_between_batches,
            fail_fast=spec.fail_fast,
            output=OutputSchema.from_json_schema(spec.output_schema)
            if spec.output_schema is not None
            else None,
            output_retries=spec.output_retries,
            output_validator=validator,
            output_mode=spec.output_mode,
            refusal_stops=refusal_stops,
        ),
        description=spec.description,
        token_budget=spec.token_budget,
        memory=memory,
        context_window=spec.context_window,
        approval=ApprovalRule(spec.require_approval, spec.require_approval_if_destructive),
        handoffs=spec.handoffs,
        handoff_history=spec.handoff_history,
        max_output=spec.max_output,
    )


@contextmanager
def _naming_file(config: Config) -> Generator[None]:
    """A config error found while assembling names its file, as the loader's errors do."""
    try:
        yield
    except ConfigError as exc:
        if config.source is None:
            raise
        raise ConfigError(f"{config.source}: {exc}") from exc


def _stdio_children(
    servers: Mapping[str, McpServerConfig], max_depth: int
) -> tuple[dict[str, McpServerConfig], dict[str, Target]]:
    """The servers with each stdio one told its spawn depth (`SPAWN_DEPTH_ENV`); at the depth
    limit, targets that refuse to start in place of the stdio processes (health says why)."""
    depth = spawn_depth()
    stdio = [name for name, server in servers.items() if server.kind == "stdio"]
    if depth < max_depth:
        told = dict(servers)
        for name in stdio:
            env = {**servers[name].env, SPAWN_DEPTH_ENV: str(depth + 1)}
            told[name] = servers[name].model_copy(update={"env": env})
        return told, {}
    reason = (
        f"not started: this gateway was started by {depth} gateways in a chain "
        f"(depth limit {max_depth}); is a gateway starting itself?"
    )
    if stdio:
        log.warning("stdio servers %s %s", stdio, reason)

    def refuse() -> Transport:
        raise DepthExceeded(reason)

    return dict(servers), dict.fromkeys(stdio, refuse)


def _local_node(name: str, config: LocalToolConfig) -> FunctionToolkit:
    if config.builtin is not None:
        tool = _BUILTINS[config.builtin]
    else:
        assert config.python is not None
        tool = _import_tool(name, config.python, config.directory)
    # The node's name is the tool's name, as the model will see it.
    tool = dataclasses.replace(
        tool,
        name=name,
        description=config.description or tool.description,
        timeout=config.timeout if config.timeout is not None else tool.timeout,
    )
    return FunctionToolkit(name, [tool], max_output=config.max_output)


def _import_tool(name: str, target: str, directory: Path | None) -> FunctionTool:
    where = f"tools.{name}.python"
    found = _imported(where, target, directory)
    if isinstance(found, FunctionTool):
        return found
    if not callable(found):
        raise ConfigError(f"{where}: {target!r} is not a function")
    function: Callable[..., Any] = found
    try:
        return function_tool(function, name=name)  # its own name may be none a model takes
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _imported(where: str, target: str, directory: Path | None) -> Any:
    """What `module:attribute` names, the module looked for on the path, then beside the
    config file (`directory`). Raises `ConfigError` starting with `where` (the key)."""
    module_name, _, attribute = target.partition(":")
    if directory is not None and str(directory) not in sys.path:
        # The installed command has no working directory on its path (`python -m` has): a
        # module written beside the config file is found as the README's examples expect.
        sys.path.append(str(directory))
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        if directory is not None:  # not found in another module of the name (`agent`, `json`)
            _same_module_as_beside(where, module_name, directory)
        raise ConfigError(f"{where}: cannot import {target!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # the module's own code failed (a script exits)
        raise ConfigError(f"{where}: cannot import {target!r}: {_failure(exc)}") from exc
    if directory is not None:
        _same_module_as_beside(where, module_name, directory)
    return found


def _failure(exc: BaseException) -> str:
    """What a module's failure to import was, and where in the user's files: for a
    `SyntaxError` the file and line it names, else the deepest frame of theirs, past the
    import machinery (`<frozen importlib._bootstrap>`) and this module's own call."""
    if isinstance(exc, SyntaxError):
        where = f" ({exc.filename}, line {exc.lineno})" if exc.filename else ""
        return f"{type(exc).__name__}: {exc.msg}{where}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)[1:]
        if not frame.filename.startswith("<frozen ")
    ]
    where = f" ({frames[-1].filename}, line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _same_module_as_beside(where: str, module_name: str, directory: Path) -> None:
    """Raises unless a module of that name beside the config file (if any) is the one
    imported: a module is the process's, so a long-lived caller opening a second config with
    a `tools.py` of its own beside it would get the first one's, or an installed module of
    that name, and call the wrong functions without a word."""
    top = module_name.partition(".")[0]
    beside = importlib.machinery.PathFinder.find_spec(top, [str(directory)])
    if beside is None or beside.origin is None or top not in sys.modules:
        return  # not imported: the module beside failed on its own, which its error says
    imported: str | None = getattr(sys.modules[top], "__file__", None)
    if imported is None or Path(imported).resolve() != Path(beside.origin).resolve():
        raise ConfigError(
            f"{where}: the module {top!r} beside the file ({beside.origin}) is "
            f"not the one imported by that name ({imported or 'built in'}): rename it"
        )
