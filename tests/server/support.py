"""Helpers for the server tests: gateways to serve, and recorders of what clients receive."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from pydantic import JsonValue

from agent import AgentOptions, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.config import GatewaySettings
from gateway.server import build_server
from gateway.server.served.stored_runs import Relay
from toolkits import FunctionToolkit, calculator, function_tool

ERAS = ["auto", "legacy"]
"""`Client` modes: `auto` settles on 2026-07-28 with our server, `legacy` on 2025-11-25."""

SAMPLING_WITH_TOOLS = types.SamplingCapability(tools=types.SamplingToolsCapability())


def relays_alive() -> int:
    """The relays of stored runs' trace events to their followers alive in this process."""
    gc.collect()
    return sum(isinstance(o, Relay) for o in gc.get_objects())


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def calculator_agent(
    answers: Sequence[ScriptedAnswer | str], *, name: str = "assistant", **options: Any
) -> AgentSpec:
    return AgentSpec(
        name=name,
        model=ScriptedModel(answers),
        tools=["calculator"],
        options=AgentOptions(**options),
        description=f"The {name} agent.",
    )


def calculator_gateway(*agents: AgentSpec, nodes: Sequence[Any] = ()) -> Gateway:
    return Gateway([FunctionToolkit("calculator", [calculator]), *nodes], agents)


def serve(gateway: Gateway, **settings: Any) -> Server[Any]:
    server, _router = build_server(gateway, GatewaySettings(**settings))
    return server


class Blocker:
    """A local tool that waits until cancelled, and says when it started and was cancelled."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = anyio.Event()

        async def wait_here() -> str:
            """Wait for ever."""
            self.started.set()
            try:
                await anyio.Event().wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
            return "released"

        self.node = FunctionToolkit("wait_here", [function_tool(wait_here)])


class ProgressLog:
    def __init__(self) -> None:
        self.updates: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.updates.append((progress, total, message))

    @property
    def messages(self) -> list[str]:
        return [m or "" for _, _, m in self.updates]


class LogLog:
    def __init__(self) -> None:
        self.entries: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.entries.append(params)

    @property
    def lines(self) -> list[str]:
        return [f"{e.level}: {e.data}" for e in self.entries]
