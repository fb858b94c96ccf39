"""Model specs, the strings config files and the CLI use to name a model.

    openai:MODEL                      OPENAI_API_KEY; elsewhere: OPENAI_BASE_URL
    openai-responses:MODEL            the same, through the Responses API (reasoning kept)
    openai-responses:URL#MODEL        any server's Responses API; key optional, as below
    openai-compatible:URL#MODEL       key optional: OPENAI_COMPATIBLE_API_KEY
    anthropic:MODEL                   ANTHROPIC_API_KEY; elsewhere: ANTHROPIC_BASE_URL
    gemini:MODEL                      GEMINI_API_KEY (or GOOGLE_API_KEY); GOOGLE_GEMINI_BASE_URL
    scripted:FILE                     a ScriptedModel replaying a JSON script

A hosted provider's base URL variable is the one its official SDK reads, meaning what it means
there (so one value serves both): OpenAI's includes `/v1`, Anthropic's and Gemini's are the
server's root (`/v1`, `/v1beta` follow). A spec with a URL names a server of its own: it is
sent `OPENAI_COMPATIBLE_API_KEY` when set, never a hosted provider's key (that would go to
whatever URL is named), and the URL's user and password as HTTP Basic auth.

`sampling` (asking the MCP client's own model) is not a spec this package can build: it needs
an MCP session, so the gateway must recognise it before calling `model_from_spec`; here it
raises `ModelConfigError` saying so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..errors import MissingApiKey, ModelConfigError, StateError
from ..model import ChatModel
from ..url_credentials import HIDDEN, query_credentials, query_without_credentials
from ._http import public_url
from .anthropic import ANTHROPIC_BASE_URL, AnthropicModel
from .anthropic_output import NO_STRUCTURED_OUTPUTS, anthropic_output_schema, has_structured_outputs
from .gemini import GEMINI_BASE_URL, GeminiModel, schema_beside_tools
from .openai import OPENAI_BASE_URL, OpenAICompatibleModel, OpenAIModel
from .openai_responses import OpenAICompatibleResponsesModel, OpenAIResponsesModel
from .retry import RetryPolicy
from .settings import ModelSettings

__all__ = [
    "API_KEYS",
    "BASE_URLS",
    "NATIVE_OUTPUT",
    "PROVIDERS",
    "SPEC_FORMS",
    "ModelRequest",
    "ProviderFactory",
    "api_key_names",
    "model_from_spec",
    "native_output_refused",
    "spec_without_credentials",
    "stored_without_credentials",
]

SPEC_FORMS = (
    "openai:MODEL",
    "openai-responses:MODEL",
    "openai-responses:URL#MODEL",
    "openai-compatible:URL#MODEL",
    "anthropic:MODEL",
    "gemini:MODEL",
    "scripted:FILE",
)

API_KEYS: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "openai-responses": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""The environment variables a provider's key is read from, in order, where one is required."""

BASE_URLS: Mapping[str, tuple[str, str, str]] = {
    "openai": ("OPENAI_BASE_URL", "", OPENAI_BASE_URL),
    "openai-responses": ("OPENAI_BASE_URL", "", OPENAI_BASE_URL),
    "anthropic": ("ANTHROPIC_BASE_URL", "/v1", ANTHROPIC_BASE_URL),
    "gemini": ("GOOGLE_GEMINI_BASE_URL", "/v1beta", GEMINI_BASE_URL),
}
"""Per hosted provider: the variable its official SDK reads its base URL from, the path the
SDK puts after it, and the URL used when the variable is not set."""


def api_key_names(spec: str) -> tuple[str, ...]:
    """The variables one of which must hold a key for `spec` (none: it needs no key)."""
    kind, _, rest = spec.strip().partition(":")
    if kind.lower() == "openai-responses" and _names_a_server(rest):
        return ()
    return API_KEYS.get(kind.lower(), ())


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What a provider factory builds a model from: the spec after `provider:`, and how."""

    model: str
    http_client: httpx.AsyncClient | None
    settings: ModelSettings | None
    retry: RetryPolicy | None
    api_keys: Mapping[str, str]
    """Keys (and base URLs) by environment variable name, looked at before the environment."""

    def key(self, *names: str) -> str | None:
        """The first of the variables that holds a value, or None."""
        for name in names:
            value = self.api_keys.get(name) or os.environ.get(name)
            if value:
                return value
        return None

    def base_url(self, provider: str) -> str:
        """The provider's API root: from its SDK's variable (`BASE_URLS`), else the default.

        Raises `ModelConfigError` for a value that is not an http(s) URL."""
        name, suffix, default = BASE_URLS[provider]
        value = self.key(name)
        if value is None:
            return default
        if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname:
            raise ModelConfigError(f"{name} must be an http(s) URL, not {public_url(value)!r}")
        return value.rstrip("/") + suffix

    def required_key(self, provider: str) -> str:
        """The provider's key (`API_KEYS`); raises `ModelConfigError` naming where to set it."""
        names = API_KEYS[provider]
        value = self.key(*names)
        if value is None:
            raise MissingApiKey(f"{provider} needs an API key: set {' or '.join(names)}")
        return value


ProviderFactory = Callable[[ModelRequest], ChatModel]
"""Builds one provider's model; raises `ModelConfigError` for what it cannot use."""


class _KeyedModel(Protocol):
    def __call__(
        self,
        model: str,
        /,
        *,
        api_key: str,
        base_url: str,
        http_client: httpx.AsyncClient | None,
        settings: ModelSettings | None,
        retry: RetryPolicy | None,
    ) -> ChatModel: ...


def _keyed(provider: str, model_type: _KeyedModel) -> ProviderFactory:
    """The factory of a hosted provider that needs its key."""

    def build(request: ModelRequest) -> ChatModel:
        return model_type(
            request.model,
            api_key=request.required_key(provider),
            base_url=request.base_url(provider),
            http_client=request.http_client,
            settings=request.settings,
            retry=request.retry,
        )

    return build


def _openai_compatible(request: ModelRequest) -> ChatModel:
    url, model = _server_and_model("openai-compatible", request.model, "11434/v1#qwen2.5")
    return OpenAICompatibleModel(
        url,
        model,
        api_key=_server_key(request),
        http_client=request.http_client,
        settings=request.settings,
        retry=request.retry,
    )


_hosted_responses = _keyed("openai-responses", OpenAIResponsesModel)


def _openai_responses(request: ModelRequest) -> ChatModel:
    """OpenAI's Responses API (`MODEL`), or a server's (`URL#MODEL`: vLLM, Ollama, ...)."""
    if not _names_a_server(request.model):
        return _hosted_responses(request)
    url, model = _server_and_model("openai-responses", request.model, "8000/v1#openai/gpt-oss-20b")
    return OpenAICompatibleResponsesModel(
        url,
        model,
        api_key=_server_key(request),
        http_client=request.http_client,
        settings=request.settings,
        retry=request.retry,
    )


def _names_a_server(rest: str) -> bool:
    """Whether the spec after `openai-responses:` is `URL#MODEL`: no OpenAI model's name has
    a `#` or a `://` (a fine-tuned one's has colons, `ft:gpt-4.1-mini:org::id`)."""
    return "#" in rest or "://" in rest


def _server_and_model(kind: str, rest: str, example: str) -> tuple[str, str]:
    url, hash_sign, model = rest.rpartition("#")
    if not hash_sign or not url or not model:
        raise ModelConfigError(
            f"{kind}:URL#MODEL needs a base URL and a model: {kind}:http://127.0.0.1:{example}"
        )
    return url, model


def _server_key(request: ModelRequest) -> str | None:
    # Never OPENAI_API_KEY: that would send a real OpenAI key to whatever URL is named.
    return request.key("OPENAI_COMPATIBLE_API_KEY")


def _scripted(request: ModelRequest) -> ChatModel:
    from ..scripted import ScriptedModel  # the scripted model is for tests and demos only

    try:
        return ScriptedModel.from_file(Path(request.model))
    except StateError as exc:
        raise ModelConfigError(str(exc)) from exc


PROVIDERS: Mapping[str, ProviderFactory] = {
    "openai": _keyed("openai", OpenAIModel),
    "openai-responses": _openai_responses,
    "openai-compatible": _openai_compatible,
    "anthropic": _keyed("anthropic", AnthropicModel),
    "gemini": _keyed("gemini", GeminiModel),
    "scripted": _scripted,
}
"""The factory of each spec's provider (the part before the first `:`)."""

NATIVE_OUTPUT = frozenset(
    {"openai", "openai-responses", "openai-compatible", "anthropic", "gemini", "scripted"}
)
"""The providers whose models hold an answer to a schema themselves (`agent.native_output`);
a scripted model answers as scripted, for tests and dry runs."""


def native_output_refused(
    spec: str, *, with_tools: bool = False, schema: Mapping[str, Any] | None = None
) -> str | None:
    """Why the model `spec` names cannot answer in native mode (`with_tools`: beside tools
    it may call; `schema`: held to this strict schema); None when it can."""
    kind, _, name = spec.partition(":")
    if kind == "anthropic" and not has_structured_outputs(name):
        return f'{spec!r} {NO_STRUCTURED_OUTPUTS}; use output_mode = "tool" (the default)'
    if kind == "anthropic" and schema is not None:
        try:
            anthropic_output_schema(schema)
        except ValueError as exc:
            return f'{spec!r}: {exc}; use output_mode = "tool" (the default)'
    if with_tools and kind == "gemini" and not schema_beside_tools(name):
        return (
            f"{spec!r} takes no response schema beside function calling (Gemini 3 does): use "
            'output_mode = "tool" (the default) for an agent with tools'
        )
    if kind in NATIVE_OUTPUT:
        return None
    return (
        f"{spec_without_credentials(spec)!r} has no native structured output (only "
        f"{', '.join(sorted(NATIVE_OUTPUT - {'scripted'}))} have); "
        'use output_mode = "tool" (the default)'
    )


def model_from_spec(
    spec: str,
    *,
    http_client: httpx.AsyncClient | None = None,
    api_keys: Mapping[str, str] | None = None,
    settings: ModelSettings | None = None,
    retry: RetryPolicy | None = None,
) -> ChatModel:
    """The model `spec` names, e.g. `openai-compatible:http://127.0.0.1:11434/v1#qwen2.5`,
    built by its provider's factory (`PROVIDERS`).

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
    factory = PROVIDERS.get(kind)
    if factory is not None and not rest.strip():
        form = next(f for f in SPEC_FORMS if f.startswith(f"{kind}:"))
        raise ModelConfigError(f"model spec {spec.strip()!r} names no model: write {form}")
    if factory is None or not colon:
        raise _unknown(spec)
    return factory(ModelRequest(rest, http_client, settings, retry, api_keys or {}))


def spec_without_credentials(spec: str) -> str:
    """`spec` with the credentials of its URL (`openai-compatible:http://bob:PASS@host/v1#m`,
    `...?api_key=KEY`) replaced by `***`: the password, a user without a password (a token in
    its place), the value of a query parameter that names a credential. A spec to store or
    show: the credentials stay in the caller's hands only."""
    kind, colon, rest = spec.partition(":")
    if not colon:
        return spec
    try:
        parts = urlsplit(rest)
    except ValueError:
        return f"{kind}:<a URL that cannot be parsed>"
    user_info = parts.username is not None or parts.password is not None
    # A URL's only (with a host): not a query-like part of a script's file name.
    query = query_without_credentials(parts.query) if parts.netloc else parts.query
    if not user_info and query == parts.query:
        return spec
    netloc = parts.netloc
    if user_info:
        host = netloc.rpartition("@")[2]
        who = f"{parts.username or ''}:{HIDDEN}" if parts.password is not None else HIDDEN
        netloc = f"{who}@{host}"
    return f"{kind}:{urlunsplit(parts._replace(netloc=netloc, query=query))}"


def stored_without_credentials(spec: str) -> bool:
    """Whether `spec` is one `spec_without_credentials` took credentials out of: it cannot
    be built as it is, the credentials must be given again."""
    try:
        parts = urlsplit(spec.partition(":")[2])
    except ValueError:
        return False
    if HIDDEN in (parts.password, parts.username if parts.password is None else None):
        return True
    return bool(parts.netloc) and HIDDEN in query_credentials(parts.query)


def _unknown(spec: str) -> ModelConfigError:
    forms = ", ".join(SPEC_FORMS)
    shown = spec.split(":", 1)[0] + (":..." if ":" in spec else "")
    return ModelConfigError(f"unknown model spec {shown!r}; expected one of: {forms}, sampling")
