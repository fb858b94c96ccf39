"""Model specs from config and CLI, resolved to `ChatModel`s."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from agent import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ModelError,
    TokenCallback,
    ToolDefinition,
)
from agent.errors import MissingApiKey, ModelConfigError
from agent.models import API_KEYS, FallbackModel, ModelSettings, RetryPolicy, model_from_spec

from .errors import ConfigError
from .loops import spawn_depth
from .sampling_model import SamplingModel
from .traced_model import note_fallback, note_retry

__all__ = [
    "SAMPLING",
    "CannotAnswer",
    "ClientSampling",
    "KeylessModel",
    "NoModel",
    "cannot_run",
    "resolve_model",
    "resolve_models",
]

SAMPLING = "sampling"
"""The model spec for the calling MCP client's own model (MCP sampling)."""


class CannotAnswer:
    """Stands in for a model that cannot answer, and says why at each call: with a
    `ModelConfigError`, which no retry or resume mends until the configuration is."""

    error: type[ModelConfigError] = ModelConfigError
    native_output = True
    """Taken as the model it stands for takes it: refused, its call would not say why."""

    def __init__(self, name: str, reason: str, *, told: str | None = None) -> None:
        self._name = name
        self.reason = reason
        """Why, for the operator (`cannot_run`: the command line, serve's log)."""
        self._told = told if told is not None else reason
        """Why, for whoever asks it: a served agent's remote client too."""

    @property
    def name(self) -> str:
        return self._name

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        raise self.error(self._told)


class NoModel(CannotAnswer):
    """An agent's model until one is configured: says how to set one."""

    def __init__(self, agent: str) -> None:
        super().__init__(
            "none",
            f"agent {agent!r} has no model: set `model` in [agents.{agent}] or pass "
            "--model SPEC (or try `agent-gateway demo`, which needs no key)",
        )


class KeylessModel(CannotAnswer):
    """A model whose provider's API key is not set: the gateway starts (its tools, its other
    agents), a fallback list goes on to its next model, and a call to this one fails saying
    which variable to set."""

    error = MissingApiKey


def cannot_run(model: ChatModel) -> str | None:
    """Why an agent's `model` can answer nothing (none set, keys not set), or None."""
    if isinstance(model, CannotAnswer):
        return model.reason
    if isinstance(model, FallbackModel):
        reasons = [cannot_run(m) for m in model.models]
        if all(reasons):
            return "; ".join(r for r in reasons if r)
    return None


class ClientSampling:
    """Marks an agent whose model is the calling MCP client's (`model = "sampling"`).

    There is no such model outside an MCP request: `agent-gateway serve` swaps in a
    `SamplingModel` for each call; anywhere else the marker explains itself.
    """

    def __init__(self, agent: str | None = None, settings: ModelSettings | None = None) -> None:
        self._agent = agent
        self.settings = settings or ModelSettings()
        """What the agent asks the client's model with (`temperature`, `max_tokens`, `top_p`)."""

    @property
    def name(self) -> str:
        return SAMPLING

    def answered_by(self, client: ChatModel | None) -> ChatModel:
        """The model that answers for the agent: the run's client's (asked with the agent's
        settings); where the run has none, this marker (which explains itself)."""
        if client is None:
            return self
        return client.with_settings(self.settings) if isinstance(client, SamplingModel) else client

    def explain(self) -> str:
        where = f"agent {self._agent!r} has " if self._agent else ""
        # Reached where no client's model serves the run: a run from the command line or
        # the library, or a stored one (it goes on without the client that started it).
        return (
            f"{where}model 'sampling', which needs the MCP client that called the gateway, "
            "and this run has none (it runs from the command line, or is kept in a run store, "
            "which goes on without its client): serve it with `agent-gateway serve`, without "
            "a run store, to a client that can sample (or give it a model of its own: --model "
            "SPEC)"
        )

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        raise ModelError(self.explain())


_RETRY = RetryPolicy(on_retry=note_retry)
"""Each retry is a note in the run's trace too (`--trace`, OpenTelemetry)."""


def resolve_model(
    spec: str,
    *,
    agent: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    settings: ModelSettings | None = None,
) -> ChatModel:
    """The model a spec names (`openai:gpt-4.1-mini`, `scripted:FILE`, ...), asked with
    `settings`, or the `sampling` marker (the MCP client's own model, swapped in when served).
    Raises `ConfigError`."""
    if spec == SAMPLING:
        return ClientSampling(agent, settings)
    where = f"agents.{agent}.model: " if agent else ""
    try:
        return model_from_spec(spec, http_client=http_client, settings=settings, retry=_RETRY)
    except MissingApiKey as exc:
        return KeylessModel(spec, f"{where}{exc}{_not_passed(spec)}")
    except ModelConfigError as exc:
        raise ConfigError(f"{where}{exc}") from exc


def _not_passed(spec: str) -> str:
    """For a gateway another one started as its stdio server: the key may well be set where
    that one runs, which passes a stdio server only a few variables (HOME, PATH, ...) and the
    server's `env`. Says so, and how to pass it."""
    if not spawn_depth():
        return ""
    names = API_KEYS.get(spec.partition(":")[0]) or ("THE_KEY",)
    passed = ", ".join(f'{name} = "${{{name}}}"' for name in names[:1])
    return (
        " in this gateway's environment: it runs as a stdio MCP server of another gateway, "
        "which passes its stdio servers only HOME, PATH and a few other variables, and each "
        f"one's `env`: pass the key there (env = {{ {passed} }} in its [mcpServers] entry "
        "for this gateway)"
    )


def resolve_models(
    specs: str | Sequence[str],
    *,
    agent: str | None = None,
    http_client: httpx.AsyncClient | None = None,
    settings: ModelSettings | None = None,
) -> ChatModel:
    """One spec, or a list tried in order: on a provider error the next model answers that
    call, and the run's trace says so."""
    if isinstance(specs, str):
        return resolve_model(specs, agent=agent, http_client=http_client, settings=settings)
    models = [
        resolve_model(spec, agent=agent, http_client=http_client, settings=settings)
        for spec in specs
    ]
    # A model whose key is not set would fail every call first: the list goes on without it.
    keyless = [m for m in models if isinstance(m, KeylessModel)]
    if keyless and len(keyless) == len(models):  # one model that names every key to set
        return KeylessModel(" or ".join(specs), "; ".join(m.reason for m in keyless))
    models = [m for m in models if not isinstance(m, KeylessModel)]
    if len(models) == 1:
        return models[0]
    return FallbackModel(models, on_fallback=note_fallback)
