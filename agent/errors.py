"""Exceptions raised by the agent package.

    AgentError
    ├── ModelError                 a model call failed
    │   ├── ModelHTTPError         the provider answered with an error status
    │   │   └── ModelAuthError     it refused the key (401, 403, Gemini's 400 API_KEY_INVALID)
    │   ├── ModelConnectionError   the provider could not be reached, even after retries
    │   │   └── ModelTimeout       it was reached but sent nothing within the read timeout
    │   ├── ModelResponseError     the provider's answer could not be read, or it refused
    │   ├── AllModelsFailed        every model of a FallbackModel failed
    │   ├── ContextWindowExceeded  the call would not fit the model's context (not sent)
    │   └── ScriptExhausted        a ScriptedModel ran out of answers
    ├── ModelConfigError           a model spec or its configuration is wrong (also a ValueError)
    │   └── MissingApiKey          the provider's API key is not set
    ├── MemoryStoreError           chat memory's storage failed, or its URL or a session id is bad
    │   ├── MemoryWriteUnknown     a write was sent but no answer came: it may yet be applied
    │   └── MemoryDriverMissing    the store's driver is not installed (an extra to install)
    ├── StateError                 metadata or a response that cannot be resumed (also a
    │                              ValueError: parsing another version's metadata raises it)
    └── StepInterrupted            a step stopped part-way: checkpoint its progress, retry from it

    StepPaused                     not an error: an item's model call of a step of several
                                   items raised a signal (a pause for an answer from outside);
                                   checkpoint the progress, then let the signals through
    ModelRetry                     not an error: an output validator refused the model's answer,
                                   which goes back to it (`agent.output_validator`)

"Max iterations reached" and "unknown tool" are not exceptions: they are outcomes of a run
(an item's error, an observation for the model). Nor is a model error that only one item's
request caused (`fails_only_its_item`: the provider rejected its content, or it would not fit
the context window): that item fails, the others go on. No message in this
tree carries an API key. Every error pickles with its type, message and fields (a store
written before the gateway stored JSON only, read with its opt-in, holds errors so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .protocol import EngineRequest

__all__ = [
    "AgentError",
    "AllModelsFailed",
    "ContextWindowExceeded",
    "MemoryDriverMissing",
    "MemoryStoreError",
    "MemoryWriteUnknown",
    "MissingApiKey",
    "ModelAuthError",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeout",
    "ScriptExhausted",
    "StateError",
    "StepInterrupted",
    "StepPaused",
    "exceeds_context_window",
    "fails_only_its_item",
    "without_provider_words",
]


class AgentError(Exception):
    """Base of every error the agent package raises."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its args and fields without calling `__init__`: the default (the class
        # called with `args`) misses keyword-only fields (ModelHTTPError's) and gets the wrong
        # arguments where `__init__` makes the message (AllModelsFailed, StepInterrupted).
        return (_rebuilt, (type(self), self.args), self.__dict__ or None)


def _rebuilt(kind: type[AgentError], args: tuple[Any, ...]) -> AgentError:
    return kind.__new__(kind, *args)  # sets `args`; pickle then restores `__dict__`


class ModelError(AgentError):
    """A model call failed."""


class ContextWindowExceeded(ModelError):
    """The conversation plus the tools' definitions would not fit the model's context window;
    the call was not sent."""


class ModelHTTPError(ModelError):
    """The provider answered with an error status.

    `provider_message` is the provider's own explanation (e.g. OpenAI's `error.message`), when
    the body had one; `code` its own code (OpenAI's `error.code`: `context_length_exceeded`).
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        provider: str,
        provider_message: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.provider = provider
        self.provider_message = provider_message
        self.code = code


class ModelAuthError(ModelHTTPError):
    """The provider refused the credentials: a key that is wrong, expired or not allowed this
    model (HTTP 401 or 403; Gemini says a wrong key with 400 and the reason `API_KEY_INVALID`).
    Never one item's fault: it stops the run, which can resume once the key is mended."""


class ModelConnectionError(ModelError):
    """The provider could not be reached (connect, read or protocol failure), after retries."""


class ModelTimeout(ModelConnectionError):
    """The provider took the request but sent nothing within the read timeout (`seconds`),
    before its answer began or part-way through it.

    Not retried: the request reached the provider, so asking again would have it generate,
    and bill, the answer again; a `FallbackModel` moves on at once.
    """

    def __init__(self, message: str, *, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class ModelResponseError(ModelError):
    """The provider's answer was unreadable (bad JSON, broken stream) or a refusal to answer."""


class AllModelsFailed(ModelError):
    """Every model of a `FallbackModel` failed; `failures` pairs each model's name with its error."""

    def __init__(self, failures: Sequence[tuple[str, ModelError]]) -> None:
        self.failures = tuple(failures)
        summary = "; ".join(_named(name, str(error)) for name, error in self.failures)
        super().__init__(f"all {len(self.failures)} models failed: {summary}")


def _named(name: str, said: str) -> str:
    """`said` led by the model's name once: a provider's errors already start with it."""
    return said if said.startswith(f"{name}: ") else f"{name}: {said}"


PROVIDER_WORDS_LEFT_OUT = "(the provider's words left out)"
"""What stands for the provider's explanation in `without_provider_words`."""


def without_provider_words(error: ModelError) -> str | None:
    """`error`'s message without what the provider said (an error status's explanation, the
    text of an answer it could not read): those may quote the request, a prompt or a tool's
    result. What is left is the gateway's words (which model, the status, why it was not
    retried); None when the message is the provider's through and through (an unreadable
    answer). For telemetry, which keeps no prompts."""
    if isinstance(error, AllModelsFailed):
        said = (
            _named(name, without_provider_words(failure) or type(failure).__name__)
            for name, failure in error.failures
        )
        return f"all {len(error.failures)} models failed: {'; '.join(said)}"
    if isinstance(error, ModelHTTPError):
        explained = error.provider_message
        if not explained:  # the status's phrase: no provider's words
            return str(error)
        status = f"HTTP {error.status_code}: "
        return str(error).replace(status + explained, status + PROVIDER_WORDS_LEFT_OUT, 1)
    if isinstance(error, ModelResponseError):
        return None
    return str(error)


class ScriptExhausted(ModelError):
    """A ScriptedModel was called more often than it has answers."""


class ModelConfigError(AgentError, ValueError):
    """A model spec or its configuration is wrong: unknown prefix, missing API key, bad URL."""


class MissingApiKey(ModelConfigError):
    """The provider's API key is not set (the message names the variable, never a value)."""


class MemoryStoreError(AgentError):
    """Chat memory's storage failed (unreachable server, unreadable data), or its URL or a
    session id is bad. Messages name the store, never its password."""


class MemoryWriteUnknown(MemoryStoreError):
    """A write reached the store (or may have), but its answer did not come in time: the
    store may apply it yet (Redis runs a queued script once it wakes). Writing it again with
    the same turn key is safe, and tells: stored once either way."""


class MemoryDriverMissing(MemoryStoreError):
    """The store's URL needs a driver that is not installed (`redis`, `psycopg`): a setup to
    fix (the message names what to install), not a store that failed."""


class StateError(AgentError, ValueError):
    """Agent metadata or an engine response that cannot be resumed: another version's
    metadata (refused while it is parsed, so pydantic's `ValidationError` carries the
    message), or a response that does not fit the step's items or the calls they made."""


class StepInterrupted(AgentError):
    """A model (or chat memory) failed during a step while other items went on.

    `progress` is the step's outcome for everything else: items that finished (their turns
    saved), and the tool calls of those that asked for tools. Checkpoint it and go on from it
    later: no item's model is called twice for this step, no turn is saved twice. `error` is
    the failure (the first, if several items failed).
    """

    def __init__(self, error: AgentError, progress: EngineRequest) -> None:
        super().__init__(str(error))
        self.error = error
        self.progress = progress


class StepPaused(Exception):  # a control-flow signal, not an error
    """Model calls of a step of several items raised something other than an `AgentError`
    (`signals`, in item order: a pause for an answer from outside, such as the client's own
    model's) while the other items went on.

    `progress` is as `StepInterrupted`'s: checkpoint it, then raise the signals; the retry
    makes the paused items' calls again, and no other item's.
    """

    def __init__(self, signals: Sequence[Exception], progress: EngineRequest) -> None:
        super().__init__(str(signals[0]))
        self.signals = list(signals)
        self.progress = progress


ITEM_STATUSES = frozenset({400, 413, 422})
"""Provider answers that reject one request's content (too long, malformed, refused)."""


def exceeds_context_window(error: ModelError) -> bool:
    """Whether `error` is that the request would not fit the context window: of the model
    (refused unsent, or by the provider with OpenAI's 400 `context_length_exceeded`), or of
    every model a `FallbackModel` tried."""
    if isinstance(error, AllModelsFailed):
        return all(exceeds_context_window(failure) for _, failure in error.failures)
    if isinstance(error, ModelHTTPError):
        return error.status_code == 400 and error.code == "context_length_exceeded"
    return isinstance(error, ContextWindowExceeded)


def fails_only_its_item(error: ModelError) -> bool:
    """Whether `error` is about the one item's request, so retrying later cannot help: the
    provider rejected its content, or it would not fit the model's context window (the same
    request would not fit on resume either). Every other model error (unreachable, rate
    limited, a bad key, a missing model) stops the run, which can resume later."""
    if isinstance(error, AllModelsFailed):
        return all(fails_only_its_item(failure) for _, failure in error.failures)
    if isinstance(error, ContextWindowExceeded):
        return True
    if isinstance(error, ModelAuthError):  # a 400, from Gemini: yet every item would fail
        return False
    return isinstance(error, ModelHTTPError) and error.status_code in ITEM_STATUSES
