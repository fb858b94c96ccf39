"""Model specs from config and CLI, resolved to `ChatModel`s."""

from __future__ import annotations

from collections.abc import Sequence

from agent import (
    AssistantMessage,
    ChatMessage,
    ModelError,
    ScriptedModel,
    StateError,
    TokenCallback,
    ToolDefinition,
)

from .errors import ConfigError

__all__ = ["NoModel", "resolve_model"]


class NoModel:
    """Stands in for an agent's model until one is configured; says how to set one."""

    def __init__(self, agent: str) -> None:
        self._agent = agent

    @property
    def name(self) -> str:
        return "none"

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        raise ModelError(
            f"agent {self._agent!r} has no model: set `model` in [agents.{self._agent}] "
            "or pass --model SPEC (or try `agent-gateway demo`, which needs no key)"
        )


def resolve_model(spec: str) -> ScriptedModel:
    """A model from a spec such as `scripted:answers.json`. Raises `ConfigError`."""
    kind, _, rest = spec.partition(":")
    if kind == "scripted" and rest:
        try:
            return ScriptedModel.from_file(rest)
        except StateError as exc:
            raise ConfigError(str(exc)) from exc
    raise ConfigError(f"unknown model spec {spec!r}; expected e.g. 'scripted:FILE'")
