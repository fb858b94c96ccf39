"""The agent tool's `outputSchema`: `{output, usage, steps?, handoff?, run?, items?}`, its
`output` (and each item's) the agent's own output schema when it has one.

The agent's schema is written inside the tool's, but its `$ref`s resolve from the root of the
document they are in: `#/$defs/Item` (every pydantic model with a nested one) would point at
nothing, and a client that resolves references (the mcp SDK's) refuses every result. So its
definitions (`$defs`, and draft-07 `definitions`) go to the root's `$defs`, and its local
`$ref`s are rewritten to where what they named now is: a definition at the root (renamed when a
`$defs` and a `definitions` one share a name), anything else (`#`, the schema's own root) under
`#/properties/output`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import quote, unquote

from ...engine import AgentSpec
from ...item_results import STEP_SCHEMA

__all__ = ["OUTPUT_SCHEMA", "hoisted", "output_schema"]

_USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {"type": "integer"}
        for name in (
            "input_tokens",
            "output_tokens",
            "cached_tokens",
            "reasoning_tokens",
            "requests",
        )
    },
}

_TEXT: dict[str, Any] = {"type": "string", "description": "The agent's answer."}


def _items(answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "array",
        "description": "For a call with `items`: each item's answer or error, in order.",
        "items": {
            "type": "object",
            "properties": {
                "output": {"anyOf": [answer, {"type": "null"}]},
                "error": {"type": ["string", "null"]},
                "handoff": {"type": "string"},
            },
        },
    }


OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "output": _TEXT,
        "usage": _USAGE_SCHEMA,
        "steps": {
            "type": "array",
            "description": "The tool calls the agent made (when the agent returns them).",
            "items": STEP_SCHEMA,
        },
        "handoff": {
            "type": "string",
            "description": "The agent the conversation was handed to, whose answer it is.",
        },
        "run": {
            "type": "object",
            "description": "With a run store, when the run waits for a person's approval: its "
            "id, status and waiting calls (decide with approve_run or deny_run, then get_run).",
            "properties": {
                "run_id": {"type": "string"},
                "status": {"type": "string"},
                "waiting": {"type": "array", "items": {"type": "object"}},
            },
        },
        "items": _items(_TEXT),
    },
    "required": ["usage"],
}

_OUTPUT_AT = ("properties", "output")
_DEFINITIONS = ("$defs", "definitions")
_DATA = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are data, not schemas: a `$ref` key in them is not a reference."""
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", *_DEFINITIONS})
"""Keywords whose values map names (any names, `$ref` and `const` too) to schemas."""


def output_schema(spec: AgentSpec) -> dict[str, Any]:
    """The agent tool's output schema: with an output schema of the agent's, `output` is it."""
    output = spec.options.output
    if output is None:
        return OUTPUT_SCHEMA
    answer, definitions = hoisted(output.schema, at=_OUTPUT_AT)
    properties = {**OUTPUT_SCHEMA["properties"], "output": answer, "items": _items(answer)}
    schema = {**OUTPUT_SCHEMA, "properties": properties}
    return {**schema, "$defs": definitions} if definitions else schema


def hoisted(
    schema: Mapping[str, Any], *, at: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`schema` to be written at the JSON pointer `at` of another document (a copy: none of it
    shared), and its definitions for that document's root `$defs`, every local `$ref` in both
    pointing where what it named is now. Its `$id` and `$schema` are left out: with them it
    would be a resource of its own, its references resolving inside it."""
    names = _definition_names(schema)
    moved = _Moved(names, at)
    body = {k: v for k, v in schema.items() if k not in (*_DEFINITIONS, "$id", "$schema")}
    definitions = {
        sent: moved.schema(cast(Mapping[str, Any], schema[group])[name])
        for (group, name), sent in names.items()
    }
    return moved.schema(body), definitions


def _definition_names(schema: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """Each definition (`("$defs", name)`, `("definitions", name)`) and its name at the root:
    its own, or (a draft-07 one whose name a `$defs` one has) with a suffix."""
    names: dict[tuple[str, str], str] = {}
    for group in _DEFINITIONS:
        defined = schema.get(group)
        if not isinstance(defined, Mapping):
            continue
        for name in cast(Mapping[str, Any], defined):
            sent = name
            while sent in names.values():
                sent += "_"
            names[(group, name)] = sent
    return names


class _Moved:
    """The copy of a schema's parts, with its local `$ref`s rewritten."""

    def __init__(self, names: dict[tuple[str, str], str], at: tuple[str, ...]) -> None:
        self._names = names
        self._at = at

    def schema(self, node: Any) -> Any:
        if isinstance(node, list):
            return [self.schema(n) for n in cast(list[Any], node)]
        if not isinstance(node, Mapping):
            return node
        given = cast(Mapping[str, Any], node)
        if isinstance(given.get("$id"), str):
            return copy.deepcopy(dict(given))  # a resource of its own: its `#` is itself
        out: dict[str, Any] = {}
        for key, value in given.items():
            if key == "$ref" and isinstance(value, str):
                out[key] = self._ref(value)
            elif key in _DATA:
                out[key] = copy.deepcopy(value)
            elif key in _NAME_MAPS and isinstance(value, Mapping):
                named = cast(Mapping[str, Any], value)
                out[key] = {name: self.schema(s) for name, s in named.items()}
            else:
                out[key] = self.schema(value)
        return out

    def _ref(self, ref: str) -> str:
        if not ref.startswith("#") or (ref != "#" and not ref.startswith("#/")):
            return ref  # another document's, or an anchor's: not moved
        # As a resolver reads a fragment: %-decoded, then split, then ~1 and ~0 undone.
        tokens = [_unescape(t) for t in unquote(ref[1:]).split("/")[1:]]
        if len(tokens) >= 2 and (tokens[0], tokens[1]) in self._names:
            return _pointer(("$defs", self._names[(tokens[0], tokens[1])], *tokens[2:]))
        return _pointer((*self._at, *tokens))


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(tokens: tuple[str, ...]) -> str:
    """A URI fragment for a JSON pointer: each token ~-escaped, then %-encoded as a fragment
    must be (`%` itself included)."""
    escaped = (t.replace("~", "~0").replace("/", "~1") for t in tokens)
    return "#" + "".join("/" + quote(t, safe="!$&'()*+,;=:@-._~") for t in escaped)
