"""The JSON Schema work every provider's tool schema starts from.

- `inline_refs` / `with_defs` (see `_refs`): local `$ref`s written out in place (bounded), or
  kept with their definitions under the root's `$defs`.
- `fold_alternatives`: an object schema's `allOf`/`oneOf`/`anyOf` folded into its properties.
  No provider takes them at the root of a tool's parameters (OpenAI and Anthropic refuse the
  request, Gemini wants an OBJECT), and Gemini loses the properties beside them anywhere.
  Every property an alternative names becomes a property, required only where every
  alternative requires it, and a sentence says what the alternatives asked
  (`{"oneOf": [{"required": ["id"]}, {"required": ["url"]}]}` becomes "Arguments must match
  exactly one of these forms: (1) with `id`; (2) with `url`.").
- `object_root`: both, for the root of a tool's parameters, with what could not be kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._json import JSONObject, arr, is_arr, is_obj, obj
from ._refs import inline_refs, with_defs

__all__ = [
    "COMBINATORS",
    "Folded",
    "each_subschema",
    "fold_alternatives",
    "inline_refs",
    "is_object_like",
    "object_root",
]

_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
COMBINATORS = ("allOf", "oneOf", "anyOf")
_NOT_AT_ROOT = ("not", "enum", "const")  # OpenAI refuses them at the root of parameters
_NOT_AN_OBJECT = ("items", "prefixItems", "enum", "const")

_SUBSCHEMA = (
    "additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames",
    "unevaluatedProperties", "unevaluatedItems",
)  # fmt: skip
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


def each_subschema(node: JSONObject, change: Callable[[Any], Any]) -> JSONObject:
    """A copy of `node` with `change` applied to each schema directly inside it."""
    out = dict(node)
    for key in _SUBSCHEMA:
        if is_obj(node.get(key)):
            out[key] = change(node[key])
    for key in _SUBSCHEMA_LISTS:
        if is_arr(node.get(key)):
            out[key] = [change(sub) for sub in node[key]]
    for key in _NAME_MAPS:
        if is_obj(node.get(key)):
            out[key] = {name: change(sub) for name, sub in node[key].items()}
    return out


@dataclass(frozen=True, slots=True)
class Folded:
    schema: JSONObject
    note: str = ""
    """What the alternatives asked, in words ("" when there were none)."""
    lost: tuple[str, ...] = ()
    """What the schema asked that the folded one does not, and `note` does not say."""


def object_root(schema: Mapping[str, Any], *, keep_refs: bool = False) -> Folded:
    """`schema` as the parameters of a tool: an object schema at the root with `properties`,
    its alternatives folded in, and its `$ref`s written out in place, or with `keep_refs` kept
    (their definitions under `$defs`, last). MCP asks servers for an object root; not every
    server obeys."""
    inlined = with_defs(schema) if keep_refs else inline_refs(schema)
    defs = inlined.pop("$defs", None)
    lost: list[str] = []
    kind = inlined.get("type")
    if kind is not None and kind != "object" and not (is_arr(kind) and "object" in kind):
        lost.append(f"its arguments are not a JSON object (type {json.dumps(kind)})")
    lost += [f"the `{key}` at its root" for key in _NOT_AT_ROOT if key in inlined]
    root = {k: v for k, v in inlined.items() if k not in _NOT_AT_ROOT}
    folded = fold_alternatives(root)
    out = {**folded.schema, "type": "object"}
    if not is_obj(out.get("properties")):
        out["properties"] = {}
    if defs:
        out["$defs"] = defs
    return Folded(out, folded.note, (*lost, *folded.lost))


def is_object_like(schema: JSONObject) -> bool:
    """Whether `schema` may describe a JSON object (one without a type may)."""
    kind = schema.get("type")
    if kind is None:
        return not any(key in schema for key in _NOT_AN_OBJECT)
    return kind == "object" or (is_arr(kind) and "object" in kind)


def fold_alternatives(node: JSONObject) -> Folded:
    """`node` without `allOf`/`oneOf`/`anyOf`: their object alternatives folded into its
    properties (see the module's docstring). Alternatives that are not objects are dropped,
    and named in `lost`."""
    if not any(key in node for key in COMBINATORS):
        return Folded(node)
    out = {k: v for k, v in node.items() if k not in COMBINATORS}
    properties = dict(obj(node.get("properties")))
    own = set(properties)
    required = [name for name in arr(node.get("required")) if isinstance(name, str)]
    notes: list[str] = []
    lost: list[str] = []
    unions: set[str] = set()

    def add_properties(part: JSONObject) -> None:
        for name, sub in obj(part.get("properties")).items():
            if name not in properties:
                properties[name] = sub
            elif name not in own and properties[name] != sub:
                # Alternatives that type it differently: any of their types may come.
                options = arr(properties[name]["anyOf"]) if name in unions else [properties[name]]
                if sub not in options:
                    properties[name] = {"anyOf": [*options, sub]}
                    unions.add(name)

    for part in map(obj, arr(node.get("allOf"))):
        if not is_object_like(part):
            lost.append("an `allOf` part that is not an object")
            continue
        inner = fold_alternatives(part)
        add_properties(inner.schema)
        required += [r for r in _required(inner.schema) if r not in required]
        notes += [inner.note] if inner.note else []
        lost += inner.lost

    for key in ("oneOf", "anyOf"):
        variants = [obj(v) for v in arr(node.get(key))]
        kept = [fold_alternatives(v).schema for v in variants if is_object_like(v)]
        if len(kept) < len(variants):
            lost.append(f"the `{key}` alternatives that are not objects")
        if not kept:
            continue
        for variant in kept:
            add_properties(variant)
        in_every = set[str].intersection(*(set(_required(v)) for v in kept))
        required += [r for r in _required(kept[0]) if r in in_every and r not in required]
        if len(kept) > 1:
            notes.append(_alternatives(key, kept, set(required)))

    out["properties"] = properties
    if required:
        out["required"] = required
    return Folded(out, " ".join(notes), tuple(lost))


def _required(schema: JSONObject) -> list[str]:
    return [name for name in arr(schema.get("required")) if isinstance(name, str)]


def _alternatives(key: str, variants: list[JSONObject], required_anyway: set[str]) -> str:
    how = "exactly one" if key == "oneOf" else "at least one"
    forms = "; ".join(
        f"({number}) {_form(variant, required_anyway)}"
        for number, variant in enumerate(variants, 1)
    )
    return f"Arguments must match {how} of these forms: {forms}."


def _form(variant: JSONObject, required_anyway: set[str]) -> str:
    """One alternative in words: what it requires beyond the rest, and its fixed values."""
    properties = obj(variant.get("properties"))
    fixed = {name: _fixed(obj(sub)) for name, sub in properties.items()}
    fixed = {name: value for name, value in fixed.items() if value is not None}
    names = [n for n in _required(variant) if n not in required_anyway and n not in fixed]
    said = ["with " + ", ".join(f"`{name}`" for name in names)] if names else []
    said += [f"`{name}` = {json.dumps(value, ensure_ascii=False)}" for name, value in fixed.items()]
    if not said:
        said = [
            "with any of " + ", ".join(f"`{name}`" for name in properties)
            if properties
            else "with no other arguments"
        ]
    title = variant.get("title")
    head = f"{title}: " if isinstance(title, str) and title else ""
    return head + ", ".join(said)


def _fixed(schema: JSONObject) -> Any:
    """The one value `schema` allows, if it names one (`const`, or an `enum` of one)."""
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    return enum[0] if is_arr(enum) and len(enum) == 1 else None
