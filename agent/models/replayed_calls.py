"""A model's tool calls as they go back to it, in the conversation of its next call.

The agent may give a call a new id (the model gave one another call has: results are matched
to calls by id), and a model may write a call its API takes back from no one: an empty name,
arguments that are not an object. Every provider sends a call back under the id the agent uses,
with a name the API takes and an object for arguments, so a call and its result pair up and
the next request is not refused (a 400 fails a run for good). A provider that replays its raw
answer (to keep thinking blocks and signatures) changes only these fields of its call blocks.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeGuard

from ..messages import ToolCall
from ._json import JSONObject

__all__ = ["PLACEHOLDER_NAME", "raw_calls", "sendable_name"]

PLACEHOLDER_NAME = "_"
"""The name an empty one goes back as: one every provider takes (Gemini's `gemini_name` too)."""

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A call's name as OpenAI (`tool_calls[].function.name`) and Anthropic (`tool_use.name`)
take it; any other is a 400."""
_NAME_LENGTH = 64


def sendable_name(name: str, offered: Collection[str]) -> str:
    """`name` as a call's name goes back: an offered tool's name (the request's `tools` took
    it) or one that fits `_NAME` as it is; otherwise each other character becomes `_`, an
    empty name `PLACEHOLDER_NAME`, and one too long keeps its head plus a hash of the whole."""
    if name in offered or _NAME.fullmatch(name):
        return name
    fitted = re.sub(r"[^A-Za-z0-9_-]", "_", name) or PLACEHOLDER_NAME
    if len(fitted) > _NAME_LENGTH:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        fitted = f"{fitted[: _NAME_LENGTH - 9]}_{digest}"
    return fitted


def raw_calls(
    items: Sequence[Any],
    calls: Sequence[ToolCall],
    is_call: Callable[[Any], TypeGuard[JSONObject]],
    replayed: Callable[[JSONObject, ToolCall], JSONObject],
) -> list[Any] | None:
    """`items` (a raw answer's content blocks or parts) with each call among them as
    `replayed` makes it from the message's call of the same place (a provider reads its calls
    in order), the others as they are. None when the items do not hold the message's calls
    one for one: then the message goes back as its fields say."""
    places = [i for i, item in enumerate(items) if is_call(item)]
    if len(places) != len(calls):
        return None
    out = list(items)  # a copy: the caller's turn may be extended
    for place, call in zip(places, calls, strict=True):
        out[place] = replayed(items[place], call)
    return out
