"""Tool results of text alone, checked and shaped for a protocol era without the SDK's models.

Most tool results are a list of text blocks, with perhaps `isError` and `_meta`. A call passed
through checks its result as the node's SDK client would (`CallToolResult`) and shapes it for
the client's era as the SDK's server would (`serialize_server_result`): two pydantic models,
10-20 us each, about a tenth of the gateway's CPU for a small call. For this one shape both
outcomes are known: the check cannot refuse it, and the shaped result is the same fields in
the models' order, `resultType` added for a 2026-07-28 client (a property test holds this
against the SDK in every era). Anything else, a block with annotations or a float in `_meta`
that is not finite included, goes through the models as before.
"""

from __future__ import annotations

import math
from typing import Any, cast

from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import SERVER_RESULTS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["is_plain_text", "plain_for_era"]

JsonObject = dict[str, Any]

_FIELDS = frozenset({"content", "isError", "_meta", "resultType"})
_BLOCK = frozenset({"type", "text"})
_ERAS = frozenset(version for method, version in SERVER_RESULTS if method == "tools/call")
_DEPTH = 16
"""How deep `_meta` is looked through (deeper: the models judge it)."""


def is_plain_text(result: object) -> bool:
    """Whether `result` (decoded JSON) is a tool result of text blocks alone: `content` a list
    of `{"type": "text", "text": ...}`, `isError` a bool if there, `resultType` "complete" if
    there, `_meta` an object if there."""
    if type(result) is not dict:
        return False
    fields = cast("JsonObject", result)
    content = fields.get("content")
    if type(content) is not list or not fields.keys() <= _FIELDS:
        return False
    for block in cast("list[object]", content):
        if type(block) is not dict:
            return False
        text = cast("JsonObject", block)
        if text.keys() != _BLOCK or text["type"] != "text" or type(text["text"]) is not str:
            return False
    return (
        type(fields.get("isError", False)) is bool
        and fields.get("resultType", "complete") == "complete"
        and type(fields.get("_meta", fields)) is dict
    )


def plain_for_era(result: JsonObject, version: str) -> JsonObject | None:
    """A plain-text `result` (`is_plain_text`) as the SDK shapes it for a `version` client
    (`serialize_server_result("tools/call", version, {"resultType": "complete", **result})`);
    None for a version the SDK does not know, or a `_meta` value that shaping would change
    (JSON mode writes NaN and infinity as null; a 2026-07-28 `_meta` drops a null). The
    server's `serverInfo` stamp in `_meta` is left as it came: whoever serves the result
    replaces it."""
    if version not in _ERAS:
        return None
    modern = version in MODERN_PROTOCOL_VERSIONS
    shaped: JsonObject = {}
    if "_meta" in result:
        meta = cast("JsonObject", result["_meta"])
        for key, value in meta.items():
            if key != SERVER_INFO_META_KEY and (not _as_is(value, 0) or (modern and value is None)):
                return None
        shaped["_meta"] = meta
    shaped["content"] = [{"text": block["text"], "type": "text"} for block in result["content"]]
    if "isError" in result:
        shaped["isError"] = result["isError"]
    if modern:
        shaped["resultType"] = "complete"
    return shaped


def _as_is(value: object, depth: int) -> bool:
    """Whether pydantic's JSON-mode dump of decoded JSON `value` (typed `Any`) is `value`."""
    if type(value) is float:
        return math.isfinite(value)
    if type(value) is list:
        items = cast("list[object]", value)
    elif type(value) is dict:
        items = cast("JsonObject", value).values()
    else:
        return True  # str, int, bool, None
    return depth < _DEPTH and all(_as_is(item, depth + 1) for item in items)
