"""MCP tool input schemas (JSON Schema) in the dialect each provider accepts.

Every provider starts from `_json_schema.object_root`: the root an object schema, its
`oneOf`/`anyOf`/`allOf` (which no provider takes there) folded into its properties; what they
asked is said in the tool's description instead (`described`). OpenAI and Anthropic take
`$defs` and local `$ref`s, recursion included (OpenAI's Structured Outputs guide: definitions
and recursive schemas are supported, strict mode too), so their schemas keep them; Gemini's
`parameters` do not, nor does every OpenAI-compatible server, so theirs are written out in
place, within a budget (see `_refs`).

- `anthropic_input_schema`: that root, with property keys Anthropic refuses declared under
  keys it takes (see `anthropic_schema`); it takes the rest as written.
- `openai_parameters`: that root, every array given `items` (OpenAI refuses an array without
  them; `{}` is any item, as no `items` was), plus whether OpenAI strict mode can be used:
  only when the schema already fits it (every property required, closed objects, only
  keywords strict mode knows, in its definitions too) and keeps within strict mode's
  documented limits (nesting, properties, enum values, the length of names and values).
  Optional properties are not rewritten as nullable-required, because a tool that receives
  `"head": null` instead of no `head` may reject it.
- `gemini_parameters`: reduced to Gemini's OpenAPI subset (see `gemini_schema`).
- `unexpressed`: what a schema asks that no provider can be told, to warn about.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._json import JSONObject, arr, is_arr, is_obj, obj
from ._json_schema import COMBINATORS, each_subschema, inline_refs, object_root
from .anthropic_schema import anthropic_input_schema
from .gemini_schema import gemini_parameters

__all__ = [
    "anthropic_input_schema",
    "described",
    "gemini_parameters",
    "inline_refs",
    "openai_parameters",
    "unexpressed",
]


def _plain_object_root(schema: Mapping[str, Any]) -> bool:
    """Whether `schema`'s root needs no folding: the common case, told cheaply."""
    return schema.get("type") == "object" and not any(
        key in schema for key in (*COMBINATORS, "not", "enum", "const")
    )


def described(description: str, schema: Mapping[str, Any]) -> str:
    """A tool's `description`, plus what its schema's root alternatives ask (see
    `object_root`): the parameters the model is given cannot say it."""
    if _plain_object_root(schema):
        return description
    note = object_root(schema).note
    if not note:
        return description
    return f"{description}\n\n{note}" if description else note


def unexpressed(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """What `schema` asks of a tool's arguments that no provider can be told (nothing, for
    a schema that can be said whole)."""
    return () if _plain_object_root(schema) else object_root(schema).lost


# --- OpenAI ----------------------------------------------------------------------------------

_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
        "const", "description", "title", "pattern", "format", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
    }
)  # fmt: skip
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_STRICT_DROPPED = frozenset({"default", "examples", "readOnly", "writeOnly", "deprecated"})
"""Annotations strict mode rejects but the model does not need to be constrained."""
# Strict mode's limits (OpenAI's Structured Outputs guide, "Supported schemas"): a schema over
# one is refused, and with it the whole request; without `strict` none of them apply.
_STRICT_MAX_DEPTH = 10
"""Sub-schemas deep, counting each property, `items` and `anyOf` step (as OpenAI's own SDK
validator counts: no fewer levels than the API does)."""
_STRICT_MAX_PROPERTIES = 5_000
_STRICT_MAX_ENUM_VALUES = 1_000
_STRICT_MAX_TEXT = 120_000
"""Characters of all property names, enum values and const values together."""
_STRICT_LONG_ENUM = 250
_STRICT_LONG_ENUM_TEXT = 15_000
"""Characters of the string values of one enum with more than `_STRICT_LONG_ENUM` values."""


def openai_parameters(
    schema: Mapping[str, Any], *, keep_refs: bool = True
) -> tuple[JSONObject, bool]:
    """The `parameters` for an OpenAI function tool, and whether `strict` may be set; its
    `$ref`s kept, or (not `keep_refs`) written out in place."""
    root = object_root(schema, keep_refs=keep_refs).schema
    strict = _strict_root(root)
    if strict is None or not _within_strict_limits(strict):
        return _with_items(root), False
    return strict, True


def _strict_root(root: JSONObject) -> JSONObject | None:
    """`root` made strict-mode ready, its definitions too, or None (see `_strict`)."""
    strict = _strict({k: v for k, v in root.items() if k != "$defs"})
    defs = {name: _strict(sub) for name, sub in obj(root.get("$defs")).items()}
    if strict is None or any(sub is None for sub in defs.values()):
        return None
    return {**strict, "$defs": defs} if defs else strict


def _with_items(node: Any) -> Any:
    """`node` with `items` on every array schema in it, and no keyword beside a `$ref`."""
    if not is_obj(node):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1 and "anyOf" not in node:
        # OpenAI refuses one ("$ref cannot have keywords {'description'}"): an `anyOf` of the
        # `$ref` alone means the same, and takes them.
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return {"anyOf": [{"$ref": ref}], **_with_items(rest)}
    out = each_subschema(node, _with_items)
    if is_obj(node.get("$defs")):
        out["$defs"] = {name: _with_items(sub) for name, sub in node["$defs"].items()}
    kind = node.get("type")
    if (kind == "array" or (is_arr(kind) and "array" in kind)) and "items" not in node:
        out["items"] = {}
    return out


def _within_strict_limits(root: JSONObject) -> bool:
    """Whether strict mode takes `root` (a schema `_strict` made) for its size."""
    properties = enum_values = text = 0
    # A definition counts from its own top: the depth a `$ref` puts it at is not bounded.
    defs = [(obj(sub), 0) for sub in obj(root.get("$defs")).values()]
    pending: list[tuple[JSONObject, int]] = [(root, 0), *defs]
    while pending:
        node, depth = pending.pop()
        if depth > _STRICT_MAX_DEPTH:
            return False
        values = arr(node.get("enum"))
        strings = sum(len(value) for value in values if isinstance(value, str))
        if len(values) > _STRICT_LONG_ENUM and strings > _STRICT_LONG_ENUM_TEXT:
            return False
        enum_values += len(values)
        text += sum(len(_as_text(value)) for value in values)
        text += len(_as_text(node["const"])) if "const" in node else 0
        names = obj(node.get("properties"))
        properties += len(names)
        text += sum(map(len, names))
        subschemas = [*names.values(), *arr(node.get("anyOf"))]
        subschemas += [node["items"]] if "items" in node else []
        pending += [(sub, depth + 1) for sub in subschemas]
    return (
        properties <= _STRICT_MAX_PROPERTIES
        and enum_values <= _STRICT_MAX_ENUM_VALUES
        and text <= _STRICT_MAX_TEXT
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _strict(node: Any) -> JSONObject | None:
    """`node` made strict-mode ready, or None when that would change its meaning."""
    if not is_obj(node):
        return None
    node = {k: v for k, v in obj(node).items() if k not in _STRICT_DROPPED}
    ref = node.get("$ref")
    if isinstance(ref, str):
        notes = {k: v for k, v in node.items() if k != "$ref"}
        if not notes.keys() <= {"description", "title"}:
            return None
        # As in `_with_items`: strict mode takes no keyword beside a `$ref`.
        return {"anyOf": [{"$ref": ref}], **notes} if notes else {"$ref": ref}
    if not node.keys() <= _STRICT_KEYWORDS:
        return None
    if not ({"type", "anyOf", "enum", "const"} & node.keys()):
        return None  # an unconstrained value cannot be expressed in strict mode
    if "format" in node and node["format"] not in _STRICT_FORMATS:
        return None
    out = dict(node)
    if "anyOf" in node:
        variants = [_strict(v) for v in arr(node["anyOf"])]
        if not variants or any(v is None for v in variants):
            return None
        out["anyOf"] = variants
    types = node.get("type")
    type_names = set(arr(types)) if is_arr(types) else {types}
    if "object" in type_names:
        properties = node.get("properties")
        if not is_obj(properties) or node.get("additionalProperties", False) is not False:
            return None  # free-form maps have no strict form
        props = properties
        if set(arr(node.get("required"))) != set(props):
            return None
        converted = {name: _strict(sub) for name, sub in props.items()}
        if any(v is None for v in converted.values()):
            return None
        out["properties"] = converted
        out["required"] = list(props)
        out["additionalProperties"] = False
    if "array" in type_names:
        items = _strict(node.get("items"))
        if items is None:
            return None
        out["items"] = items
    return out
