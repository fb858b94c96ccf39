"""The caller's run context passed on as a tool's `context` argument (`forward_context`).

An agent served by another agent-gateway takes a `context` object: its run's context there
(its instructions' `{{ context.KEY }}`, its local tools' `CallInfo`). A node configured with
`forward_context = true` fills that argument, of each of its tools whose input schema has a
`context` property that takes an object, from the calling run's (`CallInfo.context`), unless
the run has none. It takes one however a server writes it (`takes_context`): `"type":
"object"`, a type list with "object" (`["object", "null"]`), an `anyOf`/`oneOf`/`allOf` with a
branch that does (a Python server's `dict | None`), a local `$ref` to one (a pydantic model).

The model neither sees nor sets it: the schema it is offered has no `context` (nor one in
the items of a served agent's `items`), and an agent's call that gives one anyway is refused
with an error result the model reads. An MCP client's own call through the gateway (no run)
goes as it came: the client is served the server's definition, `context` and all.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, cast

from mcp_types import INVALID_REQUEST, CallToolResult, Tool

from ..base import CallContext, error_result
from .error_text import protocol_error

__all__ = [
    "forwarded_to_none",
    "offered_schema",
    "takes_context",
    "with_context_forwarded",
    "with_run_context",
]

CONTEXT = "context"
_DEFINITIONS = ("$defs", "definitions")


def takes_context(schema: Mapping[str, Any]) -> bool:
    """Whether a tool with this input schema takes a `context` object."""
    return _takes_object(_properties(schema).get(CONTEXT), schema, frozenset())


def forwarded_to_none(tools: Mapping[str, Tool], *, forward: bool) -> tuple[str, ...]:
    """The warning (one, or none) for a node that passes the run's context on (`forward`)
    when none of its `tools` takes one: the setting does nothing (a server whose `context` is
    no object, or the wrong server)."""
    if not forward or not tools or any(takes_context(t.input_schema) for t in tools.values()):
        return ()
    return (
        f"forward_context is set, but none of the server's tools takes a `{CONTEXT}` object "
        f"(an input schema property `{CONTEXT}` that takes a JSON object): the run's context "
        "is passed to none of them",
    )


def _takes_object(declared: object, root: Mapping[str, Any], seen: frozenset[str]) -> bool:
    """Whether the schema `declared` (within `root`, where its `$ref`s point) accepts an
    object. A branch of `anyOf`/`oneOf`/`allOf` that does is enough: a server's `dict |
    None`, or pydantic's `allOf` around a `$ref`."""
    if not isinstance(declared, Mapping):
        return False
    node = cast(Mapping[str, Any], declared)
    kind: object = node.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in cast(list[object], kind)):
        return True
    ref: object = node.get("$ref")
    # `seen`: a schema that refers to itself ends here.
    if (
        isinstance(ref, str)
        and ref not in seen
        and _takes_object(_resolved(root, ref), root, seen | {ref})
    ):
        return True
    return any(
        _takes_object(branch, root, seen)
        for key in ("anyOf", "oneOf", "allOf")
        if isinstance(branches := node.get(key), list)
        for branch in cast(list[object], branches)
    )


def _resolved(root: Mapping[str, Any], ref: str) -> object:
    """What a local `$ref` (`#/$defs/Ctx`) points at in `root`; None for any other."""
    if not ref.startswith("#/"):
        return None
    found: Mapping[str, Any] | None = root
    for part in ref[2:].split("/"):
        step: object = found.get(part.replace("~1", "/").replace("~0", "~")) if found else None
        found = cast(Mapping[str, Any], step) if isinstance(step, Mapping) else None
    return found


def offered_schema(schema: Mapping[str, Any], *, forward: bool) -> Mapping[str, Any]:
    """The input schema the model is offered: without `context` (top-level, and an item's in
    `items`) where the node passes the run's on (`forward`); else `schema` itself."""
    if not forward or not takes_context(schema):
        return schema
    properties = {k: v for k, v in _properties(schema).items() if k != CONTEXT}
    items = properties.get("items")
    if isinstance(items, Mapping):  # a served agent's many questions, each with its own
        each = cast(Mapping[str, Any], items).get("items")
        if isinstance(each, Mapping) and CONTEXT in _properties(cast(Mapping[str, Any], each)):
            item = cast(Mapping[str, Any], each)
            item_properties = {k: v for k, v in _properties(item).items() if k != CONTEXT}
            properties["items"] = {**items, "items": {**item, "properties": item_properties}}
    offered = {**schema, "properties": properties}
    required = schema.get("required")
    if isinstance(required, list):
        offered["required"] = [name for name in cast(list[Any], required) if name != CONTEXT]
    return _without_unused_definitions(offered)


def _without_unused_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the definitions only `context` used (a pydantic model's): the model
    is not shown the shape of what it neither sees nor sets."""
    for key in _DEFINITIONS:
        definitions: object = schema.get(key)
        if not isinstance(definitions, Mapping):
            continue
        named = cast(Mapping[str, Any], definitions)
        prefix = f"#/{key}/"
        rest = {k: v for k, v in schema.items() if k not in _DEFINITIONS}
        used: set[str] = set()
        to_read = [ref.removeprefix(prefix) for ref in _refs(rest) if ref.startswith(prefix)]
        while to_read:
            name = to_read.pop().split("/")[0]
            if name in used or name not in named:
                continue
            used.add(name)
            to_read += [r.removeprefix(prefix) for r in _refs(named[name]) if r.startswith(prefix)]
        if used:
            schema = {**schema, key: {k: v for k, v in named.items() if k in used}}
        else:
            schema = {k: v for k, v in schema.items() if k != key}
    return schema


def _refs(value: object) -> list[str]:
    """Every `$ref` in a schema, nested ones too."""
    if isinstance(value, Mapping):
        mapping = cast(Mapping[str, Any], value)
        ref: object = mapping.get("$ref")
        found = [ref] if isinstance(ref, str) else []
        return found + [r for child in mapping.values() for r in _refs(child)]
    if isinstance(value, list):
        return [r for child in cast(list[object], value) for r in _refs(child)]
    return []


def with_run_context(
    tool: Tool | None, arguments: Mapping[str, Any], context: CallContext | None
) -> Mapping[str, Any] | CallToolResult:
    """The arguments of a call of the server's `tool`, from a node that passes the run's
    context on: an agent's call with its run's `context` added (as it was when its run has
    none); an MCP client's own call, or one of a tool that takes no context (or is not listed
    now), as it came. An agent's call that gives `context` itself is refused (an error result
    for its model)."""
    info = context.info if context is not None else None
    if info is None or info.run_id is None or tool is None or not takes_context(tool.input_schema):
        return arguments
    if _gives_context(arguments):
        return error_result(
            f"`{CONTEXT}` is not an argument to give: the gateway passes the run's own context "
            f"to this tool (forward_context); call it without `{CONTEXT}`"
        )
    if not info.context:
        return arguments
    return {**arguments, CONTEXT: copy.deepcopy(dict(info.context))}


async def with_context_forwarded(
    call: Callable[[Mapping[str, Any]], Awaitable[CallToolResult]],
    tool: Tool | None,
    arguments: Mapping[str, Any],
    context: CallContext | None,
) -> CallToolResult:
    """`call` made with the run's context added (`with_run_context`), or refused. A request
    the server refuses as invalid once the context is in it (too long for it, most often)
    says so: the model can neither see the context nor make it smaller."""
    filled = with_run_context(tool, arguments, context)
    if isinstance(filled, CallToolResult):
        return filled
    result = await call(filled)
    error = protocol_error(result)
    if filled is arguments or error is None or error.code != INVALID_REQUEST:
        return result
    size = len(json.dumps(filled[CONTEXT], ensure_ascii=False).encode())
    told = (
        f" (the request held the run's context, {size} bytes, which the gateway adds to this "
        "tool's calls: forward_context; you cannot shrink it: a smaller run context, or a "
        "larger max_request_bytes on that server, lets it through)"
    )
    return error_result(f"{_text(result)}{told}")


def _text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content).strip()


def _gives_context(arguments: Mapping[str, Any]) -> bool:
    items: object = arguments.get("items")
    listed = cast(list[object], items) if isinstance(items, list) else []
    in_items = any(
        isinstance(item, Mapping) and CONTEXT in cast(Mapping[str, Any], item) for item in listed
    )
    return CONTEXT in arguments or in_items


def _properties(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = schema.get("properties")
    return cast(Mapping[str, Any], properties) if isinstance(properties, Mapping) else {}
