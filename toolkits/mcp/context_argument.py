"""The caller's run context passed on as a tool's `context` argument (`forward_context`).

An agent served by another agent-gateway takes a `context` object: its run's context there
(its instructions' `{{ context.KEY }}`, its local tools' `CallInfo`). A node configured with
`forward_context = true` fills that argument, of each of its tools whose input schema has a
`context` object, from the calling run's (`CallInfo.context`), unless the run has none.

The model neither sees nor sets it: the schema it is offered has no `context` (nor one in
the items of a served agent's `items`), and an agent's call that gives one anyway is refused
with an error result the model reads. An MCP client's own call through the gateway (no run)
goes as it came: the client is served the server's definition, `context` and all.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, cast

from mcp_types import CallToolResult, Tool

from ..base import CallContext, error_result

__all__ = ["offered_schema", "takes_context", "with_run_context"]

CONTEXT = "context"


def takes_context(schema: Mapping[str, Any]) -> bool:
    """Whether a tool with this input schema takes a `context` object."""
    declared: object = _properties(schema).get(CONTEXT)
    return (
        isinstance(declared, Mapping) and cast(Mapping[str, Any], declared).get("type") == "object"
    )


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
    return offered


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
