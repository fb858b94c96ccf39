"""MCP tool input schemas (JSON Schema) in the dialect each provider accepts.

- `anthropic_input_schema`: refs inlined, `$schema` dropped; Anthropic takes the rest.
- `openai_parameters`: refs inlined, plus whether OpenAI strict mode can be used: only when the
  schema already fits it (every property required, closed objects, only keywords strict mode
  knows). Optional properties are not rewritten as nullable-required, because a tool that
  receives `"head": null` instead of no `head` may reject it.
- `gemini_parameters`: reduced to the OpenAPI-3.0 subset of Gemini's `Schema` (one type per
  node plus `nullable`, string-only enums, no `additionalProperties`, arrays with `items`);
  `None` for a tool without parameters, which Gemini wants omitted.

A recursive `$ref` is expanded `_MAX_REF_REPEATS` times and then left unconstrained.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._json import JSONObject, arr, is_arr, is_obj, obj

__all__ = ["anthropic_input_schema", "gemini_parameters", "inline_refs", "openai_parameters"]

_MAX_REF_REPEATS = 2
_DROPPED_EVERYWHERE = frozenset({"$schema", "$id", "$comment", "$defs", "definitions"})
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})


def inline_refs(schema: Mapping[str, Any]) -> JSONObject:
    """A copy of `schema` (sharing nothing with it) with every local `$ref` replaced by what it
    points to."""
    root = dict(schema)
    return obj(_inline(root, root, ()))


def _inline(node: Any, root: JSONObject, stack: tuple[str, ...]) -> Any:
    if is_arr(node):
        return [_inline(item, root, stack) for item in node]
    if not is_obj(node):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if stack.count(ref) >= _MAX_REF_REPEATS:
            return _inline(siblings, root, stack)  # recursion cut: unconstrained from here
        target = _resolve(ref, root)
        merged = {**target, **siblings}  # keywords beside a $ref refine it (2020-12 semantics)
        return _inline(merged, root, (*stack, ref))
    out: JSONObject = {}
    for key, value in node.items():
        if key in _DROPPED_EVERYWHERE:
            continue
        if key in _NAME_MAPS and is_obj(value):
            # Keys here are property names, not keywords: a property may be called "$id".
            out[key] = {name: _inline(sub, root, stack) for name, sub in value.items()}
        else:
            out[key] = _inline(value, root, stack)
    return out


def _resolve(ref: str, root: JSONObject) -> JSONObject:
    if not ref.startswith("#"):
        return {}  # remote refs are not fetched: the model gets an open schema instead
    node: Any = root
    for token in ref.removeprefix("#").strip("/").split("/"):
        if not token:
            continue
        key = token.replace("~1", "/").replace("~0", "~")
        node = obj(node).get(key)
    return obj(node)


def _as_object_root(schema: JSONObject) -> JSONObject:
    """Tool parameters must be an object schema; MCP says so too, but not every server obeys."""
    if schema.get("type") != "object":
        schema = {**schema, "type": "object"}
    if not is_obj(schema.get("properties")):
        schema = {**schema, "properties": {}}
    return schema


def anthropic_input_schema(schema: Mapping[str, Any]) -> JSONObject:
    return _as_object_root(inline_refs(schema))


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


def openai_parameters(schema: Mapping[str, Any]) -> tuple[JSONObject, bool]:
    """The `parameters` for an OpenAI function tool, and whether `strict` may be set."""
    inlined = _as_object_root(inline_refs(schema))
    strict = _strict(inlined)
    if strict is None:
        return inlined, False
    return strict, True


def _strict(node: Any) -> JSONObject | None:
    """`node` made strict-mode ready, or None when that would change its meaning."""
    if not is_obj(node):
        return None
    node = {k: v for k, v in obj(node).items() if k not in _STRICT_DROPPED}
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


# --- Gemini ----------------------------------------------------------------------------------

_GEMINI_KEPT = ("description", "minimum", "maximum", "minItems", "maxItems")
_GEMINI_FORMATS = {
    "string": {"enum", "date-time"},
    "number": {"float", "double"},
    "integer": {"int32", "int64"},
}
_GEMINI_ANY: JSONObject = {
    "anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]
}  # Gemini has no "any value"; scalars are the useful approximation.


def gemini_parameters(schema: Mapping[str, Any]) -> JSONObject | None:
    """The `parameters` of a Gemini function declaration, or None when there are none."""
    root = _as_object_root(inline_refs(schema))
    if not obj(root.get("properties")):
        return None  # Gemini rejects an OBJECT with empty properties
    return _gemini(root)


def _gemini(node: Any) -> JSONObject:
    source = obj(node)
    for composite in ("anyOf", "oneOf"):
        if composite in source:
            return _gemini_union(source, arr(source[composite]))
    if "allOf" in source:
        merged: JSONObject = {k: v for k, v in source.items() if k != "allOf"}
        for part in arr(source["allOf"]):
            part = obj(part)
            merged = {
                **merged,
                **part,
                "properties": {**obj(merged.get("properties")), **obj(part.get("properties"))},
                "required": [*arr(merged.get("required")), *arr(part.get("required"))],
            }
        return _gemini(merged)

    out: JSONObject = {k: source[k] for k in _GEMINI_KEPT if k in source}
    nullable = False
    kind = source.get("type")
    if is_arr(kind):
        kinds = [k for k in kind if k != "null"]
        nullable = len(kinds) < len(kind)
        if len(kinds) > 1:
            return _gemini_union(source, [{**source, "type": k} for k in kinds], nullable)
        kind = kinds[0] if kinds else None
    if "const" in source:
        source = {**source, "enum": [source["const"]]}
    if kind is None:
        kind = _infer_type(source)
    if kind is None or kind == "null":
        return {**_GEMINI_ANY, **out}
    out["type"] = kind
    if nullable:
        out["nullable"] = True
    fmt = source.get("format")
    if isinstance(fmt, str) and fmt in _GEMINI_FORMATS.get(str(kind), set[str]()):
        out["format"] = fmt
    enum = arr(source.get("enum"))
    if enum and all(isinstance(v, str) for v in enum) and kind == "string":
        out["enum"] = enum
    if kind == "object":
        properties = {name: _gemini(sub) for name, sub in obj(source.get("properties")).items()}
        if properties:
            out["properties"] = properties
            required = [r for r in arr(source.get("required")) if r in properties]
            if required:
                out["required"] = required
    if kind == "array":
        items = source.get("items", source.get("prefixItems"))
        if is_arr(items):
            items = items[0] if items else None  # tuples: Gemini has one item schema
        out["items"] = _gemini(items) if is_obj(items) else {"type": "string"}
    return out


def _gemini_union(source: JSONObject, variants: list[Any], nullable: bool = False) -> JSONObject:
    kept = [v for v in variants if obj(v).get("type") != "null"]
    nullable = nullable or len(kept) < len(variants)
    if len(kept) == 1:
        out = _gemini(kept[0])
    elif kept:
        out: JSONObject = {"anyOf": [_gemini(v) for v in kept]}
    else:
        out = dict(_GEMINI_ANY)
    if "description" in source:
        out["description"] = source["description"]
    if nullable:
        out["nullable"] = True
    return out


def _infer_type(source: JSONObject) -> str | None:
    if "properties" in source:
        return "object"
    if "items" in source or "prefixItems" in source:
        return "array"
    enum = arr(source.get("enum"))
    if enum and all(isinstance(v, str) for v in enum):
        return "string"
    return None
