"""An agent as a tool: how it is described, what it takes and what its answer is read as, to
another agent and to an MCP client alike.

Another agent asks it with a `prompt`. An MCP client may also continue a conversation
(`session_id`) or send many questions in one call (`items`, answered in the agent's batches).

A served agent answers with its text, and `{output, usage, steps?}` as structured content
(for MCP clients); its result's `_meta` has the run's usage too (`USAGE_META_KEY`), which says
to a calling gateway's agent that this is an agent's answer: its usage rolls up into the
calling run (and its token budget), and its model reads the answer (`answer_data`), not the
usage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from mcp_types import CallToolResult
from pydantic import JsonValue

from agent import DEFAULT_SYSTEM_MESSAGE, Usage
from agent.handoff import handoff_refusal
from toolkits import result_data

__all__ = [
    "AGENT_INPUT_SCHEMA",
    "HANDOFF_ALONE_INPUT_SCHEMA",
    "HANDOFF_INPUT_SCHEMA",
    "PROMPT_OR_ITEMS",
    "SERVED_INPUT_SCHEMA",
    "USAGE_META_KEY",
    "BadArguments",
    "agent_description",
    "agent_prompt",
    "answer_data",
    "handoff_description",
    "handoff_prompt",
    "reported_usage",
    "usage_meta",
]

MAX_INSTRUCTIONS_SHOWN = 160
"""The most of an agent's instructions its made-up description quotes."""

USAGE_META_KEY = "agent-gateway/usage"
"""The `_meta` key of a served agent's result: what its run cost (`Usage`, as JSON)."""

_PROMPT: dict[str, Any] = {"type": "string", "description": "The question or task for the agent."}

AGENT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": _PROMPT},
    "required": ["prompt"],
}
"""What an agent calling an agent sends."""


def _handoff_schema(context: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "context": {
                "type": "string",
                "description": f"Optional: {context} The user's message itself is passed on as is.",
            }
        },
    }


HANDOFF_INPUT_SCHEMA = _handoff_schema(
    "what the agent needs beyond what goes to it anyway (the conversation so far, and your "
    "tool calls of this turn with their results): your conclusion, say."
)
"""What an agent handing the conversation over sends: the user's message goes as it is, with
the conversation and the agent's calls of the turn (`handed_item`)."""

HANDOFF_ALONE_INPUT_SCHEMA = _handoff_schema(
    "what the agent needs to know beyond the user's message, which is all it gets otherwise "
    "(not the conversation so far, nor your tool calls' results)."
)
"""The same, for an agent whose handoffs get the user's message alone (`handoff_history`
off)."""

PROMPT_OR_ITEMS = 'give `prompt` (text) or `items` (a list of {"prompt": ...})'
"""What a served agent's call must have (its schema cannot say so: see `SERVED_INPUT_SCHEMA`)."""

_NOT_BLANK = {"minLength": 1}
"""A prompt that is not empty. One of only whitespace is refused too, but that is said in words:
a `pattern` (`\\S`) makes llama.cpp, Ollama and LM Studio refuse the whole request (they turn
tool schemas into grammars, which take only anchored patterns and no `\\s`/`\\S`)."""

SERVED_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            **_NOT_BLANK,
            "description": "The question or task for the agent (not empty or only whitespace). "
            "Give this, or `items` (not both).",
        },
        "session_id": {
            "type": "string",
            "description": "Continue the conversation kept under this id (chat memory).",
        },
        "items": {
            "type": "array",
            "description": "Instead of `prompt`: many questions in one run, each answered "
            "on its own (in the agent's batches).",
            "items": {
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        **_NOT_BLANK,
                        "description": "This item's question (not empty or only whitespace).",
                    },
                    "session_id": {"type": "string"},
                    "context": {"type": "object", "description": "This item's own `context`."},
                },
                "required": ["prompt"],
                "additionalProperties": False,
            },
            "minItems": 1,
        },
        "context": {
            "type": "object",
            "description": "Facts for this run (a customer, a locale, ...): the agent's "
            "instructions and tools read them. With `items`: each item's that has none.",
        },
    },
    "additionalProperties": False,
}
"""What an MCP client calling a served agent sends: a `prompt` or `items`. The choice is said
in the descriptions, not as a top-level `anyOf`/`oneOf`: model providers refuse those in a
tool's parameters, and a calling gateway hands this schema to its model."""


def agent_description(
    name: str, description: str, *, tools: Sequence[str] = (), instructions: str = ""
) -> str:
    """The agent's own description, else one made of its config for a caller (a model) to
    choose it by: what it can use (`tools`: its nodes) and how its `instructions` (its system
    message) begin, unless they are the default."""
    if description:
        return description
    said = [f"Ask the agent {name!r}."]
    if tools:
        said.append(f"It can use the tools of: {', '.join(tools)}.")
    first_line = next((line.strip() for line in instructions.splitlines() if line.strip()), "")
    if first_line and instructions.strip() != DEFAULT_SYSTEM_MESSAGE:
        said.append(f'Its instructions begin: "{_shortened(first_line)}"')
    return " ".join(said)


def handoff_description(name: str, description: str, *, with_history: bool = True) -> str:
    """What the model of an agent that may hand the conversation to agent `name` reads of
    that handoff (`description`: the agent's, as a tool); `with_history`: the conversation
    and the agent's calls of the turn go along (`handoff_history`)."""
    gets = (
        "the conversation so far, your tool calls of this turn with their results, and the "
        "user's message"
        if with_history
        else "the user's message alone"
    )
    return (
        f"Hand the conversation over to the agent {name!r}: it gets {gets}, and its answer is "
        f"the final answer (you answer no more). {description}"
    )


@dataclass(frozen=True, slots=True)
class BadArguments:
    """Why a call of an agent was not made: what the calling model is told."""

    error: str


def agent_prompt(
    arguments: Mapping[str, Any], *, handed: str | None, by: str
) -> str | BadArguments:
    """What an agent called as a tool is asked: its `prompt`; for a handoff (`handed`: the
    user's message), that message as it came with the `context` the handing agent (`by`)
    added, if any. Arguments that break the call's schema are refused, not dropped: the
    model would believe it had passed on what the agent never got."""
    if handed is None:
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return BadArguments("`prompt` must be a non-empty string")
        return prompt
    refusal = handoff_refusal(arguments)
    if refusal is not None:
        return BadArguments(refusal)
    return handoff_prompt(handed, arguments, by)


def handoff_prompt(question: str, arguments: Mapping[str, Any], by: str) -> str:
    """What the agent a conversation was handed to is asked: the user's `question` as it
    came, and the `context` the handing agent (`by`) added, if any."""
    context = arguments.get("context")
    if not isinstance(context, str) or not context.strip():
        return question
    return f"{question}\n\n(Context from the agent {by!r}, which handed this over: {context})"


def _shortened(text: str) -> str:
    """`text`, or its first words within `MAX_INSTRUCTIONS_SHOWN` characters and "..."."""
    if len(text) <= MAX_INSTRUCTIONS_SHOWN:
        return text
    cut = text[: MAX_INSTRUCTIONS_SHOWN + 1].rsplit(" ", 1)[0] or text[:MAX_INSTRUCTIONS_SHOWN]
    return cut.rstrip(" ,;:.") + "..."


def usage_meta(usage: Usage | dict[str, JsonValue]) -> dict[str, Any]:
    """A served agent's result's `_meta`, saying what its run cost (also a run that failed or
    stopped), for a calling gateway to roll up (`reported_usage`)."""
    return {USAGE_META_KEY: usage if isinstance(usage, dict) else usage.model_dump(mode="json")}


def reported_usage(result: CallToolResult) -> Usage | None:
    """What the run behind a served agent's `result` cost, as its gateway reported it; None
    for another tool's result. Counts that are not whole numbers of zero or more are left out
    (a newer gateway may report more)."""
    meta = result.meta
    reported: object = meta.get(USAGE_META_KEY) if meta else None
    if not isinstance(reported, dict):
        return None
    fields = cast("dict[str, object]", reported)
    counts = {
        name: value
        for name in Usage.model_fields
        if isinstance(value := fields.get(name), int) and value >= 0
    }
    return Usage.model_validate(counts)


def answer_data(result: CallToolResult, max_chars: int) -> JsonValue:
    """What a model reads of a served agent's answer: the answer (and its steps, when the
    agent returns them), without the usage, which rolls up instead; the text when that does
    not fit in `max_chars`."""
    structured: object = result.structured_content
    if isinstance(structured, dict):
        fields = cast("dict[str, JsonValue]", structured)
        # The usage rolls up; who answered (a handoff) is no part of the answer.
        rest = {key: value for key, value in fields.items() if key not in ("usage", "handoff")}
        read: JsonValue = rest.get("output") if rest.keys() == {"output"} else rest
        if isinstance(read, str):
            read = {"response": read}
        text = json.dumps(read, separators=(",", ":"), ensure_ascii=False, default=str)
        if read not in (None, {}) and len(text) <= max_chars:
            return read
    return result_data(result.model_copy(update={"structured_content": None}), max_chars)
