"""Tool schemas for Anthropic, and the way back for the arguments it writes.

Anthropic takes a tool's schema as `_json_schema.object_root` leaves it with its `$ref`s kept
(its definitions under `$defs`: a recursive type is told whole), but one rule: each top-level
property key must match `^[a-zA-Z0-9_.-]{1,64}$`, or the whole request is refused
("tools.N.custom.input_schema.properties: Property keys should match pattern ..."), and with
it every other tool. Keys deeper in are not checked. Servers publish such keys: `filter[id]`,
OData's `$top`, `名前`, `a b`, keys over 64 characters. Each one is declared under a key the
API takes (`filter_id_`: other characters become `_`; one too long, or one that would take a
key already there, keeps its head plus 8 hex digits of a hash of the key), its own key said
in its description, and `PropertyKeys.restore` gives the arguments the model writes back the
keys the tool takes. The properties of each definition under `$defs` are declared the same
way (a definition is a top-level schema of its own, and may stand at the root), and restored
wherever the arguments hold one, at any depth.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._json import JSONObject, arr, is_arr, is_obj, obj
from ._json_schema import object_root

__all__ = ["PropertyKeys", "anthropic_input_schema", "anthropic_property_keys"]

_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
_KEY_LENGTH = 64
_DEFS = "#/$defs/"


_Keys = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class PropertyKeys:
    """The argument keys a tool is declared to Anthropic under, where they are not its own:
    at the top level, and in the definitions under `$defs`."""

    own: _Keys
    """Each declared top-level key and the tool's own key it stands for."""
    defs: Mapping[str, _Keys] = field(default_factory=dict[str, _Keys])
    """The same, for the properties of each definition (by its name under `$defs`)."""
    schema: JSONObject = field(default_factory=dict[str, Any])
    """The `input_schema` as declared: where in the arguments each definition stands."""

    def restore(self, arguments: Any) -> Any:
        """`arguments` as the model wrote them, under the tool's own keys. A key the model
        wrote that was not declared (the tool's own key, seen in its description) stays."""
        return _Mapper(self, back=True).value(arguments, self.schema, self.own)

    def declared(self, arguments: Mapping[str, Any]) -> JSONObject:
        """`arguments` under the keys Anthropic was told (a call that goes back to it)."""
        return obj(_Mapper(self, back=False).value(dict(arguments), self.schema, self.own))


def anthropic_input_schema(schema: Mapping[str, Any]) -> JSONObject:
    """The `input_schema` of an Anthropic tool for a tool with this schema."""
    root = object_root(schema, keep_refs=True).schema
    defs = obj(root.get("$defs"))
    if defs:
        root["$defs"] = {name: _with_declared_keys(obj(sub)) for name, sub in defs.items()}
    return _with_declared_keys(root)


def _with_declared_keys(node: JSONObject) -> JSONObject:
    """`node` with its properties under keys the API takes."""
    declared = _declared_keys(obj(node.get("properties")))
    if declared is None:
        return node
    node = dict(node)
    node["properties"] = {
        declared.get(key, key): _saying_own_key(sub, key) if key in declared else sub
        for key, sub in obj(node["properties"]).items()
    }
    if "required" in node:
        node["required"] = [
            declared.get(r, r) if isinstance(r, str) else r for r in arr(node["required"])
        ]
    return node


def anthropic_property_keys(schema: Mapping[str, Any]) -> PropertyKeys | None:
    """How the arguments Anthropic writes for a tool with this schema get their own keys
    back, or None when every key was declared as it is."""
    properties = schema.get("properties")
    if (
        is_obj(properties)
        and all(_KEY.fullmatch(key) for key in properties)
        and not any(
            key in schema for key in ("$ref", "allOf", "oneOf", "anyOf", "$defs", "definitions")
        )
    ):
        return None  # the common case, told without converting the schema
    root = object_root(schema, keep_refs=True).schema
    top = _declared_keys(obj(root.get("properties")))
    defs = {
        name: {wire: own for own, wire in declared.items()}
        for name, sub in obj(root.get("$defs")).items()
        if (declared := _declared_keys(obj(obj(sub).get("properties")))) is not None
    }
    if top is None and not defs:
        return None
    own = {wire: own for own, wire in (top or {}).items()}
    return PropertyKeys(own, defs, anthropic_input_schema(schema) if defs else {})


class _Mapper:
    """Arguments walked beside the declared schema, each object that a definition with
    declared keys describes given its keys back (or, not `back`, its declared keys)."""

    def __init__(self, keys: PropertyKeys, *, back: bool):
        self.defs = obj(keys.schema.get("$defs"))
        self.keys = keys.defs
        self.back = back

    def value(self, value: Any, schema: Any, keys: _Keys, seen: tuple[str, ...] = ()) -> Any:
        node = obj(schema)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS) and ref not in seen:
            name = ref.removeprefix(_DEFS).replace("~1", "/").replace("~0", "~")
            return self.value(value, self.defs.get(name), self.keys.get(name, {}), (*seen, ref))
        if is_arr(value):
            items = node.get("items")
            prefix = arr(node.get("prefixItems"))
            return [
                self.value(item, prefix[n] if n < len(prefix) else items, {})
                for n, item in enumerate(value)
            ]
        if not is_obj(value):
            return value
        for part in arr(node.get("allOf")):
            value = self.value(value, part, {}, seen)
        variant = self._variant(value, node)
        if variant is not None:
            value = self.value(value, variant, {}, seen)
        wire = keys if self.back else {own: key for key, own in keys.items()}
        properties = obj(node.get("properties"))
        extra = node.get("additionalProperties")
        out: JSONObject = {}
        for key, sub in value.items():
            declared = key if self.back else wire.get(key, key)
            inner = properties.get(declared, extra if declared not in properties else None)
            out[wire.get(key, key)] = self.value(sub, inner, {}) if inner is not None else sub
        return out

    def _variant(self, value: JSONObject, node: JSONObject) -> Any:
        """The `anyOf`/`oneOf` alternative an object `value` is taken to be: the first one
        that declares every key it has (as the model wrote them, going back)."""
        for variant in [*arr(node.get("anyOf")), *arr(node.get("oneOf"))]:
            resolved = obj(variant)
            ref = resolved.get("$ref")
            name = ref.removeprefix(_DEFS) if isinstance(ref, str) else None
            if name is not None:
                resolved = obj(self.defs.get(name.replace("~1", "/").replace("~0", "~")))
            declared = obj(resolved.get("properties"))
            wire = (
                {}
                if self.back or name is None
                else {own: key for key, own in self.keys.get(name, {}).items()}
            )
            if declared and all(wire.get(key, key) in declared for key in value):
                return variant
        return None


def _declared_keys(properties: Mapping[str, Any]) -> dict[str, str] | None:
    """Each key of `properties` the API refuses, and the one it is declared under (all of
    them different from each other and from the keys kept); None when none is refused."""
    if all(_KEY.fullmatch(key) for key in properties):
        return None
    taken = {key for key in properties if _KEY.fullmatch(key)}
    declared: dict[str, str] = {}
    for key in properties:
        if key in taken:
            continue
        fitted = re.sub(r"[^a-zA-Z0-9_.-]", "_", key) or "_"
        if len(fitted) > _KEY_LENGTH or fitted in taken:
            fitted = _hashed(fitted, key)
        while fitted in taken:  # only if a key the tool has is already this one
            fitted = _hashed(fitted, fitted)
        taken.add(fitted)
        declared[key] = fitted
    return declared


def _hashed(head: str, key: str) -> str:
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{head[: _KEY_LENGTH - 9]}_{digest}"


def _saying_own_key(schema: Any, key: str) -> Any:
    """`schema` whose description names the tool's own key for it (a boolean schema, `true`,
    becomes `{}`: the same, with room to say it)."""
    if not is_obj(schema) and schema is not True:
        return schema
    node = dict(obj(schema))
    said = f'The tool\'s own name for this argument is "{key}".'
    description = node.get("description")
    node["description"] = (
        f"{description}\n\n{said}" if isinstance(description, str) and description else said
    )
    return node
