"""The answer's schema as Anthropic's structured outputs take it (`output_config.format`).

Native mode's schema is already strict (`agent.native_output`): every object closed, every
property required. Anthropic's grammar takes that, with less of JSON Schema:

- no recursive schema (a `$ref` that reaches back to itself): refused, with the reason;
- no enum of objects or arrays: refused too;
- constraints it does not hold (`minimum`, `maxLength`, `pattern`, `minItems` above 1,
  `maxItems`, `uniqueItems`, a string `format` it does not know, `prefixItems`...) are moved
  into the node's description, as Anthropic's SDKs do: the model reads them there, and the
  answer is still validated against the whole schema (one that breaks them goes back to it).

Which models have it: Claude Haiku 4.5, Sonnet 4.5, Opus 4.5 and later. The ones known
without it are refused before a request (`has_structured_outputs`); another that has not
gets the API's 400, said with what to do (`AnthropicModel`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ._json import JSONObject, is_arr, is_obj, obj

__all__ = ["NO_STRUCTURED_OUTPUTS", "anthropic_output_schema", "has_structured_outputs"]

NO_STRUCTURED_OUTPUTS = (
    "has no structured outputs (Claude Haiku 4.5, Sonnet 4.5, Opus 4.5 and later have)"
)

_KEPT = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "enum",
        "const", "$ref", "$defs", "definitions", "title", "description",
    }
)  # fmt: skip
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
_WITHOUT = re.compile(r"claude-(instant|[123])|claude-(opus|sonnet)-4(-0)?(-\d{8})?$")
"""Models that came before structured outputs (Claude 3 and older, Opus 4 and Sonnet 4)."""


def has_structured_outputs(model: str) -> bool:
    """Whether the Anthropic `model` may take `output_config.format`: False for the models
    known to have come before it; a newer one is taken to have it."""
    return _WITHOUT.match(model) is None


def anthropic_output_schema(schema: Mapping[str, Any]) -> JSONObject:
    """`schema` (a strict one) as Anthropic's `output_config.format.schema`. Raises
    `ValueError` saying why it cannot be."""
    root = dict(schema)
    _refuse_recursion(root)
    return obj(_fitted(root, "the schema"))


def _fitted(node: Any, where: str) -> Any:
    if not is_obj(node):
        return node
    enum = node.get("enum")
    if is_arr(enum) and any(is_obj(v) or is_arr(v) for v in enum):
        raise ValueError(f"{where} has an enum of objects or arrays, which Anthropic cannot hold")
    out: JSONObject = {}
    moved: JSONObject = {}
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and is_obj(value):
            out[key] = {name: _fitted(sub, f"{where} at {name!r}") for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and is_obj(value):
            out[key] = _fitted(value, where)
        elif key == "anyOf" and is_arr(value):
            out[key] = [_fitted(sub, where) for sub in value]
        elif key in _KEPT or _held(key, value):
            out[key] = value
        else:
            moved[key] = value
    if moved:
        said = ", ".join(f"{key}: {json.dumps(value)}" for key, value in moved.items())
        description = node.get("description")
        head = f"{description}\n\n" if isinstance(description, str) and description else ""
        out["description"] = head + "{" + said + "}"
    return out


def _held(key: str, value: Any) -> bool:
    """Whether the grammar holds this constraint: a format it knows, `minItems` 0 or 1."""
    return (key == "format" and value in _FORMATS) or (key == "minItems" and value in (0, 1))


def _refuse_recursion(root: JSONObject) -> None:
    """Raises `ValueError` when a definition reaches itself through its `$ref`s."""
    defs = {
        f"#/{group}/{name}": sub
        for group in ("$defs", "definitions")
        for name, sub in obj(root.get(group)).items()
    }
    if "#" in _refs(root):
        raise ValueError(
            "the schema is recursive ('#' refers back to its root), which Anthropic's "
            "structured outputs cannot hold"
        )
    reaches = {ref: _refs(sub) for ref, sub in defs.items()}
    for start in reaches:
        seen: set[str] = set()
        todo = list(reaches[start])
        while todo:
            ref = todo.pop()
            if ref == start:
                raise ValueError(
                    f"the schema is recursive ({start!r} refers back to itself), which "
                    "Anthropic's structured outputs cannot hold"
                )
            if ref not in seen:
                seen.add(ref)
                todo += reaches.get(ref, set())


def _refs(node: Any) -> set[str]:
    """The `$ref`s anywhere inside `node`."""
    if is_arr(node):
        return set[str]().union(*(_refs(item) for item in node))
    if not is_obj(node):
        return set()
    found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set[str]()
    return found.union(*(_refs(value) for value in node.values()))
