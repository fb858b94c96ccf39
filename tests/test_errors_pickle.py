"""Every error of the agent package survives a pickle round trip: a run store written before
the gateway stored JSON only holds failed steps' errors pickled, and reads them back when
opted in (`[store] read_pickled`)."""

from __future__ import annotations

import inspect
import pickle

import pytest

from agent import errors
from agent.errors import (
    AgentError,
    AllModelsFailed,
    ContextWindowExceeded,
    MemoryDriverMissing,
    MemoryStoreError,
    MemoryWriteUnknown,
    MissingApiKey,
    ModelAuthError,
    ModelConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
    ScriptExhausted,
    StateError,
    StepInterrupted,
)
from agent.protocol import AgentRequestMetadata, EngineRequest

HTTP_ERROR = ModelHTTPError(
    "openai:gpt-4.1-mini: HTTP 400: bad schema",
    status_code=400,
    provider="openai",
    provider_message="bad schema",
    code="invalid_request_error",
)

SAMPLES: dict[type[AgentError], AgentError] = {
    AgentError: AgentError("something failed"),
    ModelError: ModelError("a model call failed"),
    ContextWindowExceeded: ContextWindowExceeded("would not fit: 9000 of 8192 tokens"),
    ModelHTTPError: HTTP_ERROR,
    ModelAuthError: ModelAuthError(
        "gemini:gemini-2.5-flash: HTTP 400: API key not valid. Please pass a valid API key.",
        status_code=400,
        provider="gemini",
        provider_message="API key not valid. Please pass a valid API key.",
    ),
    ModelConnectionError: ModelConnectionError("cannot reach http://127.0.0.1:1/v1"),
    ModelTimeout: ModelTimeout("did not answer within 30 s", seconds=30.0),
    ModelResponseError: ModelResponseError("answer is not JSON"),
    AllModelsFailed: AllModelsFailed(
        [("openai:gpt-4.1-mini", HTTP_ERROR), ("gemini:x", ModelTimeout("slow", seconds=5))]
    ),
    ScriptExhausted: ScriptExhausted("no answers left"),
    ModelConfigError: ModelConfigError("unknown model spec"),
    MissingApiKey: MissingApiKey("openai needs an API key: set OPENAI_API_KEY"),
    MemoryStoreError: MemoryStoreError("cannot reach redis://127.0.0.1:6379/0"),
    MemoryWriteUnknown: MemoryWriteUnknown("chat memory redis://127.0.0.1:6379/0: Timeout"),
    MemoryDriverMissing: MemoryDriverMissing("Redis memory needs its driver: pip install ..."),
    StateError: StateError("metadata from another version"),
    StepInterrupted: StepInterrupted(
        HTTP_ERROR, EngineRequest(actions=[], metadata=AgentRequestMetadata(iteration_count=3))
    ),
}


def test_every_error_class_has_a_sample() -> None:
    tree = {
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, AgentError)
    }
    assert tree == set(SAMPLES)


def _same(a: object, b: object) -> bool:
    """Equal values; exceptions (equal only to themselves) by type, args and fields."""
    if isinstance(a, BaseException):
        if not isinstance(b, BaseException) or type(a) is not type(b):
            return False
        fields: dict[str, object] = vars(a)
        others: dict[str, object] = vars(b)
        return (
            a.args == b.args
            and fields.keys() == others.keys()
            and all(_same(fields[k], others[k]) for k in fields)
        )
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        left: list[object] = list(a)  # pyright: ignore[reportUnknownArgumentType]
        right: list[object] = list(b)  # pyright: ignore[reportUnknownArgumentType]
        return len(left) == len(right) and all(map(_same, left, right))
    return a == b


@pytest.mark.parametrize("kind", list(SAMPLES), ids=lambda kind: kind.__name__)
def test_an_error_survives_a_pickle_round_trip(kind: type[AgentError]) -> None:
    error = SAMPLES[kind]
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is kind
    assert str(copy) == str(error)
    assert _same(copy, error)


def test_fields_come_back_readable() -> None:
    copy = pickle.loads(pickle.dumps(SAMPLES[AllModelsFailed]))
    assert isinstance(copy, AllModelsFailed)
    name, first = copy.failures[0]
    assert name == "openai:gpt-4.1-mini"
    assert isinstance(first, ModelHTTPError)
    assert (first.status_code, first.provider, first.provider_message, first.code) == (
        400,
        "openai",
        "bad schema",
        "invalid_request_error",
    )
    interrupted = pickle.loads(pickle.dumps(SAMPLES[StepInterrupted]))
    assert isinstance(interrupted, StepInterrupted)
    assert interrupted.progress.metadata.iteration_count == 3
    assert isinstance(interrupted.error, ModelHTTPError)
