"""Building a running `Gateway` from a `Config`."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from agent import AgentOptions, ChatModel, WindowMemory
from toolkits import FunctionTool, FunctionToolkit, Toolkit, calculator, function_tool

from .config import Config, LocalToolConfig
from .engine import AgentSpec, Gateway
from .errors import ConfigError
from .models import NoModel, resolve_model
from .trace import TraceHook

__all__ = ["open_gateway"]

_BUILTINS: dict[str, FunctionTool] = {"calculator": calculator}


@asynccontextmanager
async def open_gateway(
    config: Config,
    *,
    model: str | None = None,
    hooks: Sequence[TraceHook] = (),
) -> AsyncGenerator[Gateway]:
    """A gateway with every configured node ready; `model` overrides every agent's model."""
    nodes: list[Toolkit] = [_local_node(name, tool) for name, tool in config.tools.items()]
    override = resolve_model(model) if model else None
    agents = [
        AgentSpec(
            name=name,
            model=override or _agent_model(name, spec.model),
            tools=spec.tools,
            options=AgentOptions(
                system_message=spec.system,
                max_iterations=spec.max_iterations,
                return_intermediate_steps=spec.return_intermediate_steps,
            ),
            description=spec.description,
            token_budget=spec.token_budget,
        )
        for name, spec in config.agents.items()
    ]
    yield Gateway(
        nodes,
        agents,
        memory=WindowMemory(),
        max_concurrency=config.gateway.max_concurrency,
        max_depth=config.gateway.max_depth,
        hooks=hooks,
    )


def _agent_model(agent: str, spec: str | list[str] | None) -> ChatModel:
    if spec is None:
        return NoModel(agent)
    if isinstance(spec, list):
        if len(spec) > 1:
            raise ConfigError(f"agents.{agent}.model: fallback lists are not supported yet")
        spec = spec[0]
    return resolve_model(spec)


def _local_node(name: str, config: LocalToolConfig) -> FunctionToolkit:
    if config.builtin is not None:
        tool = _BUILTINS[config.builtin]
    else:
        assert config.python is not None
        tool = _import_tool(name, config.python)
    # The node's name is the tool's name, as the model will see it.
    tool = dataclasses.replace(tool, name=name, description=config.description or tool.description)
    return FunctionToolkit(name, [tool])


def _import_tool(name: str, target: str) -> FunctionTool:
    module_name, _, attribute = target.partition(":")
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"tools.{name}.python: cannot import {target!r}: {exc}") from exc
    if isinstance(found, FunctionTool):
        return found
    if not callable(found):
        raise ConfigError(f"tools.{name}.python: {target!r} is not a function")
    function: Callable[..., Any] = found
    try:
        return function_tool(function)
    except TypeError as exc:
        raise ConfigError(f"tools.{name}.python: {exc}") from exc
