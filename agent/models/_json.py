"""Defensive reading of provider JSON, and the tool-call details every provider shares.

Provider payloads are untrusted shapes: these helpers return an empty value of the expected
type instead of raising, so a missing field never turns into a `KeyError` deep in a mapper.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, TypeGuard

from ..messages import AssistantMessage, StopReason, ToolCall
from ..model_json import MAX_DEPTH, json_problem, nesting, read_model_json
from ..well_formed import well_formed

JSONObject = dict[str, Any]


def is_obj(value: object) -> TypeGuard[JSONObject]:
    return isinstance(value, dict)


def is_arr(value: object) -> TypeGuard[list[Any]]:
    return isinstance(value, list)


def obj(value: object) -> JSONObject:
    """`value` if it is a JSON object, else `{}`."""
    return value if is_obj(value) else {}


def arr(value: object) -> list[Any]:
    """`value` if it is a JSON array, else `[]`."""
    return value if is_arr(value) else []


def text(value: object) -> str:
    """`value` if it is a string, else `""` (JSON null content included)."""
    return value if isinstance(value, str) else ""


def count(value: object) -> int:
    """`value` if it is a token count, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def new_call_id() -> str:
    """An id for a tool call whose provider gave none (Gemini, text tool calls)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def tool_call(call_id: str, name: str, arguments: object) -> ToolCall:
    """A `ToolCall` from arguments as a provider gave them: a JSON object or its text.

    Anything that is not a JSON object, or not JSON a model may write (`model_json`: `NaN`,
    `1e999`, nesting deeper than 100 levels), ends in `invalid_arguments`, so the agent can
    tell the model what went wrong instead of running the tool with guessed arguments.
    """
    if isinstance(arguments, str):
        if not arguments.strip():
            return ToolCall(id=call_id, name=name)
        try:
            parsed: object = read_model_json(arguments)
        except ValueError:
            return ToolCall(id=call_id, name=name, invalid_arguments=arguments)
        if is_obj(parsed):
            return ToolCall(id=call_id, name=name, arguments=parsed)
        return ToolCall(id=call_id, name=name, invalid_arguments=arguments)
    if arguments is None:
        return ToolCall(id=call_id, name=name)
    if is_obj(arguments) and json_problem(arguments) is None:
        return ToolCall(id=call_id, name=name, arguments=well_formed(arguments))
    return ToolCall(id=call_id, name=name, invalid_arguments=_written(arguments))


def _written(value: object) -> str:
    """`value` (decoded JSON) as JSON text, for the model to be shown: `NaN` as Python
    writes it, and a value too deep to write as its first levels."""
    try:
        return json.dumps(value)
    except RecursionError:
        return "[" * nesting(value) + " ..."


MAX_ANSWER_DEPTH = MAX_DEPTH + 28
"""Levels a provider's answer (or stream event) may nest: a call's arguments as deep as they
may be (`model_json.MAX_DEPTH`) and what holds them, with room to spare. The answer is kept
(`AssistantMessage.raw`) a few levels down in a stored run, whose reader stops at 200."""


class NestedTooDeeply(ValueError):
    """A provider's JSON nested deeper than `MAX_ANSWER_DEPTH`: its message says how deep."""


def read_json(data: str | bytes) -> Any:
    """`json.loads(data)` of a provider's answer or event, each lone surrogate in it as U+FFFD
    (`well_formed`: its text, its calls' arguments). Raises `NestedTooDeeply` (a
    `ValueError`, as `json`'s own errors are) for one nested deeper than `MAX_ANSWER_DEPTH`,
    also where `json` itself could not go (a RecursionError)."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise NestedTooDeeply("nested too deeply to read") from None
    depth = nesting(value)
    if depth > MAX_ANSWER_DEPTH:
        raise NestedTooDeeply(f"nested too deeply ({depth} levels; at most {MAX_ANSWER_DEPTH})")
    return well_formed(value)


def arguments_text(call: ToolCall) -> str:
    """The argument text to send back for `call`: the model's own text when it was invalid."""
    if call.invalid_arguments is not None:
        return call.invalid_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def read_stop(
    value: object, known: Mapping[str, StopReason]
) -> tuple[StopReason | None, str | None]:
    """The provider's reason for stopping in common words (`other` for one not in `known`),
    and the provider's own word; `(None, None)` when it gave none."""
    if not isinstance(value, str) or not value:
        return None, None
    return known.get(value, "other"), value


def identified(answer: AssistantMessage, response_id: object, model: object) -> AssistantMessage:
    """`answer` with the provider's id of the response and the name of the model that wrote
    it, each where the provider gave a string."""
    return answer.model_copy(
        update={"response_id": text(response_id) or None, "response_model": text(model) or None}
    )


def json_body(body: Mapping[str, Any]) -> bytes:
    """`body` as httpx's `json=` writes it (compact, UTF-8), each lone UTF-16 surrogate in it
    as U+FFFD: a tool result may hold one (JSON's `"\\ud800"`, from a server that cut a string
    in the middle of an emoji), UTF-8 has no bytes for it, and a provider takes no escape of
    it either; the model reads the character Unicode has for what could not be read."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # Only a string can hold one: replacing it in the JSON text replaces it in the value.
        return _SURROGATE.sub("\N{REPLACEMENT CHARACTER}", text).encode("utf-8")


_SURROGATE = re.compile("[\\ud800-\\udfff]")
