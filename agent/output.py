"""Structured output: an answer that must fit a schema, given through a final-response tool.

An agent with an `OutputSchema` offers the model one more tool, `final_result`, whose input is
the answer. A call to it ends the item once its arguments validate; a text answer that is
JSON fitting the schema is accepted too (small models often just write it). Anything else
goes back to the model with what was wrong, up to `output_retries` times; then the item fails.
Every provider can do this: it is an ordinary tool call (or, for models that write their
calls as text, a parsed one). Providers that can hold their answer to a schema themselves
may do so instead (`output_mode="native"`, see `agent.native_output`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel, JsonValue, ValidationError

from .messages import AssistantMessage, ToolCall, ToolDefinition
from .model_json import NotModelJson, read_model_json, why_refused
from .native_output import strict_schema, without_added_nulls

__all__ = [
    "FINAL_RESULT_TOOL",
    "NOT_AN_ANSWER",
    "OutputInvalid",
    "OutputSchema",
    "structured_answer",
]

FINAL_RESULT_TOOL = "final_result"
_WRAPPED = "response"
_DEFINITIONS = ("$defs", "definitions")


class OutputInvalid(ValueError):
    """An answer that does not fit the schema; `problems` says where and why, for the model,
    `what` what was wrong, for a person (default: the first problem, and how many more).
    `calls`: of an answer of several `final_result` calls, each one's own refusal, by call id
    (the first's is this one)."""

    def __init__(
        self,
        problems: list[str],
        *,
        what: str | None = None,
        calls: Mapping[str, OutputInvalid] | None = None,
    ) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        self.what = what or (problems[0] + more if problems else "")
        self.calls: Mapping[str, OutputInvalid] = calls or {}


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The JSON Schema an agent's answers must fit, and the check that enforces it.

    `validate` returns the answer as JSON data (normalised, e.g. by a pydantic model) or
    raises `OutputInvalid`. Build one with `from_json_schema` or `from_model`.
    """

    schema: dict[str, JsonValue]
    validate: Callable[[JsonValue], JsonValue]
    description: str = "Give your final answer by calling this tool; it ends the conversation."

    @classmethod
    def from_json_schema(cls, schema: dict[str, JsonValue]) -> OutputSchema:
        """Raises `ValueError` when `schema` is not a valid JSON Schema."""
        # Imported here: jsonschema takes ~50 ms to import, at every start of every command,
        # and only an agent with an output schema needs it.
        from jsonschema import SchemaError, validators

        validator_class: Any = validators.validator_for(schema)  # pyright: ignore[reportUnknownMemberType]
        try:
            validator_class.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema: {exc.message}") from exc
        validator: Any = validator_class(schema)

        def validate(value: JsonValue) -> JsonValue:
            errors: list[Any] = list(validator.iter_errors(value))
            if errors:
                problems = [_where(e.absolute_path) + str(e.message) for e in errors]
                raise OutputInvalid(sorted(problems))
            return value

        return cls(schema=schema, validate=validate)

    @classmethod
    def from_model(cls, model: type[BaseModel]) -> OutputSchema:
        """Answers validated by a pydantic model; the run's output is its JSON dump."""

        def validate(value: JsonValue) -> JsonValue:
            try:
                return model.model_validate(value).model_dump(mode="json")
            except ValidationError as exc:
                raise OutputInvalid(
                    [_where(e["loc"]) + e["msg"] for e in exc.errors(include_url=False)]
                ) from None

        schema = cast(dict[str, JsonValue], model.model_json_schema())
        return cls(schema=schema, validate=validate)

    @property
    def wraps(self) -> bool:
        """Whether the tool's input wraps the answer (tool inputs are objects; answers may not be)."""
        return self.schema.get("type") != "object"

    def tool(self) -> ToolDefinition:
        schema: dict[str, JsonValue] = self.schema
        if self.wraps:
            # Definitions stay at the root, where the answer's `#/$defs/...` refs point (a
            # recursive pydantic model's schema is such a ref).
            defs = {k: v for k, v in schema.items() if k in _DEFINITIONS}
            inner = {k: v for k, v in schema.items() if k not in _DEFINITIONS}
            schema = {
                "type": "object",
                "properties": {_WRAPPED: inner},
                "required": [_WRAPPED],
                **defs,
            }
        return ToolDefinition(
            name=FINAL_RESULT_TOOL,
            description=self.description,
            input_schema=schema,
            source_node="",
        )

    def from_call(self, arguments: dict[str, JsonValue]) -> JsonValue:
        """The answer in a `final_result` call, validated. Raises `OutputInvalid`."""
        if self.wraps:
            if _WRAPPED not in arguments:
                raise OutputInvalid(
                    [f"the answer goes in the {_WRAPPED!r} argument"],
                    what=f"its {FINAL_RESULT_TOOL!r} call had no {_WRAPPED!r} argument",
                )
            return self.validate(arguments[_WRAPPED])
        return self.validate(arguments)

    def native_schema(self) -> dict[str, JsonValue]:
        """The schema a provider holds answers to natively: the tool's input (an object),
        made strict. Raises `ValueError` saying why it cannot be (see `agent.native_output`)."""
        return strict_schema(self.tool().input_schema)

    def from_text(self, text: str, *, native: bool = False) -> JsonValue:
        """The answer written as JSON text (in a fence or not), validated. Raises
        `OutputInvalid`, telling the model to call the tool (`native`: to answer in JSON)."""
        try:
            value: Any = read_model_json(_unfenced(text))
        except NotModelJson as exc:  # NaN, nested too deeply: JSON, but none that can go on
            raise OutputInvalid([str(exc)]) from None
        except ValueError:
            if native:
                raise OutputInvalid(
                    ["answer with JSON that fits the schema, and nothing else"],
                    what="it was text, not JSON",
                ) from None
            raise OutputInvalid(
                [f"give your final answer by calling the {FINAL_RESULT_TOOL!r} tool"],
                what=f"it was text, not JSON, and no call of {FINAL_RESULT_TOOL!r}",
            ) from None
        if native:  # the nulls strict output made the model write for optional properties
            value = without_added_nulls(value, self.tool().input_schema)
        if self.wraps and isinstance(value, dict) and _WRAPPED in value:
            value = cast(dict[str, Any], value)[_WRAPPED]
        return self.validate(cast(JsonValue, value))


def _unfenced(text: str) -> str:
    """`text` stripped, and out of a ```json fence if it is in one. Not a pattern: one
    (spaces, a lazy body, spaces) took cubic time over ```json and a long run of spaces."""
    text = text.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        return text[3:-3].removeprefix("json").strip()
    return text


def _where(path: Any) -> str:
    parts = [str(p) for p in path]
    return f"at {'.'.join(parts)}: " if parts else ""


NOT_AN_ANSWER = object()
"""What `structured_answer` returns for an answer that calls other tools (`final_result`
among them or not)."""


def structured_answer(
    output: OutputSchema, answer: AssistantMessage, *, native: bool = False
) -> JsonValue | object:
    """The validated answer in a `final_result` call or in the text (`native`: in the text
    only, any call being of a tool). Raises `OutputInvalid`.

    A `final_result` called with other tools is no answer yet: it was written before their
    results. The other calls run and the model is told to call it alone (`ToolsAgent._call_problem`).
    Of several `final_result` calls, the first that validates is the answer; when none does,
    the refusal holds each one's own (`OutputInvalid.calls`)."""
    if native:
        return NOT_AN_ANSWER if answer.tool_calls else output.from_text(answer.content, native=True)
    finals = [c for c in answer.tool_calls if c.name == FINAL_RESULT_TOOL]
    if finals and len(finals) < len(answer.tool_calls):
        return NOT_AN_ANSWER
    if finals:
        refused: dict[str, OutputInvalid] = {}
        for final in finals:
            try:
                return _from_final(output, final, cut_off=answer.stop_reason == "max_tokens")
            except OutputInvalid as exc:
                refused[final.id] = exc
        first = refused[finals[0].id]
        raise OutputInvalid(first.problems, what=first.what, calls=refused)
    if answer.tool_calls:
        return NOT_AN_ANSWER
    return output.from_text(answer.content)


def _from_final(output: OutputSchema, final: ToolCall, *, cut_off: bool) -> JsonValue:
    if final.invalid_arguments is not None and cut_off:
        raise OutputInvalid(
            ["the answer was cut off at the output token limit; shorten it"],
            what="it was cut off at the output token limit",
        )
    if final.invalid_arguments is not None:
        raise OutputInvalid([f"the arguments were {why_refused(final.invalid_arguments)}"])
    return output.from_call(final.arguments)
