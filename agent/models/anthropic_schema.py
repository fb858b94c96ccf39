"""Tool schemas for Anthropic, and the way back for the arguments it writes.

Anthropic takes a tool's schema as `_json_schema.object_root` leaves it, but one rule: each
top-level property key must match `^[a-zA-Z0-9_.-]{1,64}$`, or the whole request is refused
("tools.N.custom.input_schema.properties: Property keys should match pattern ..."), and with
it every other tool. Keys deeper in are not checked. Servers publish such keys: `filter[id]`,
OData's `$top`, `名前`, `a b`, keys over 64 characters. Each one is declared under a key the
API takes (`filter_id_`: other characters become `_`; one too long, or one that would take a
key already there, keeps its head plus 8 hex digits of a hash of the key), its own key said
in its description, and `PropertyKeys.restore` gives the arguments the model writes back the
keys the tool takes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._json import JSONObject, arr, is_obj, obj
from ._json_schema import object_root

__all__ = ["PropertyKeys", "anthropic_input_schema", "anthropic_property_keys"]

_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
_KEY_LENGTH = 64


@dataclass(frozen=True, slots=True)
class PropertyKeys:
    """The top-level argument keys a tool is declared to Anthropic under, where they are not
    its own."""

    own: Mapping[str, str]
    """Each declared key and the tool's own key it stands for."""

    def restore(self, arguments: Any) -> Any:
        """`arguments` as the model wrote them, under the tool's own keys. A key the model
        wrote that was not declared (the tool's own key, seen in its description) stays."""
        if not is_obj(arguments):
            return arguments
        return {self.own.get(key, key): value for key, value in arguments.items()}

    def declared(self, arguments: Mapping[str, Any]) -> JSONObject:
        """`arguments` under the keys Anthropic was told (a call that goes back to it)."""
        wire = {own: key for key, own in self.own.items()}
        return {wire.get(key, key): value for key, value in arguments.items()}


def anthropic_input_schema(schema: Mapping[str, Any]) -> JSONObject:
    """The `input_schema` of an Anthropic tool for a tool with this schema."""
    root = object_root(schema).schema
    declared = _declared_keys(obj(root.get("properties")))
    if declared is None:
        return root
    properties = obj(root["properties"])
    root["properties"] = {
        declared.get(key, key): _saying_own_key(sub, key) if key in declared else sub
        for key, sub in properties.items()
    }
    if "required" in root:
        root["required"] = [
            declared.get(r, r) if isinstance(r, str) else r for r in arr(root["required"])
        ]
    return root


def anthropic_property_keys(schema: Mapping[str, Any]) -> PropertyKeys | None:
    """How the arguments Anthropic writes for a tool with this schema get their own keys
    back, or None when every key was declared as it is."""
    properties = schema.get("properties")
    if (
        is_obj(properties)
        and all(_KEY.fullmatch(key) for key in properties)
        and not any(key in schema for key in ("$ref", "allOf", "oneOf", "anyOf"))
    ):
        return None  # the common case, told without converting the schema
    declared = _declared_keys(obj(object_root(schema).schema.get("properties")))
    if declared is None:
        return None
    return PropertyKeys({wire: own for own, wire in declared.items()})


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
