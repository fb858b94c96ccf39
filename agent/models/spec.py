"""Model specs, the strings config files and the CLI use to name a model.

    openai:MODEL                      OPENAI_API_KEY
    openai-compatible:URL#MODEL       key optional: OPENAI_COMPATIBLE_API_KEY
    anthropic:MODEL                   ANTHROPIC_API_KEY
    gemini:MODEL                      GEMINI_API_KEY (or GOOGLE_API_KEY)
    scripted:FILE                     a ScriptedModel replaying a JSON script

`sampling` (asking the MCP client's own model) is not a spec this package can build: it needs
an MCP session, so the gateway must recognise it before calling `model_from_spec`; here it
raises `ModelConfigError` saying so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import httpx

from ..errors import ModelConfigError, StateError
from ..model import ChatModel
from .anthropic import AnthropicModel
from .gemini import GeminiModel
from .openai import OpenAICompatibleModel, OpenAIModel
from .retry import RetryPolicy
from .settings import ModelSettings

__all__ = ["API_KEYS", "SPEC_FORMS", "api_key_names", "model_from_spec"]

SPEC_FORMS = (
    "openai:MODEL",
    "openai-compatible:URL#MODEL",
    "anthropic:MODEL",
    "gemini:MODEL",
    "scripted:FILE",
)

API_KEYS: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""The environment variables a provider's key is read from, in order, where one is required."""


def api_key_names(spec: str) -> tuple[str, ...]:
    """The variables one of which must hold a key for `spec` (none: it needs no key)."""
    return API_KEYS.get(spec.strip().partition(":")[0].lower(), ())


def model_from_spec(
    spec: str,
    *,
    http_client: httpx.AsyncClient | None = None,
    api_keys: Mapping[str, str] | None = None,
    settings: ModelSettings | None = None,
    retry: RetryPolicy | None = None,
) -> ChatModel:
    """The model `spec` names, e.g. `openai-compatible:http://127.0.0.1:11434/v1#qwen2.5`.

    `api_keys` maps environment variable names (`OPENAI_API_KEY`, ...) to keys and is looked at
    before the environment. `http_client` is shared by the model's requests (pass one client
    to every model); without it a process-wide client is used.

    Raises `ModelConfigError` (a `ValueError`) for an unknown or malformed spec, a missing key,
    or an unreadable script.
    """
    kind, colon, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "sampling":
        raise ModelConfigError(
            "'sampling' uses the MCP client's own model and is only available when the gateway "
            "is served over MCP; it cannot be built without an MCP session"
        )
    if not colon or not rest:
        raise _unknown(spec)

    def key(*names: str) -> str | None:
        for name in names:
            value = (api_keys or {}).get(name) or os.environ.get(name)
            if value:
                return value
        return None

    def required_key(provider: str, *names: str) -> str:
        value = key(*names)
        if value is None:
            raise ModelConfigError(f"{provider} needs an API key: set {' or '.join(names)}")
        return value

    if kind == "openai":
        return OpenAIModel(
            rest,
            api_key=required_key("openai", *API_KEYS["openai"]),
            http_client=http_client,
            settings=settings,
            retry=retry,
        )
    if kind == "openai-compatible":
        url, hash_sign, model = rest.rpartition("#")
        if not hash_sign or not url or not model:
            raise ModelConfigError(
                "openai-compatible needs a base URL and a model: "
                "openai-compatible:http://127.0.0.1:11434/v1#qwen2.5"
            )
        return OpenAICompatibleModel(
            url,
            model,
            # Never OPENAI_API_KEY: that would send a real OpenAI key to whatever URL is named.
            api_key=key("OPENAI_COMPATIBLE_API_KEY"),
            http_client=http_client,
            settings=settings,
            retry=retry,
        )
    if kind == "anthropic":
        return AnthropicModel(
            rest,
            api_key=required_key("anthropic", *API_KEYS["anthropic"]),
            http_client=http_client,
            settings=settings,
            retry=retry,
        )
    if kind == "gemini":
        return GeminiModel(
            rest,
            api_key=required_key("gemini", *API_KEYS["gemini"]),
            http_client=http_client,
            settings=settings,
            retry=retry,
        )
    if kind == "scripted":
        from ..scripted import ScriptedModel  # the scripted model is for tests and demos only

        try:
            return ScriptedModel.from_file(Path(rest))
        except StateError as exc:
            raise ModelConfigError(str(exc)) from exc
    raise _unknown(spec)


def _unknown(spec: str) -> ModelConfigError:
    forms = ", ".join(SPEC_FORMS)
    shown = spec.split(":", 1)[0] + (":..." if ":" in spec else "")
    return ModelConfigError(f"unknown model spec {shown!r}; expected one of: {forms}, sampling")
