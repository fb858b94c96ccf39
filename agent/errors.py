"""Exceptions raised by the agent package.

    AgentError
    ├── ModelError                 a model call failed
    │   ├── ModelHTTPError         the provider answered with an error status
    │   └── ScriptExhausted        a ScriptedModel ran out of answers
    └── StateError                 metadata or a response that cannot be resumed

"Max iterations reached" and "unknown tool" are not exceptions: they are outcomes of a run
(an item's error, an observation for the model).
"""

from __future__ import annotations

__all__ = ["AgentError", "ModelError", "ModelHTTPError", "ScriptExhausted", "StateError"]


class AgentError(Exception):
    """Base of every error the agent package raises."""


class ModelError(AgentError):
    """A model call failed."""


class ModelHTTPError(ModelError):
    """The provider answered with an error status."""

    def __init__(self, message: str, *, status_code: int, provider: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.provider = provider


class ScriptExhausted(ModelError):
    """A ScriptedModel was called more often than it has answers."""


class StateError(AgentError):
    """Agent metadata or an engine response that cannot be resumed."""
