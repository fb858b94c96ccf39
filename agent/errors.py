"""Exceptions raised by the agent package.

    AgentError
    ├── ModelError                 a model call failed
    │   ├── ModelHTTPError         the provider answered with an error status
    │   ├── ModelConnectionError   the provider could not be reached, even after retries
    │   ├── ModelResponseError     the provider's answer could not be read, or it refused
    │   ├── AllModelsFailed        every model of a FallbackModel failed
    │   └── ScriptExhausted        a ScriptedModel ran out of answers
    ├── ModelConfigError           a model spec or its configuration is wrong (also a ValueError)
    └── StateError                 metadata or a response that cannot be resumed

"Max iterations reached" and "unknown tool" are not exceptions: they are outcomes of a run
(an item's error, an observation for the model). No message in this tree carries an API key.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "AgentError",
    "AllModelsFailed",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ScriptExhausted",
    "StateError",
]


class AgentError(Exception):
    """Base of every error the agent package raises."""


class ModelError(AgentError):
    """A model call failed."""


class ModelHTTPError(ModelError):
    """The provider answered with an error status.

    `provider_message` is the provider's own explanation (e.g. OpenAI's `error.message`), when
    the body had one.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        provider: str,
        provider_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.provider = provider
        self.provider_message = provider_message


class ModelConnectionError(ModelError):
    """The provider could not be reached (connect, read or protocol failure), after retries."""


class ModelResponseError(ModelError):
    """The provider's answer was unreadable (bad JSON, broken stream) or a refusal to answer."""


class AllModelsFailed(ModelError):
    """Every model of a `FallbackModel` failed; `failures` pairs each model's name with its error."""

    def __init__(self, failures: Sequence[tuple[str, ModelError]]) -> None:
        self.failures = tuple(failures)
        summary = "; ".join(f"{name}: {error}" for name, error in self.failures)
        super().__init__(f"all {len(self.failures)} models failed: {summary}")


class ScriptExhausted(ModelError):
    """A ScriptedModel was called more often than it has answers."""


class ModelConfigError(AgentError, ValueError):
    """A model spec or its configuration is wrong: unknown prefix, missing API key, bad URL."""


class StateError(AgentError):
    """Agent metadata or an engine response that cannot be resumed."""
