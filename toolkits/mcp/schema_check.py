"""Whether a tool's `inputSchema` is valid JSON Schema, as a provider that checks it would ask.

A provider that validates tool schemas (OpenAI does) refuses the whole request over one bad
tool, so every tool an agent has would go with it. `schema_fault` says what is wrong with a
schema, or None:
- checked against the meta-schema of its `$schema`; when it names none (or one jsonschema does
  not know), 2020-12, draft-07 or draft-04, whichever takes it. A `pattern` is not read: it is
  ECMA 262's regex (`[\\w-.]`, lookbehinds), which no Python reader takes whole;
- a local `$ref` (`#/...`, `#anchor`) that points at nothing in the schema is a fault; one
  elsewhere (a URL) is not looked at, nor is any `$ref` under a nested `$id` (its base moved)
  or in a vendor's `x-` keyword (data, to the schema).
Unknown keywords, any `format` value and draft-07 `definitions` are valid, as they are to the
meta-schemas; a schema nested deeper than the checks can descend (about 100 levels) is taken
unchecked. Answers are kept by the schema's content, so listing 2,000 tools again checks
none of them again.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from typing import Any, cast
from urllib.parse import unquote

__all__ = ["schema_fault"]

_KEPT = 8_192
"""Answers kept (by a digest of the schema, so a large schema costs 32 bytes here)."""

_known: dict[bytes, str | None] = {}

_SAID_CHARS = 200

# Keywords whose values are instances, not schemas: a "$ref" key inside them is data.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples", "example"})


def schema_fault(schema: dict[str, Any]) -> str | None:
    """What makes `schema` invalid JSON Schema (where, and what), or None when it is valid."""
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except RecursionError:
        return None  # deeper than any check here goes: not refused for being unread
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    if digest in _known:
        return _known[digest]
    try:
        fault = _meta_fault(schema) or _dangling_ref(schema)
    except RecursionError:
        fault = None  # the same (jsonschema descends ~10 frames a level)
    if len(_known) >= _KEPT:
        del _known[next(iter(_known))]  # the oldest
    _known[digest] = fault
    return fault


def _meta_fault(schema: dict[str, Any]) -> str | None:
    # Imported here: jsonschema takes ~50 ms to import, and only a listing needs it.
    from jsonschema import exceptions, validators

    latest = validators.Draft202012Validator
    # None for a `$schema` jsonschema does not know (a misspelt or alias URI): as if unnamed.
    named: Any = validators.validator_for(schema, default=cast(Any, None))  # pyright: ignore[reportUnknownMemberType]
    chosen: Any = named or latest
    best: Any = exceptions.best_match  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    error: Any = best(_checker_of(chosen).iter_errors(schema))
    if error is None:
        return None
    if named is None:
        # A schema naming no draft may be written to an older one (JavaScript servers send
        # draft-07 tuples, `items: [...]`), which the providers' schemas are made from.
        older = (validators.Draft7Validator, validators.Draft4Validator)
        if any(_checker_of(draft).is_valid(schema) for draft in older):
            return None
    path = cast(list[str | int], list(error.absolute_path))
    return f"{_place(path)}: {_brief(str(error.message))}"


@functools.cache
def _checker_of(chosen: Any) -> Any:
    """A validator of schemas of the draft `chosen` (its meta-schema's), checking no format:
    a `pattern` is ECMA 262's regex, which no Python reader takes whole (`[\\w-.]`, a
    lookbehind JavaScript allows), so one that reads badly here may be a server's good one."""
    from jsonschema import validators

    if chosen is validators.Draft202012Validator:
        return chosen(_flat_2020_12())
    meta: Any = validators.validator_for(chosen.META_SCHEMA, default=chosen)  # pyright: ignore[reportUnknownMemberType]
    return meta(chosen.META_SCHEMA)


def _flat_2020_12() -> dict[str, Any]:
    """The draft 2020-12 meta-schema as one document: its vocabularies' keywords in one
    `properties`, their `$defs` in one, each `$dynamicRef` to the meta-schema a `$ref` to the
    root. It takes and refuses the same schemas, 4 times faster (jsonschema resolves each
    `$dynamicRef` through every vocabulary document)."""
    from jsonschema_specifications import REGISTRY

    base = "https://json-schema.org/draft/2020-12/"
    root: Any = REGISTRY.contents(base + "schema")
    keywords: dict[str, Any] = dict(root["properties"])
    defs: dict[str, Any] = {}
    for part in root["allOf"]:
        vocabulary: Any = REGISTRY.contents(base + part["$ref"])
        keywords.update(vocabulary["properties"])
        defs.update(vocabulary.get("$defs", {}))
    flat = {"type": ["object", "boolean"], "properties": keywords, "$defs": defs}
    return {"$schema": base + "schema", **cast(dict[str, Any], _to_root(flat))}


def _to_root(node: object) -> object:
    """`node` with its `$dynamicRef`s made `$ref`s to the root, and its `$ref`s (to a
    vocabulary's own `$defs`, all gathered at the root) made local."""
    if isinstance(node, list):
        return [_to_root(item) for item in cast(list[object], node)]
    if not isinstance(node, dict):
        return node
    out: dict[str, object] = {}
    for key, value in cast(dict[str, object], node).items():
        if key == "$dynamicRef" and value == "#meta":
            out["$ref"] = "#"
        elif key == "$ref" and isinstance(value, str):
            out["$ref"] = "#" + value.partition("#")[2]
        else:
            out[key] = _to_root(value)
    return out


def _dangling_ref(schema: dict[str, Any]) -> str | None:
    refs = list(_refs(schema, []))
    anchors = set(_anchors(schema)) if refs else set[str]()
    for ref, at in refs:
        if not ref.startswith("#"):
            continue  # another document's: not ours to fetch
        fragment = unquote(ref[1:])
        pointer = not fragment or fragment.startswith("/")
        if not (_points(schema, fragment) if pointer else fragment in anchors):
            return f"{_place(at)}: $ref {ref!r} points at nothing in the schema"
    return None


def _refs(node: object, at: list[str | int]) -> Iterator[tuple[str, list[str | int]]]:
    """Every local-looking `$ref` in the schema `node`, and where it is; none under an `$id`
    below the root (its refs are read against another base)."""
    if isinstance(node, list):
        for index, item in enumerate(cast(list[object], node)):
            yield from _refs(item, [*at, index])
        return
    if not isinstance(node, dict):
        return
    fields = cast(dict[str, object], node)
    if at and isinstance(fields.get("$id"), str):
        return
    ref = fields.get("$ref")
    if isinstance(ref, str):
        yield ref, [*at, "$ref"]
    for key, value in fields.items():
        if key not in _DATA_KEYWORDS and not key.startswith("x-"):
            yield from _refs(value, [*at, key])


def _anchors(node: object) -> Iterator[str]:
    if isinstance(node, list):
        for item in cast(list[object], node):
            yield from _anchors(item)
    elif isinstance(node, dict):
        fields = cast(dict[str, object], node)
        for key in ("$anchor", "$dynamicAnchor", "$id", "id"):
            value = fields.get(key)
            if isinstance(value, str):
                yield value.removeprefix("#")
        for key, value in fields.items():
            if key not in _DATA_KEYWORDS:
                yield from _anchors(value)


def _points(schema: object, pointer: str) -> bool:
    """Whether the JSON pointer `pointer` names something in `schema`."""
    node = schema
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = cast(dict[str, object], node)[part]
        elif (
            isinstance(node, list) and part.isdigit() and int(part) < len(cast(list[object], node))
        ):
            node = cast(list[object], node)[int(part)]
        else:
            return False
    return True


def _place(path: list[str | int]) -> str:
    return ".".join(str(part) for part in path) or "the schema"


def _brief(message: str) -> str:
    return message if len(message) <= _SAID_CHARS else message[: _SAID_CHARS - 3] + "..."
