"""Tool schemas for Gemini, and the way back for the arguments it writes.

A declaration's `parameters` take the OpenAPI-3.0 subset of Gemini's `Schema`: one type per
node plus `nullable`, string-only enums, no `additionalProperties`, arrays with `items`, and
an OBJECT must have properties. `gemini_parameters` reduces a tool's JSON Schema to it, keeping
what it can:

- a node's `oneOf`/`anyOf`/`allOf` beside its properties are folded into them (and said in its
  description, see `_json_schema`); alternatives that are whole schemas become `anyOf`;
- a free-form object (`dict[str, Any]`: no properties, or only `additionalProperties`) has no
  Gemini form: it is declared as a string holding the object's JSON text, and
  `JsonTextFields.decode` turns what Gemini wrote there back into the object the tool takes.
  A tool whose arguments are such an object gets one parameter, `arguments`, for its text;
- a value the schema leaves open (`{}`, `true`, an array's missing `items`, where a recursive
  `$ref` is cut, a definition too large to write out: see `_refs`) has no Gemini form either
  (an `anyOf` of every type would still hold no object or array): it is declared as JSON
  text of any value, read back the same way (text that is not JSON is the string itself);
- a tuple's `prefixItems` become one item schema (an `anyOf` where they differ).

`None` for a tool without parameters (no properties, and no free-form root), which Gemini
wants omitted.

Gemini also has `parametersJsonSchema` (JSON Schema, exclusive with `parameters`): not used,
because the subset of JSON Schema it takes for function declarations is not spelt out, so
what it would reject (or ignore) cannot be known before a request fails, while `parameters`
is a documented, checked shape every Gemini model and Gemini-compatible endpoint takes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..model_json import read_model_json
from ._json import JSONObject, arr, is_arr, is_obj, obj
from ._json_schema import COMBINATORS, fold_alternatives, is_object_like, object_root

__all__ = ["JsonTextFields", "gemini_json_text_fields", "gemini_parameters"]

_GEMINI_KEPT = ("description", "minimum", "maximum", "minItems", "maxItems")
_GEMINI_FORMATS = {
    "string": {"enum", "date-time"},
    "number": {"float", "double"},
    "integer": {"int32", "int64"},
}
ROOT_TEXT = "arguments"
"""The one parameter of a tool whose arguments are a free-form object: their JSON text."""


@dataclass(frozen=True, slots=True)
class JsonTextFields:
    """Where the arguments Gemini writes hold JSON text the tool takes as an object."""

    here: bool = False
    """This value: a string of JSON text that stands for an object."""
    any_value: bool = False
    """This value: a string of JSON text that stands for any value."""
    whole: bool = False
    """The arguments: one parameter, `ROOT_TEXT`, holding their JSON text."""
    properties: Mapping[str, JsonTextFields] = field(default_factory=dict[str, "JsonTextFields"])
    items: JsonTextFields | None = None
    """Each item of this array."""

    def decode(self, value: Any) -> Any:
        """`value` with the JSON text in these places read back into what it says. Text that
        is not what the place holds (no JSON object where one stands, no JSON at all where any
        value does) stays as it is: the tool's own check then says what is wrong."""
        if self.whole and is_obj(value) and isinstance(value.get(ROOT_TEXT), str):
            parsed = _parsed(value[ROOT_TEXT])
            return parsed if is_obj(parsed) else value
        if self.here and isinstance(value, str):
            parsed = _parsed(value)
            return parsed if is_obj(parsed) else value
        if self.any_value and isinstance(value, str):
            parsed = _parsed(value)
            return value if parsed is _NOT_JSON else parsed
        if self.properties and is_obj(value):
            return {
                name: (self.properties[name].decode(sub) if name in self.properties else sub)
                for name, sub in value.items()
            }
        if self.items is not None and is_arr(value):
            return [self.items.decode(item) for item in value]
        return value


_NOT_JSON = object()


def _parsed(source: str) -> Any:
    """The JSON value `source` is the text of, or `_NOT_JSON`. `NaN` and `Infinity`, which
    Python reads but JSON does not have, are not JSON, nor is JSON nested too deeply
    (`model_json`)."""
    try:
        return read_model_json(source)
    except ValueError:
        return _NOT_JSON


_Converted = tuple[JSONObject, JsonTextFields | None]


def gemini_parameters(schema: Mapping[str, Any]) -> JSONObject | None:
    """The `parameters` of a Gemini function declaration, or None when there are none."""
    return _gemini_root(schema)[0]


def gemini_json_text_fields(schema: Mapping[str, Any]) -> JsonTextFields | None:
    """Where Gemini's arguments for a tool with this schema hold JSON text (see
    `JsonTextFields`), or None when nowhere."""
    return _gemini_root(schema)[1]


def _gemini_root(schema: Mapping[str, Any]) -> tuple[JSONObject | None, JsonTextFields | None]:
    root = object_root(schema).schema
    if obj(root.get("properties")):
        return _gemini(root)
    if not _free_form(root):
        return None, None  # no arguments; Gemini rejects an OBJECT with empty properties
    text = _json_text(root, {"description": "The tool's arguments."})
    parameters: JSONObject = {"type": "object", "properties": {ROOT_TEXT: text}}
    if _required(root):
        parameters["required"] = [ROOT_TEXT]
    return parameters, JsonTextFields(whole=True)


def _free_form(root: JSONObject) -> bool:
    """Whether a root without properties takes arguments all the same: `additionalProperties`
    other than false (`{"type": "object"}` alone is the usual way to say "no arguments")."""
    extra = root.get("additionalProperties")
    return extra is True or is_obj(extra) or bool(root.get("patternProperties"))


def _gemini(node: Any) -> _Converted:
    source = obj(node)
    if _folds(source):
        folded = fold_alternatives(source)
        source = folded.schema
        if folded.note:
            said = source.get("description")
            source["description"] = f"{said} {folded.note}" if said else folded.note
    for composite in ("anyOf", "oneOf"):
        if composite in source:
            return _gemini_union(source, arr(source[composite]))
    if "allOf" in source:
        return _gemini(_merged_parts(source))

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
        return _any_value(out, arr(source.get("enum")))
    if nullable:
        out["nullable"] = True
    plan: JsonTextFields | None = None
    if kind == "object":
        converted = {name: _gemini(sub) for name, sub in obj(source.get("properties")).items()}
        if not converted:
            return _json_text(source, out), JsonTextFields(here=True)
        out["properties"] = {name: schema for name, (schema, _) in converted.items()}
        required = [r for r in arr(source.get("required")) if r in converted]
        if required:
            out["required"] = required
        inner = {name: fields for name, (_, fields) in converted.items() if fields is not None}
        plan = JsonTextFields(properties=inner) if inner else None
    out = {"type": kind, **out}
    fmt = source.get("format")
    if isinstance(fmt, str) and fmt in _GEMINI_FORMATS.get(str(kind), set[str]()):
        out["format"] = fmt
    enum = arr(source.get("enum"))
    if enum and all(isinstance(v, str) for v in enum) and kind == "string":
        out["enum"] = enum
    if kind == "array":
        out["items"], item_fields = _gemini_items(source)
        plan = JsonTextFields(items=item_fields) if item_fields is not None else None
    return out, plan


def _folds(source: JSONObject) -> bool:
    """Whether `source`'s alternatives are parts of one object (folded into its properties)
    rather than whole schemas of their own (kept as `anyOf`)."""
    if not any(key in source for key in COMBINATORS):
        return False
    if "properties" in source or (source.get("type") is not None and is_object_like(source)):
        return True
    parts = [obj(p) for key in COMBINATORS for p in arr(source.get(key))]
    return all(is_object_like(p) and "type" not in p and "properties" not in p for p in parts)


def _merged_parts(source: JSONObject) -> JSONObject:
    """`allOf` parts that are not all objects (`[{"type": "string"}, {"minLength": 1}]`),
    merged into one schema."""
    merged: JSONObject = {k: v for k, v in source.items() if k != "allOf"}
    for part in map(obj, arr(source["allOf"])):
        merged = {**merged, **part}
    return merged


def _gemini_items(source: JSONObject) -> _Converted:
    """One item schema: Gemini has no tuples, and no array without `items`."""
    items = source.get("items")
    prefix = [p for p in arr(source.get("prefixItems")) if is_obj(p)]
    if prefix:
        distinct = [p for n, p in enumerate(prefix) if p not in prefix[:n]]
        if is_obj(items) and items not in distinct:
            distinct.append(items)
        return _gemini(distinct[0] if len(distinct) == 1 else {"anyOf": distinct})
    return _gemini(items if is_obj(items) else {})  # no items: any value


def _json_text(source: JSONObject, out: JSONObject) -> JSONObject:
    """A free-form object, declared as its JSON text (Gemini's OBJECT needs properties)."""
    said = "A JSON object, written as JSON text"
    values = obj(source.get("additionalProperties")).get("type")
    if isinstance(values, str):
        said += f", whose values are of type {values}"
    required = [f"`{name}`" for name in _required(source)]
    if required:
        said += ", with the keys " + ", ".join(required)
    described = out.get("description")
    return {
        **out,
        "type": "string",
        "description": f"{described} ({said}.)" if described else f"{said}.",
    }


def _required(source: JSONObject) -> list[str]:
    return [name for name in arr(source.get("required")) if isinstance(name, str)]


def _any_value(out: JSONObject, enum: list[Any] | None = None) -> _Converted:
    """A value the schema leaves open (or whose values Gemini's types cannot hold: `enum`),
    declared as its JSON text (see the module's docstring)."""
    said = "Any JSON value, written as JSON text"
    if enum:
        said = "JSON text of one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in enum)
    described = out.get("description")
    text: JSONObject = {
        **out,
        "type": "string",
        "description": f"{described} ({said}.)" if described else f"{said}.",
    }
    return text, JsonTextFields(any_value=True)


def _gemini_union(source: JSONObject, variants: list[Any], nullable: bool = False) -> _Converted:
    kept = [v for v in variants if obj(v).get("type") != "null"]
    nullable = nullable or len(kept) < len(variants)
    plan: JsonTextFields | None = None
    described = {"description": source["description"]} if "description" in source else {}
    if len(kept) == 1:
        # Its description too: one it has as JSON text says how to write the value.
        out, plan = _gemini({**obj(kept[0]), **described})
    elif kept:
        converted = [_gemini(v) for v in kept]
        if any(fields is not None and fields.any_value for _, fields in converted):
            return _any_value(described)  # one alternative is any value: so is the whole
        out: JSONObject = {"anyOf": [schema for schema, _ in converted], **described}
        texts = [schema for schema, fields in converted if fields is not None and fields.here]
        strings = [schema for schema, _ in converted if _may_be_string(schema)]
        if texts and len(strings) == len(texts):
            # Gemini's string can only be the object's JSON text here: read it back.
            plan = JsonTextFields(here=True)
    else:
        return _any_value(described)  # only null: JSON text `null` says it
    if nullable:
        out["nullable"] = True
    return out, plan


def _may_be_string(schema: JSONObject) -> bool:
    return schema.get("type") == "string" or any(
        _may_be_string(obj(v)) for v in arr(schema.get("anyOf"))
    )


def _infer_type(source: JSONObject) -> str | None:
    if "properties" in source or "additionalProperties" in source:
        return "object"
    if "items" in source or "prefixItems" in source:
        return "array"
    enum = arr(source.get("enum"))
    if enum and all(isinstance(v, str) for v in enum):
        return "string"
    return None
