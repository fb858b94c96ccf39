"""Output validators: a check of the agent's answer beyond its schema, written in Python.

A validator is a function (sync or async) given the answer (the validated structured value
when the agent has an `OutputSchema`, else the text) and, if it takes a second argument, an
`AnswerInfo`. It returns the answer, changed or not, or raises `ModelRetry` to refuse it: the
message goes back to the model, as a schema's errors do, against the same `output_retries`.
Anything else it raises fails the item, saying so. A sync validator runs in a worker thread,
as a sync tool does: it may block (a database lookup) without stalling the other items.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio.to_thread
from pydantic import JsonValue

from .messages import AssistantMessage
from .output import FINAL_RESULT_TOOL, NOT_AN_ANSWER, OutputInvalid, OutputSchema
from .scratchpad import ERROR_PREFIX

__all__ = [
    "AnswerInfo",
    "ModelRetry",
    "OutputValidator",
    "ValidatorFailed",
    "check_validator",
    "failed_after",
    "run_validator",
    "told_again",
    "validated_answer",
]

OutputValidator = Callable[..., Any]
"""`fn(answer)` or `fn(answer, info: AnswerInfo)`, returning the answer or an awaitable of it."""


class ModelRetry(Exception):  # a control-flow signal, not an error
    """Raised by an output validator: the answer is refused and `str(exc)` tells the model why.

    After `output_retries` refusals (schema errors count too) the item fails with the last
    message."""


@dataclass(frozen=True, slots=True)
class AnswerInfo:
    """What a validator may want to know of the answer's run besides the answer."""

    prompt: str
    item_index: int
    session_id: str | None
    retry: int
    """Answers of this item already sent back (0 for its first)."""
    run_id: str | None
    context: Mapping[str, JsonValue] | None = None
    """The item's run context (`AgentItem.context`), if it has one."""


class ValidatorFailed(Exception):
    """The validator raised something other than `ModelRetry`, or returned no answer; the
    message says which, for the item's error."""


def check_validator(validator: OutputValidator) -> None:
    """Raises `ValueError` unless `validator` can be called with the answer, or the answer
    and an `AnswerInfo`: said when the agent is made, not at its first answer."""
    if not callable(validator):
        raise ValueError(f"an output validator must be a function, not {validator!r}")
    _takes_info(validator)


def _takes_info(validator: OutputValidator) -> bool:
    try:
        signature = inspect.signature(validator)
    except (TypeError, ValueError):  # a builtin without a signature: given the answer alone
        return False
    for arguments in ((object(), object()), (object(),)):
        try:
            signature.bind(*arguments)
        except TypeError:
            continue
        return len(arguments) == 2
    raise ValueError(
        f"an output validator takes the answer (and an optional AnswerInfo): "
        f"{_name(validator)}{signature} cannot be called so"
    )


async def run_validator(
    validator: OutputValidator, answer: JsonValue, info: AnswerInfo
) -> JsonValue:
    """The validator's answer. Lets `ModelRetry` through; raises `ValidatorFailed` for any
    other exception (with its type and message)."""
    arguments: tuple[Any, ...] = (answer, info) if _takes_info(validator) else (answer,)
    try:
        if inspect.iscoroutinefunction(validator):
            result = await validator(*arguments)
        else:
            result = await anyio.to_thread.run_sync(lambda: validator(*arguments))
            if inspect.isawaitable(result):  # a callable object with an async __call__
                result = await result
    except ModelRetry:
        raise
    except Exception as exc:
        raise ValidatorFailed(
            f"the output validator {_name(validator)} raised {type(exc).__name__}: {exc}"
        ) from exc
    return result


async def validated_answer(
    validator: OutputValidator,
    output: OutputSchema | None,
    answer: AssistantMessage,
    value: JsonValue | object,
    info: AnswerInfo,
) -> tuple[AssistantMessage, JsonValue | object]:
    """The answer (its message, and its structured value or `NOT_AN_ANSWER`) as `validator`
    returns it. Raises `ModelRetry` (refused) or `ValidatorFailed` (it failed, or returned
    what is no answer)."""
    given = answer.content if value is NOT_AN_ANSWER else cast(JsonValue, value)
    try:
        returned = await run_validator(validator, given, info)
    except ModelRetry as refused:
        # Of several `final_result` calls, the first the validator takes is the answer.
        if output is not None:
            for other in _later_answers(output, answer):
                try:
                    return answer, await validated_value(validator, output, other, info)
                except ModelRetry:
                    continue
        raise refused from None
    if output is None:
        if not isinstance(returned, str):
            raise ValidatorFailed(
                f"the output validator {_name(validator)} returned "
                f"{type(returned).__name__}, not the answer's text (a str)"
            )
        if returned == answer.content:
            return answer, value
        # A new message: the provider's raw payload holds the text as the model wrote it.
        return AssistantMessage(content=returned, usage=answer.usage), value
    return answer, _fitted(validator, output, returned)


async def validated_value(
    validator: OutputValidator, output: OutputSchema, value: JsonValue, info: AnswerInfo
) -> JsonValue:
    """`value` (one that fits `output`) as `validator` returns it. Raises as
    `validated_answer`."""
    return _fitted(validator, output, await run_validator(validator, value, info))


def _fitted(validator: OutputValidator, output: OutputSchema, returned: JsonValue) -> JsonValue:
    try:  # what it returns is the run's output: it must still fit the schema
        return output.validate(returned)
    except (OutputInvalid, TypeError, ValueError) as exc:
        raise ValidatorFailed(
            f"the output validator {_name(validator)} returned an answer that does not fit "
            f"the output schema: {exc}"
        ) from None


def _later_answers(output: OutputSchema, answer: AssistantMessage) -> list[JsonValue]:
    """The values of `answer`'s `final_result` calls that fit `output`, but the first (the one
    `structured_answer` took): the model's other answers in the same message."""
    fitting: list[JsonValue] = []
    for call in answer.tool_calls:
        if call.name != FINAL_RESULT_TOOL or call.invalid_arguments is not None:
            continue
        try:
            fitting.append(output.from_call(call.arguments))
        except OutputInvalid:
            continue
    return fitting[1:]


def told_again(
    output: OutputSchema | None,
    refused: OutputInvalid,
    validator: bool,
    native: bool,
    call_id: str | None = None,
) -> str:
    """What the model is told of an answer the schema (or the validator) refused; `native`:
    it answers in JSON text, not by a `final_result` call; `call_id`: that call's own refusal
    (of several `final_result` calls, `OutputInvalid.calls`)."""
    if call_id is not None:
        refused = refused.calls.get(call_id, refused)
    why = "was not accepted" if validator else "does not fit the output schema"
    again = "Answer again, corrected."
    if output is not None:
        again = (
            "Answer again with corrected JSON."
            if native
            else f"Call {FINAL_RESULT_TOOL} again with a corrected answer."
        )
    return f"{ERROR_PREFIX}the answer {why}: {refused}. {again}"


def failed_after(retries: int, refused: OutputInvalid, validator: bool) -> str:
    """The item's error when its answer is refused once more than `retries` allows."""
    after = "1 retry" if retries == 1 else f"{retries} retries"
    why = "was refused by the output validator" if validator else "did not fit the output schema"
    return f"the model's answer {why} after {after}: {refused.what}"


def _name(validator: OutputValidator) -> str:
    module = getattr(validator, "__module__", None)
    name = getattr(validator, "__qualname__", None) or type(validator).__name__
    return f"{module}:{name}" if module else name
