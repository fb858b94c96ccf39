"""Real model providers behind the `ChatModel` protocol, and a spec parser to pick one.

Every provider is a small module over shared plumbing (`_http`: a pooled `httpx` client per
event loop, retries with backoff and `Retry-After`, SSE, errors from `agent.errors`). A provider writes
its own id into `AssistantMessage.provider` and its wire payload into `raw` (always with
`raw["model"]`, the answering model's name), and replays `raw` only to itself.
"""

from ._clients import new_http_client, shared_http_client
from .anthropic import AnthropicModel
from .fallback import FallbackCallback, FallbackModel
from .gemini import GeminiModel
from .openai import OpenAICompatibleModel, OpenAIModel
from .openai_responses import OpenAICompatibleResponsesModel, OpenAIResponsesModel
from .retry import RetryPolicy
from .settings import (
    ModelSettings,
    answer_token_limit,
    capped_max_tokens,
    request_headers,
)
from .spec import (
    API_KEYS,
    PROVIDERS,
    SPEC_FORMS,
    ModelRequest,
    ProviderFactory,
    api_key_names,
    model_from_spec,
    spec_without_credentials,
    stored_without_credentials,
)
from .text_tool_calls import parse_text_tool_calls
from .thinking import thinking_text

__all__ = [
    "API_KEYS",
    "PROVIDERS",
    "SPEC_FORMS",
    "AnthropicModel",
    "FallbackCallback",
    "FallbackModel",
    "GeminiModel",
    "ModelRequest",
    "ModelSettings",
    "OpenAICompatibleModel",
    "OpenAICompatibleResponsesModel",
    "OpenAIModel",
    "OpenAIResponsesModel",
    "ProviderFactory",
    "RetryPolicy",
    "answer_token_limit",
    "api_key_names",
    "capped_max_tokens",
    "model_from_spec",
    "new_http_client",
    "parse_text_tool_calls",
    "request_headers",
    "shared_http_client",
    "spec_without_credentials",
    "stored_without_credentials",
    "thinking_text",
]
